import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MongoBulkWriteError, MongoNetworkError, type BulkWriteResult, type Db } from 'mongodb';
import { AppError } from '../../src/errors.ts';
import { MongoCollection } from '../../src/store/mongo-collection.ts';

/**
 * A bulk write whose connection is lost before the server answers: the
 * driver throws a MongoBulkWriteError with no write errors around its
 * network error. That is a failed write (a 503), never a write of nothing.
 */
test('a bulk write whose connection was lost is a 503, not a success with nothing written', async () => {
  const lost = new MongoBulkWriteError(
    new MongoNetworkError('connection 4 to 127.0.0.1:27017 closed'),
    {} as BulkWriteResult,
  );
  const db = {
    collection: () => ({
      bulkWrite: async () => {
        throw lost;
      },
    }),
  } as unknown as Db;
  const col = new MongoCollection('unit_bulk', db, {
    scansIdLists: false,
    writesOneStatementEach: false,
    updatesReadThenWrite: false,
    groupsWithoutMin: false,
  });
  await assert.rejects(
    col.bulkWrite({ tenantId: 't1' }, [{ updateOne: { filter: { id: 'a' }, update: { $set: { x: 1 } } } }]),
    (err: AppError) => err instanceof AppError && err.code === 'service_unavailable' && err.cause === lost,
  );
});

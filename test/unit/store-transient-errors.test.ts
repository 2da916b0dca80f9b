import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AppError } from '../../src/errors.ts';
import { storeTransientErrors, withTransientRetry } from '../../src/store/transient-errors.ts';

/** Error shapes as the MongoDB driver and FerretDB produce them. */
const locked = () =>
  Object.assign(new Error('database is locked (5) (SQLITE_BUSY)'), { name: 'MongoServerError', code: 1 });
const noBackendConnection = () =>
  Object.assign(
    new Error(
      '[msg_findandmodify.go:137 handler.(*Handler).findAndModifyDocument] [collection.go:109 postgresql.(*collection).Query] failed to connect to `user=postgres database=relaybox`:\n\t127.0.0.1:5432 (127.0.0.1): server error: FATAL: sorry, too many clients already (SQLSTATE 53300)',
    ),
    { name: 'MongoServerError', code: 1 },
  );
const networkLost = () =>
  Object.assign(new Error('connection 3 to 127.0.0.1:27017 closed'), { name: 'MongoNetworkError' });
const unreachable = () =>
  Object.assign(new Error('Server selection timed out after 3000 ms'), { name: 'MongoServerSelectionError' });

async function counted(operation: string, outcome: string): Promise<number> {
  const metric = await storeTransientErrors.get();
  return metric.values.find((v) => v.labels.operation === operation && v.labels.outcome === outcome)?.value ?? 0;
}

function failing(errors: (() => Error)[]) {
  let calls = 0;
  return {
    work: async () => {
      const next = errors[calls++];
      if (next) throw next();
      return 'done';
    },
    calls: () => calls,
  };
}

test('a write the backend did not execute (database is locked) is retried, and the recovery counted', async () => {
  const op = failing([locked, locked]);
  assert.equal(await withTransientRetry('unit_locked', false, op.work), 'done');
  assert.equal(op.calls(), 3);
  assert.equal(await counted('unit_locked', 'retried'), 1);
});

test('a write FerretDB could not run for want of a PostgreSQL connection is retried, and the recovery counted', async () => {
  const op = failing([noBackendConnection]);
  assert.equal(await withTransientRetry('unit_no_backend_connection', false, op.work), 'done');
  assert.equal(op.calls(), 2);
  assert.equal(await counted('unit_no_backend_connection', 'retried'), 1);
});

test('a write that may have been applied (connection lost) is not retried: 503 with Retry-After, counted', async () => {
  const op = failing([networkLost]);
  await assert.rejects(
    withTransientRetry('unit_write', false, op.work),
    (err: AppError) => err.code === 'service_unavailable' && err.statusCode === 503 && err.retryAfterSeconds === 1,
  );
  assert.equal(op.calls(), 1);
  assert.equal(await counted('unit_write', 'unavailable'), 1);
});

test('a read is retried on a lost connection; after three failures it is a 503', async () => {
  const recovered = failing([networkLost]);
  assert.equal(await withTransientRetry('unit_read', true, recovered.work), 'done');
  const down = failing([networkLost, networkLost, networkLost, networkLost]);
  await assert.rejects(
    withTransientRetry('unit_read', true, down.work),
    (err: AppError) => err.code === 'service_unavailable',
  );
  assert.equal(down.calls(), 3);
});

test('an unreachable store is a 503 at once (the driver already waited), and any other error passes through unchanged', async () => {
  const op = failing([unreachable]);
  await assert.rejects(
    withTransientRetry('unit_unreachable', true, op.work),
    (err: AppError) => err.code === 'service_unavailable',
  );
  assert.equal(op.calls(), 1);
  const bug = new TypeError('a bug');
  await assert.rejects(
    withTransientRetry('unit_bug', true, async () => {
      throw bug;
    }),
    (err) => err === bug,
  );
  const duplicate = Object.assign(new Error('E11000 duplicate key'), { name: 'MongoServerError', code: 11000 });
  await assert.rejects(
    withTransientRetry('unit_dup', false, async () => {
      throw duplicate;
    }),
    (err) => err === duplicate,
  );
});

/** A bulk write (insertMany, bulkWrite) that failed before any server answered: the driver error inside a MongoBulkWriteError. */
const bulkFailed = (cause: () => Error) => () =>
  Object.assign(new Error(cause().message), { name: 'MongoBulkWriteError', errorResponse: cause(), writeErrors: [] });

test('a bulk write that found no server or lost its connection is a 503 like any other write, not a 500', async () => {
  const none = failing([bulkFailed(unreachable)]);
  await assert.rejects(
    withTransientRetry('unit_bulk_unreachable', false, none.work),
    (err: AppError) => err.code === 'service_unavailable' && err.retryAfterSeconds === 1,
  );
  assert.equal(none.calls(), 1);
  assert.equal(await counted('unit_bulk_unreachable', 'unavailable'), 1);
  const lost = failing([bulkFailed(networkLost)]);
  await assert.rejects(
    withTransientRetry('unit_bulk_lost', false, lost.work),
    (err: AppError) => err.code === 'service_unavailable',
  );
  assert.equal(lost.calls(), 1, 'a write that may have been applied is not retried');
  const notRun = failing([bulkFailed(locked)]);
  assert.equal(await withTransientRetry('unit_bulk_locked', false, notRun.work), 'done');
  const conflict = Object.assign(new Error('E11000 duplicate key'), {
    name: 'MongoBulkWriteError',
    code: 11000,
    errorResponse: { message: 'E11000 duplicate key', code: 11000 },
    writeErrors: [{ index: 0, code: 11000 }],
  });
  await assert.rejects(
    withTransientRetry('unit_bulk_conflict', false, async () => {
      throw conflict;
    }),
    (err) => err === conflict,
    "a bulk write's own write errors pass through unchanged",
  );
});

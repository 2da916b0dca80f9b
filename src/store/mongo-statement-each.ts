import type { Collection as MongoCollectionHandle, Document } from 'mongodb';
import { scopedDoc, scopedFilter, type BulkWriteResult, type Doc, type Scope, type WriteOp } from './collection.ts';
import { isDuplicateKey, toMongoDoc, toMongoFilter } from './mongo-documents.ts';
import { applyUpdate, equalityFields } from './query.ts';

/**
 * A bulk write on FerretDB 1.x, which holds a PostgreSQL connection per
 * statement of a write command until the command ends (three concurrent
 * 30-statement updates take a 90-connection pool and then wait for good)
 * and loses one for every upsert that conflicts. So each operation is its
 * own single-statement command, `inFlight` side by side, and an upsert is
 * never sent: an update, and when it matches nothing an insert of the
 * document the upsert would have made, and when that conflicts (another
 * writer inserted it first) the update again. One round trip per operation,
 * as separate writes were; MongoDB never takes this path. `sent` counts each
 * command.
 */
export async function bulkWriteStatementEach(
  col: MongoCollectionHandle,
  sent: <R>(command: () => Promise<R>) => Promise<R>,
  scope: Scope,
  ops: WriteOp[],
  inFlight: number,
): Promise<BulkWriteResult> {
  const total: BulkWriteResult = { matched: 0, upserted: 0, deleted: 0, conflicts: [] };
  const one = async (op: WriteOp, i: number): Promise<void> => {
    if ('deleteOne' in op) {
      // Awaited before the sum is read: `total.deleted += await …` would read it before the wait, and the
      // deletes side by side would each write back their own count over the others'.
      const { deletedCount } = await sent(() => col.deleteOne(toMongoFilter(scopedFilter(scope, op.deleteOne.filter))));
      total.deleted += deletedCount;
      return;
    }
    const filter = toMongoFilter(scopedFilter(scope, op.updateOne.filter));
    const update = op.updateOne.update as Document;
    const updated = async () => (await sent(() => col.updateOne(filter, update))).matchedCount === 1;
    if (await updated()) {
      total.matched++;
      return;
    }
    if (!op.updateOne.upsert) return;
    const doc = scopedDoc(scope, equalityFields(op.updateOne.filter) as Doc);
    applyUpdate(doc, op.updateOne.update, true);
    try {
      await sent(() => col.insertOne(toMongoDoc(doc)));
      total.upserted++;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      if (await updated()) total.matched++;
      else total.conflicts.push(i);
    }
  };
  for (let i = 0; i < ops.length; i += inFlight)
    await Promise.all(ops.slice(i, i + inFlight).map((op, j) => one(op, i + j)));
  total.conflicts.sort((a, b) => a - b);
  return total;
}

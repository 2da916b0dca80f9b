import { AppError } from '../errors.ts';
import type { Collection, Doc, Scope } from './collection.ts';

/** Inserts what is not there yet and answers what it inserted; documents already stored (same id) are left as they are. */
export async function insertNew<T extends Doc>(collection: Collection<T>, scope: Scope, docs: T[]): Promise<T[]> {
  if (docs.length === 0) return [];
  try {
    await collection.insertMany(scope, docs);
    return docs;
  } catch (err) {
    if (!(err instanceof AppError && err.code === 'conflict')) throw err;
  }
  const inserted: T[] = [];
  for (const doc of docs) {
    try {
      await collection.insertOne(scope, doc);
      inserted.push(doc);
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'conflict')) throw err;
    }
  }
  return inserted;
}

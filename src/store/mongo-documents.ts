import { MongoServerError, type Document } from 'mongodb';
import { AppError } from '../errors.ts';
import type { Doc, Filter } from './collection.ts';

// The port's documents, filters and errors as a MongoDB wire server has them, and back.

const duplicateKey = 11000;

/** Port field `id` is MongoDB's `_id`; nothing outside the MongoDB adapter (`mongo-*.ts`) sees `_id`. */
export function toMongoFilter(filter: Filter): Document {
  const out: Document = {};
  for (const [key, value] of Object.entries(filter)) {
    if (key === '$or' || key === '$and') out[key] = (value as Filter[]).map(toMongoFilter);
    else out[key === 'id' ? '_id' : key] = value;
  }
  return out;
}

export function toMongoDoc(doc: Doc): Document {
  const { id, ...rest } = doc;
  return { _id: id, ...rest };
}

export function fromMongo<T extends Doc>(doc: Document | null): T | null {
  if (!doc) return null;
  const { _id, ...rest } = doc;
  return { id: _id as string, ...rest } as T;
}

/**
 * FerretDB 1.x answers a unique violation inside findAndModify with its backend's
 * own message instead of code 11000: SQLite's or PostgreSQL's.
 */
const backendDuplicateKeyMessages = ['UNIQUE constraint failed', 'duplicate key value violates unique constraint'];

/** A server's answer that a write broke a unique key: MongoDB's code, or FerretDB's backend message. */
export function duplicateKeyAnswer(code: unknown, message: unknown): boolean {
  return (
    code === duplicateKey ||
    (typeof message === 'string' && backendDuplicateKeyMessages.some((text) => message.includes(text)))
  );
}

export function isDuplicateKey(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  return code === duplicateKey || (err instanceof MongoServerError && duplicateKeyAnswer(code, message));
}

export function translateError(err: unknown, collection: string): unknown {
  if (isDuplicateKey(err)) return new AppError('conflict', `a ${collection} record with the same key already exists`);
  return err;
}

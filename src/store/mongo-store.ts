import { MongoClient, MongoServerError, type Db, type Document } from 'mongodb';
import { AppError } from '../errors.ts';
import { scopedDoc, scopedFilter, type Collection, type Doc, type Filter, type FindOptions, type IndexSpec, type Scope, type Store, type Update } from './collection.ts';

const duplicateKey = 11000;

/** Port field `id` is MongoDB's `_id`; nothing outside this file sees `_id`. */
function toMongoFilter(filter: Filter): Document {
  const out: Document = {};
  for (const [key, value] of Object.entries(filter)) {
    if (key === '$or' || key === '$and') out[key] = (value as Filter[]).map(toMongoFilter);
    else out[key === 'id' ? '_id' : key] = value;
  }
  return out;
}

function toMongoDoc(doc: Doc): Document {
  const { id, ...rest } = doc;
  return { _id: id, ...rest };
}

function fromMongo<T extends Doc>(doc: Document | null): T | null {
  if (!doc) return null;
  const { _id, ...rest } = doc;
  return { id: _id as string, ...rest } as T;
}

/** FerretDB 1.x answers a unique violation inside findAndModify with its SQLite message instead of code 11000. */
function isDuplicateKey(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  return code === duplicateKey || (err instanceof MongoServerError && typeof message === 'string' && message.includes('UNIQUE constraint failed'));
}

function translateError(err: unknown, collection: string): unknown {
  if (isDuplicateKey(err)) return new AppError('conflict', `a ${collection} record with the same key already exists`);
  return err;
}

class MongoCollection<T extends Doc> implements Collection<T> {
  constructor(readonly name: string, private readonly db: Db) {}

  private get col() {
    return this.db.collection(this.name);
  }

  private async guard<R>(work: () => Promise<R>): Promise<R> {
    try {
      return await work();
    } catch (err) {
      throw translateError(err, this.name);
    }
  }

  insertOne(scope: Scope, doc: T): Promise<void> {
    return this.guard(async () => {
      await this.col.insertOne(toMongoDoc(scopedDoc(scope, doc)));
    });
  }

  insertMany(scope: Scope, docs: T[]): Promise<void> {
    if (docs.length === 0) return Promise.resolve();
    return this.guard(async () => {
      await this.col.insertMany(docs.map((d) => toMongoDoc(scopedDoc(scope, d))), { ordered: true });
    });
  }

  async findOne(scope: Scope, filter: Filter): Promise<T | null> {
    return fromMongo<T>(await this.col.findOne(toMongoFilter(scopedFilter(scope, filter))));
  }

  async find(scope: Scope, filter: Filter, opts: FindOptions = {}): Promise<T[]> {
    let cursor = this.col.find(toMongoFilter(scopedFilter(scope, filter)));
    if (opts.sort) cursor = cursor.sort(toMongoFilter(opts.sort) as Record<string, 1 | -1>);
    if (opts.skip) cursor = cursor.skip(opts.skip);
    if (opts.limit) cursor = cursor.limit(opts.limit);
    return (await cursor.toArray()).map((d) => fromMongo<T>(d)!);
  }

  count(scope: Scope, filter: Filter): Promise<number> {
    return this.col.countDocuments(toMongoFilter(scopedFilter(scope, filter)));
  }

  updateOne(scope: Scope, filter: Filter, update: Update, opts: { upsert?: boolean } = {}): Promise<T | null> {
    return this.guard(async () => {
      const doc = await this.col.findOneAndUpdate(toMongoFilter(scopedFilter(scope, filter)), update as Document, {
        returnDocument: 'after',
        upsert: opts.upsert ?? false,
      });
      return fromMongo<T>(doc);
    });
  }

  updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    return this.guard(async () => (await this.col.updateMany(toMongoFilter(scopedFilter(scope, filter)), update as Document)).modifiedCount);
  }

  async deleteOne(scope: Scope, filter: Filter): Promise<boolean> {
    return (await this.col.deleteOne(toMongoFilter(scopedFilter(scope, filter)))).deletedCount === 1;
  }

  async deleteMany(scope: Scope, filter: Filter): Promise<number> {
    return (await this.col.deleteMany(toMongoFilter(scopedFilter(scope, filter)))).deletedCount;
  }
}

/** MongoDB 6+ through the official driver; also FerretDB 1.x, so no transactions, change streams, $lookup or TTL indexes. */
export class MongoStore implements Store {
  readonly kind = 'mongodb' as const;
  private readonly client: MongoClient;
  private readonly db: Db;
  private readonly declared = new Map<string, IndexSpec[]>();

  constructor(url: string, dbName?: string) {
    this.client = new MongoClient(url, { serverSelectionTimeoutMS: 3_000, connectTimeoutMS: 3_000, maxPoolSize: 50 });
    this.db = this.client.db(dbName);
  }

  collection<T extends Doc>(name: string, indexes: IndexSpec[] = []): Collection<T> {
    this.declared.set(name, [...(this.declared.get(name) ?? []), ...indexes]);
    return new MongoCollection<T>(name, this.db);
  }

  async init(): Promise<void> {
    await this.client.connect();
    for (const [name, indexes] of this.declared) {
      for (const index of indexes) {
        const keys = Object.fromEntries(Object.entries(index.keys).map(([k, v]) => [k === 'id' ? '_id' : k, v]));
        await this.db.collection(name).createIndex(keys, { unique: index.unique ?? false });
      }
    }
  }

  async ping(): Promise<void> {
    await this.db.command({ ping: 1 }, { timeoutMS: 2_000 });
  }

  async close(): Promise<void> {
    await this.client.close();
  }

  /** Test helper: drops this store's database. */
  async dropDatabase(): Promise<void> {
    await this.db.dropDatabase();
  }
}

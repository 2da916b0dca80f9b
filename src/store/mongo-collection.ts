import { MongoBulkWriteError, type AnyBulkWriteOperation, type Db, type Document } from 'mongodb';
import {
  afterKeys,
  idList,
  scanPageSize,
  scopedDoc,
  scopedFilter,
  totalOrder,
  type BulkWriteResult,
  type Collection,
  type Doc,
  type Filter,
  type GroupCount,
  type FindOptions,
  type ScanOptions,
  type Scope,
  type TenantFigure,
  type TenantMeasure,
  type Update,
  type WriteOp,
} from './collection.ts';
import { duplicateKeyAnswer, fromMongo, toMongoDoc, toMongoFilter, translateError } from './mongo-documents.ts';
import { countedCommand, type StoreOperation } from './operation-count.ts';
import { compareBySort, getPath } from './query.ts';
import { bulkWriteStatementEach } from './mongo-statement-each.ts';
import { withTransientRetry } from './transient-errors.ts';

const cursorNotFound = 43;

/** More ids than this in one `id: {$in}` are left to the server's own `$in`. */
const idLookupLimit = 200;

/** Single-id reads of one id list in flight at once: few, so one list never holds many of the server's connections. */
const idReadsInFlight = 4;

/** What a MongoDB wire server does unlike MongoDB, learnt at connect time (FerretDB 1.x says so in `buildInfo`). */
export interface ServerQuirks {
  /** An `_id: {$in}` filter reads the whole collection. */
  scansIdLists: boolean;
  /**
   * A write command holds a backend connection per statement until it ends,
   * so a few concurrent many-statement commands take every connection and
   * wait for more, for good; an upsert that conflicts loses a connection too.
   */
  writesOneStatementEach: boolean;
  /** An update reads its matches, then writes them back by `_id`: two updates with the same filter both apply. */
  updatesReadThenWrite: boolean;
  /** `$group` has `$sum` and `$count` but no `$min` (nor `$first`): the earliest time of each group is not the server's to find. */
  groupsWithoutMin: boolean;
}

/** One collection on a MongoDB wire server: every call one command (or a few on FerretDB 1.x, see `ServerQuirks`). */
export class MongoCollection<T extends Doc> implements Collection<T> {
  constructor(
    readonly name: string,
    private readonly db: Db,
    private readonly server: ServerQuirks,
  ) {}

  private get col() {
    return this.db.collection(this.name);
  }

  /** Every driver call goes through here: one call is one command, one round trip (a retry is another). */
  private sent<R>(operation: StoreOperation, command: () => Promise<R>): Promise<R> {
    return countedCommand(this.name, operation, command);
  }

  /** Every operation goes through here: a duplicate key is a 409, a transient failure retried where safe or a 503. */
  private async guard<R>(work: () => Promise<R>, idempotent = false): Promise<R> {
    try {
      return await withTransientRetry(this.name, idempotent, work);
    } catch (err) {
      throw translateError(err, this.name);
    }
  }

  insertOne(scope: Scope, doc: T): Promise<void> {
    return this.guard(async () => {
      await this.sent('insertOne', () => this.col.insertOne(toMongoDoc(scopedDoc(scope, doc))));
    });
  }

  insertMany(scope: Scope, docs: T[]): Promise<void> {
    if (docs.length === 0) return Promise.resolve();
    return this.guard(async () => {
      await this.sent('insertMany', () =>
        this.col.insertMany(
          docs.map((d) => toMongoDoc(scopedDoc(scope, d))),
          { ordered: true },
        ),
      );
    });
  }

  findOne(scope: Scope, filter: Filter): Promise<T | null> {
    return this.guard(
      async () =>
        fromMongo<T>(await this.sent('findOne', () => this.col.findOne(toMongoFilter(scopedFilter(scope, filter))))),
      true,
    );
  }

  /**
   * FerretDB 1.x answers an id list (`id: {$in: [...]}`) with a read of the
   * whole collection into itself but an `_id` equality with a filter in its
   * database (still a scan there: on PostgreSQL the filter is
   * `_jsonb -> $1 @> $2`, the key a parameter, which no index matches), so
   * there a list of up to `idLookupLimit` ids is read, updated and deleted one
   * id at a time (a few reads side by side, writes one after another, as one
   * multi-document write would run). MongoDB answers `$in` from the index.
   */
  private oneByOne(scoped: Filter): string[] | undefined {
    if (!this.server.scansIdLists) return undefined;
    const ids = idList(scoped.id);
    return ids && ids.length <= idLookupLimit ? ids : undefined;
  }

  find(scope: Scope, filter: Filter, opts: FindOptions = {}): Promise<T[]> {
    const scoped = scopedFilter(scope, filter);
    const ids = this.oneByOne(scoped);
    if (ids) return this.findByIds(scoped, ids, opts);
    return this.guard(async () => {
      let cursor = this.col.find(toMongoFilter(scoped));
      if (opts.sort) cursor = cursor.sort(toMongoFilter(opts.sort) as Record<string, 1 | -1>);
      if (opts.skip) cursor = cursor.skip(opts.skip);
      if (opts.limit) cursor = cursor.limit(opts.limit);
      return (await this.sent('find', () => cursor.toArray())).map((d) => fromMongo<T>(d)!);
    }, true);
  }

  /** A read by id list as single-id reads, a few at a time, then sorted and cut as the server would. */
  private findByIds(scoped: Filter, ids: string[], opts: FindOptions): Promise<T[]> {
    return this.guard(async () => {
      const docs: T[] = [];
      for (let i = 0; i < ids.length; i += idReadsInFlight) {
        const found = await Promise.all(
          ids
            .slice(i, i + idReadsInFlight)
            .map((id) => this.sent('find', () => this.col.findOne(toMongoFilter({ ...scoped, id })))),
        );
        for (const d of found) if (d) docs.push(fromMongo<T>(d)!);
      }
      if (opts.sort) docs.sort(compareBySort(opts.sort));
      const from = opts.skip ?? 0;
      return docs.slice(from, opts.limit ? from + opts.limit : undefined);
    }, true);
  }

  count(scope: Scope, filter: Filter): Promise<number> {
    return this.guard(
      () => this.sent('count', () => this.col.countDocuments(toMongoFilter(scopedFilter(scope, filter)))),
      true,
    );
  }

  /**
   * One `aggregate`: $match, $group by organization, $sort by the figure
   * (ties by id), $limit. A server without `$min` in $group (FerretDB 1.x)
   * answers an earliest time by reading the matches in that field's order
   * instead, only as far as the `limit`-th organization first met: each
   * organization's earliest time is where it first comes.
   */
  topTenants(filter: Filter, measure: TenantMeasure, limit: number): Promise<TenantFigure[]> {
    const match = toMongoFilter(filter);
    if ('earliest' in measure && this.server.groupsWithoutMin)
      return this.earliestByReading(match, measure.earliest, limit);
    const value =
      'count' in measure
        ? { $sum: 1 }
        : 'sum' in measure
          ? { $sum: `$${measure.sum}` }
          : { $min: `$${measure.earliest}` };
    const pipeline = [
      { $match: match },
      { $group: { _id: '$tenantId', value } },
      { $sort: { value: 'earliest' in measure ? 1 : -1, _id: 1 } },
      { $limit: limit },
    ];
    return this.guard(async () => {
      const rows = await this.sent('aggregate', () =>
        this.col.aggregate<{ _id: string; value: unknown }>(pipeline).toArray(),
      );
      return rows
        .filter((row) =>
          'earliest' in measure ? typeof row.value === 'string' : typeof row.value === 'number' && row.value !== 0,
        )
        .map((row) => ({ tenantId: row._id, value: row.value as number | string }));
    }, true);
  }

  /**
   * One `aggregate`: $match, then $group on the fields (each its own key of
   * the group's id). A missing field and null are grouped apart by the
   * server and counted together here.
   */
  countBy(scope: Scope, filter: Filter, fields: string[]): Promise<GroupCount[]> {
    const id = Object.fromEntries(fields.map((f, i) => [`g${i}`, `$${f}`]));
    const pipeline = [{ $match: toMongoFilter(scopedFilter(scope, filter)) }, { $group: { _id: id, n: { $sum: 1 } } }];
    return this.guard(async () => {
      const rows = await this.sent('aggregate', () =>
        this.col.aggregate<{ _id: Record<string, unknown>; n: number }>(pipeline).toArray(),
      );
      const groups = new Map<string, GroupCount>();
      for (const row of rows) {
        const values = fields.map((_, i) => row._id[`g${i}`] ?? null);
        const key = JSON.stringify(values);
        const group = groups.get(key) ?? { values, count: 0 };
        group.count += row.n;
        groups.set(key, group);
      }
      return [...groups.values()];
    }, true);
  }

  private earliestByReading(match: Document, field: string, limit: number): Promise<TenantFigure[]> {
    return this.guard(async () => {
      const cursor = this.col
        .find({ ...match, [field]: { $type: 'string' } }, { projection: { tenantId: 1, [field]: 1 } })
        .sort({ [field]: 1, tenantId: 1 })
        .batchSize(scanPageSize);
      const figures: TenantFigure[] = [];
      const seen = new Set<string>();
      try {
        await this.sent('aggregate', async () => {
          for (let raw = await cursor.next(); raw && figures.length < limit; raw = await cursor.next()) {
            const tenantId = raw.tenantId as string;
            if (seen.has(tenantId)) continue;
            seen.add(tenantId);
            figures.push({ tenantId, value: getPath(raw, field) as string });
          }
        });
      } finally {
        await cursor.close();
      }
      return figures;
    }, true);
  }

  /**
   * One server cursor walks the sort order (an index's, when one covers it),
   * fetching a page per round trip. If the server drops the cursor (idle too
   * long behind a slow reader), the scan goes on with a fresh one from after
   * the last document it gave out.
   */
  async *scan(scope: Scope, filter: Filter, opts: ScanOptions): AsyncGenerator<T[]> {
    const sort = totalOrder(opts.sort);
    const pageSize = opts.pageSize ?? scanPageSize;
    const scoped = scopedFilter(scope, filter);
    let last: T | undefined;
    for (;;) {
      const query = last
        ? {
            $and: [
              scoped,
              afterKeys(
                sort,
                Object.keys(sort).map((key) => getPath(last, key)),
              ),
            ],
          }
        : scoped;
      const cursor = this.col
        .find(toMongoFilter(query))
        .sort(toMongoFilter(sort) as Record<string, 1 | -1>)
        .batchSize(pageSize);
      const readPage = async (): Promise<T[]> => {
        const page: T[] = [];
        while (page.length < pageSize) {
          const raw = await cursor.next();
          if (!raw) break;
          page.push(fromMongo<T>(raw)!);
        }
        return page;
      };
      try {
        for (;;) {
          const page = await this.guard(() => this.sent('scan_page', readPage), true);
          if (page.length === 0) return;
          last = page[page.length - 1];
          yield page;
          if (page.length < pageSize) return;
        }
      } catch (err) {
        if ((err as { code?: unknown }).code !== cursorNotFound) throw err;
      } finally {
        await cursor.close();
      }
    }
  }

  updateOne(scope: Scope, filter: Filter, update: Update, opts: { upsert?: boolean } = {}): Promise<T | null> {
    return this.guard(async () => {
      const doc = await this.sent('updateOne', () =>
        this.col.findOneAndUpdate(toMongoFilter(scopedFilter(scope, filter)), update as Document, {
          returnDocument: 'after',
          upsert: opts.upsert ?? false,
        }),
      );
      return fromMongo<T>(doc);
    });
  }

  updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    const scoped = scopedFilter(scope, filter);
    const ids = this.oneByOne(scoped);
    if (ids)
      return this.eachId(
        ids,
        async (id) =>
          (
            await this.sent('updateMany', () =>
              this.col.updateOne(toMongoFilter({ ...scoped, id }), update as Document),
            )
          ).modifiedCount,
      );
    return this.guard(
      async () =>
        (await this.sent('updateMany', () => this.col.updateMany(toMongoFilter(scoped), update as Document)))
          .modifiedCount,
    );
  }

  /**
   * MongoDB: the update, then one read of what it changed (by `changed`). On
   * FerretDB 1.x an id list is written one id at a time already, each by
   * `findOneAndUpdate`, which returns what it wrote: nothing is read back.
   */
  async updateManyReturning(scope: Scope, filter: Filter, update: Update, changed: Filter): Promise<T[]> {
    const scoped = scopedFilter(scope, filter);
    const ids = this.oneByOne(scoped);
    if (ids) {
      const docs = await this.eachIdAnswer(ids, (id) =>
        this.sent('updateMany', () =>
          this.col.findOneAndUpdate(toMongoFilter({ ...scoped, id }), update as Document, { returnDocument: 'after' }),
        ),
      );
      return docs.flatMap((doc) => (doc ? [fromMongo<T>(doc)!] : []));
    }
    const modified = await this.guard(
      async () =>
        (await this.sent('updateMany', () => this.col.updateMany(toMongoFilter(scoped), update as Document)))
          .modifiedCount,
    );
    return modified === 0 ? [] : this.find(scope, changed);
  }

  /** An id list's write on FerretDB 1.x: one single-id command per id (each finds its document by `_id`), a few side by side; answers how many each wrote, summed. */
  private async eachId(ids: string[], write: (id: string) => Promise<number>): Promise<number> {
    return (await this.eachIdAnswer(ids, write)).reduce((sum, n) => sum + n, 0);
  }

  /** `eachId`, answering what each id's command answered, in the list's order. */
  private eachIdAnswer<R>(ids: string[], write: (id: string) => Promise<R>): Promise<R[]> {
    return this.guard(async () => {
      const answers: R[] = [];
      for (let i = 0; i < ids.length; i += idReadsInFlight)
        answers.push(...(await Promise.all(ids.slice(i, i + idReadsInFlight).map(write))));
      return answers;
    });
  }

  deleteOne(scope: Scope, filter: Filter): Promise<boolean> {
    return this.guard(
      async () =>
        (await this.sent('deleteOne', () => this.col.deleteOne(toMongoFilter(scopedFilter(scope, filter)))))
          .deletedCount === 1,
    );
  }

  deleteMany(scope: Scope, filter: Filter): Promise<number> {
    const scoped = scopedFilter(scope, filter);
    const ids = this.oneByOne(scoped);
    if (ids)
      return this.eachId(
        ids,
        async (id) =>
          (await this.sent('deleteMany', () => this.col.deleteOne(toMongoFilter({ ...scoped, id })))).deletedCount,
      );
    return this.guard(
      async () => (await this.sent('deleteMany', () => this.col.deleteMany(toMongoFilter(scoped)))).deletedCount,
    );
  }

  /**
   * MongoDB's unordered bulkWrite: one command per kind of operation in the
   * batch (an update command, a delete command), each one round trip however
   * many statements it carries. A unique-key refusal (an upsert that lost a
   * race) is reported by index; the other statements stand.
   */
  bulkWrite(scope: Scope, ops: WriteOp[]): Promise<BulkWriteResult> {
    if (this.server.writesOneStatementEach)
      return this.guard(() =>
        bulkWriteStatementEach(this.col, (command) => this.sent('bulkWrite', command), scope, ops, idReadsInFlight),
      );
    if (ops.length === 0) return Promise.resolve({ matched: 0, upserted: 0, deleted: 0, conflicts: [] });
    const mongoOps: AnyBulkWriteOperation[] = ops.map((op) =>
      'deleteOne' in op
        ? { deleteOne: { filter: toMongoFilter(scopedFilter(scope, op.deleteOne.filter)) } }
        : {
            updateOne: {
              filter: toMongoFilter(scopedFilter(scope, op.updateOne.filter)),
              update: op.updateOne.update as Document,
              upsert: op.updateOne.upsert ?? false,
            },
          },
    );
    return this.guard(async () => {
      try {
        const r = await this.sent('bulkWrite', () => this.col.bulkWrite(mongoOps, { ordered: false }));
        return { matched: r.matchedCount, upserted: r.upsertedCount, deleted: r.deletedCount, conflicts: [] };
      } catch (err) {
        if (!(err instanceof MongoBulkWriteError)) throw err;
        const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
        // No write errors: the bulk write failed as a whole (no server, a lost connection), not per operation.
        if (errors.length === 0) throw err;
        const conflicts = errors.filter((e) => duplicateKeyAnswer(e.code, e.errmsg)).map((e) => e.index);
        if (conflicts.length !== errors.length) throw err;
        const r = err.result;
        return { matched: r.matchedCount, upserted: r.upsertedCount, deleted: r.deletedCount, conflicts };
      }
    });
  }
}

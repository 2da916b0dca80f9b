import { idList, type Doc, type Filter, type FindOptions, type Scope } from './collection.ts';
import { CountCache } from './count-cache.ts';
import type { Connection, EmbeddedSchema } from './embedded-schema.ts';
import { text } from './sql-filter.ts';
import { matches } from './query.ts';

/** Documents kept per collection for lookups by id (the most recently used), and their stored bytes at most. */
const cachedDocs = 1_000;
const cachedBytes = 1 << 20;
/** A document larger than this is not kept. */
const cachedDocMax = 8 << 10;

/** A document as stored, kept for lookups by id. */
interface Cached {
  rid: number;
  stored: Uint8Array | string;
  /** What the row's key columns tell beside the JSON (`EmbeddedSchema.toldBy`). */
  told: string;
  /** The row's tenant column, as bound. */
  tenant: string;
}

/** Whether a document is in `scope`, as the SQL's tenant and team conditions would find. */
function inScope(scope: Scope, doc: Doc): boolean {
  return doc.tenantId === scope.tenantId && (scope.teamId === undefined || doc.teamId === scope.teamId);
}

/**
 * What one collection keeps in memory: documents recently read or rewritten,
 * by id, as stored, and large counts by filter (`count-cache.ts`), both kept
 * exact by the collection's own writes.
 */
export class EmbeddedCache<T extends Doc> {
  /** The kept counts; `kept()` gives them made current. */
  readonly counts: CountCache;
  /** The store's rollbacks when what this collection holds in memory was last made current (-1: not yet). */
  private rollbacksSeen = -1;
  /**
   * Documents recently read or rewritten, by id, as stored: a lookup by id of
   * one of them (a conversation touched per send, a message whose status
   * changes) skips SQLite. Exact because this process is the file's only
   * writer and every write here updates or drops its entry; emptied when a
   * commit is rolled back.
   */
  private readonly docs = new Map<string, Cached>();
  private docBytes = 0;

  constructor(
    private readonly store: Connection,
    private readonly name: string,
    /** How its documents are stored: its collection's schema. */
    private readonly schema: Pick<EmbeddedSchema<T>, 'decodeKept'>,
  ) {
    this.counts = new CountCache(store.countCache);
  }

  /** The kept counts, current (see `current`). */
  kept(): CountCache {
    this.current();
    return this.counts;
  }

  /**
   * What this collection holds in memory, made current the first time and
   * after a rollback (which took back writes that memory had seen): the kept
   * documents are dropped, the kept counts read back from the store (whose
   * stored counts rolled back with the writes).
   */
  private current(): void {
    if (this.rollbacksSeen === this.store.rollbacks) return;
    this.rollbacksSeen = this.store.rollbacks;
    this.docs.clear();
    this.docBytes = 0;
    this.counts.clear();
    const rows = this.store
      .statement('SELECT tenant, key, filter, n FROM relaybox_counts WHERE collection = ? ORDER BY rowid')
      .all([this.name]) as Array<{ tenant: string; key: ArrayBuffer; filter: string; n: number }>;
    this.counts.load(
      rows.map((row) => ({
        tenant: row.tenant,
        key: Buffer.from(row.key).toString(),
        filter: JSON.parse(row.filter) as Filter,
        n: row.n,
      })),
    );
    this.countsChanged(); // what load dropped over the limits
  }

  /** Stores the counts that changed, in the transaction of the writes that changed them. */
  countsChanged(): void {
    if (this.counts.pending) this.store.beforeCommit(this.counts, () => this.writeCounts());
  }

  /** A count's key is stored as bytes: it holds NUL separators, which a bound string would end at. */
  private writeCounts(): void {
    const changes = this.counts.changes();
    if (!changes) return;
    for (const c of changes.drop)
      this.store.run('DELETE FROM relaybox_counts WHERE collection = ? AND key = ?', [this.name, Buffer.from(c.key)]);
    for (const c of changes.write) {
      this.store.run(
        'INSERT INTO relaybox_counts (collection, key, tenant, filter, n) VALUES (?, ?, ?, ?, ?) ON CONFLICT (collection, key) DO UPDATE SET n = excluded.n',
        [this.name, Buffer.from(c.key), c.tenant, JSON.stringify(c.filter), c.n],
      );
    }
  }

  /** Keeps a document as stored, the most recently used, within the limits on documents and bytes. */
  remember(id: string, rid: number, stored: Uint8Array | string, tenant: string, told: string): void {
    this.current();
    this.forget(id);
    if (stored.length > cachedDocMax) return;
    this.docs.set(id, { rid, stored, tenant, told });
    this.docBytes += stored.length;
    while (this.docs.size > cachedDocs || this.docBytes > cachedBytes) this.forget(this.docs.keys().next().value!);
  }

  forget(id: string): void {
    const gone = this.docs.get(id);
    if (!gone) return;
    this.docs.delete(id);
    this.docBytes -= gone.stored.length;
  }

  /**
   * A lookup by id of kept documents, answered from memory: one id, or a
   * list of ids all kept (unsorted), with any further conditions checked on
   * each document as MongoDB would (what the SQL path matches too), and the
   * scope as the SQL would. Undefined when SQL must answer.
   */
  byId(scope: Scope, filter: Filter, opts: FindOptions): Array<{ rid: number; doc: T }> | undefined {
    const id = filter.id;
    if (opts.skip) return undefined;
    const ids = typeof id === 'string' ? [id] : opts.sort ? undefined : idList(id);
    if (!ids) return undefined;
    const hits: Cached[] = [];
    for (const each of ids) {
      const hit = this.keptDoc(each);
      if (!hit) return undefined;
      hits.push(hit);
    }
    const { id: _, ...rest } = filter;
    const out: Array<{ rid: number; doc: T }> = [];
    for (const [i, hit] of hits.entries()) {
      const doc = this.schema.decodeKept(hit.stored, text(ids[i]!), hit.tenant, hit.told);
      if (inScope(scope, doc) && matches(doc, rest)) out.push({ rid: hit.rid, doc });
      if (opts.limit && out.length === opts.limit) break;
    }
    return out;
  }

  /** A kept document, now the most recently used. */
  private keptDoc(id: string): Cached | undefined {
    this.current();
    const hit = this.docs.get(id);
    if (!hit) return undefined;
    this.docs.delete(id);
    this.docs.set(id, hit);
    return hit;
  }
}

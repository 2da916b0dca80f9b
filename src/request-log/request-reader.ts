import type { ListPage } from '../http/pagination.ts';
import type { SortKeys } from '../http/list-cursors.ts';
import type { Collection, Filter } from '../store/collection.ts';
import { validationError } from '../errors.ts';
import { entryOf, requestLogRetentionMs, type RequestChunkDoc, type RequestEntry } from './request-chunks.ts';

/** An entry as the API lists it: its id (unique in the log) and its time as ISO 8601. */
export type RequestLogItem = Omit<RequestEntry, 'at'> & { id: string; at: string };

export interface RequestLogQuery {
  limit: number;
  /** The sort keys of the last entry shown: `at` (epoch ms) and the entry's id. */
  after?: SortKeys | undefined;
  /** An exact status (404) or a class (4xx). */
  status?: string | undefined;
  method?: string | undefined;
  /** The path starts with this. */
  path?: string | undefined;
  keyId?: string | undefined;
  requestId?: string | undefined;
  /** ISO 8601 times, since inclusive and until exclusive. */
  since?: string | undefined;
  until?: string | undefined;
}

/** Chunks per read of the store: under load 4,000 entries at most (about 500 KB), a few when requests are far apart. */
const chunksPerRead = 8;

/**
 * One organization's request log, newest first, merged across the chunks
 * every process wrote. Chunks are read in `endsAt` order, newest first;
 * after each read, every entry later than the last chunk's `endsAt` is
 * final (no chunk not read yet holds a later one), so the read stops once a
 * page and one more are final. Filters on a field (status, method, key id,
 * request id) go to the store as equalities on the chunk's columns, which
 * pick the chunks holding a match; each entry is then checked on its own.
 */
export async function readRequestLog(
  chunks: Collection<RequestChunkDoc>,
  tenantId: string,
  q: RequestLogQuery,
  nowMs: number,
): Promise<ListPage<RequestLogItem>> {
  const after = q.after ? afterKeys(q.after) : undefined;
  const since = Math.max(nowMs - requestLogRetentionMs, q.since ? Date.parse(q.since) : -Infinity);
  let until = q.until ? Date.parse(q.until) : Infinity;
  if (after && after.at < until) until = after.at + 1;
  const status = statusTest(q.status);
  const filter: Filter = { endsAt: { $gte: since } };
  if (Number.isFinite(until)) filter.startsAt = { $lt: until };
  if (status.exact !== undefined) filter.status = status.exact;
  if (q.method) filter.method = q.method;
  if (q.keyId) filter.keyId = q.keyId;
  if (q.requestId) filter.requestId = q.requestId;

  const keep = (e: RequestEntry & { id: string }): boolean =>
    e.at >= since &&
    e.at < until &&
    (!after || e.at < after.at || (e.at === after.at && e.id < after.id)) &&
    status.test(e.status) &&
    (!q.method || e.method === q.method) &&
    (!q.path || e.path.startsWith(q.path)) &&
    (!q.keyId || e.keyId === q.keyId) &&
    (!q.requestId || e.requestId === q.requestId);

  const found: Array<RequestEntry & { id: string }> = [];
  let final = 0;
  for await (const page of chunks.scan({ tenantId }, filter, { sort: { endsAt: -1 }, pageSize: chunksPerRead })) {
    for (const chunk of page)
      for (let i = 0; i < chunk.count; i++) {
        const entry = entryOf(chunk, i);
        if (keep(entry)) found.push(entry);
      }
    const boundary = page[page.length - 1]!.endsAt;
    final = found.reduce((n, e) => (e.at > boundary ? n + 1 : n), 0);
    if (final > q.limit) break;
  }
  found.sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  const data = found.slice(0, q.limit);
  const last = found.length > q.limit ? data[data.length - 1] : undefined;
  return {
    data: data.map((e) => ({ ...e, at: new Date(e.at).toISOString() })),
    pagination: { page: null, limit: q.limit, total: null, totalPages: null },
    next: last ? [last.at, last.id] : null,
  };
}

function afterKeys(keys: SortKeys): { at: number; id: string } {
  const [at, id] = keys;
  if (keys.length !== 2 || typeof at !== 'number' || typeof id !== 'string')
    throw validationError('/after', 'is not a cursor of this list: start again from the first page');
  return { at, id };
}

/** `404` is that status; `4xx` is the class (400 to 499). */
function statusTest(status: string | undefined): { exact?: number; test(s: number): boolean } {
  if (!status) return { test: () => true };
  if (status.endsWith('xx')) {
    const low = Number(status[0]) * 100;
    return { test: (s) => s >= low && s < low + 100 };
  }
  const exact = Number(status);
  return { exact, test: (s) => s === exact };
}

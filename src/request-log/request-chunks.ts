import type { Collection, Store } from '../store/collection.ts';

/** How long an organization's requests stay listed: the request log covers the last 7 days. */
export const requestLogRetentionMs = 7 * 86_400_000;

/** One API request as the log keeps it: what was asked and how it was answered, never a body, a query or a header. */
export interface RequestEntry {
  /** When the request arrived (epoch ms). */
  at: number;
  method: string;
  /** The route template, e.g. /api/v1/messages/:id. */
  route: string;
  /** The concrete path without its query string, e.g. /api/v1/messages/msg_1. */
  path: string;
  status: number;
  /** The API key that made the request; null for a user's access token. */
  keyId: string | null;
  requestId: string;
  durationMs: number;
  /** The error code of an error answer (validation_error, rate_limited...); null otherwise. */
  error: string | null;
}

/**
 * One organization's requests that one process answered within about a
 * second, as one document: each field of `RequestEntry` is a column (an
 * array, entry i at index i), so an equality on a field (a request id, a
 * key id, a status) matches the chunks that hold such an entry on both
 * stores, and the field names are not repeated per entry. Several processes
 * write chunks of their own that overlap in time; `startsAt` and `endsAt`
 * bound the times of a chunk's entries, which readers merge by.
 */
export interface RequestChunkDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  /** The earliest and the latest `at` among the entries (epoch ms). */
  startsAt: number;
  endsAt: number;
  /** Entries in the chunk. */
  count: number;
  /** Each entry's `at`, as ms after `startsAt` (a few digits rather than 13). */
  offsetMs: number[];
  method: string[];
  route: string[];
  /** Null where the path is the route (a route without parameters): stored once. */
  path: Array<string | null>;
  status: number[];
  keyId: Array<string | null>;
  requestId: string[];
  durationMs: number[];
  error: Array<string | null>;
}

/**
 * Chunks by organization and time: reads walk it newest first, retention
 * deletes by `endsAt`, and `count` is a key column so the organization's
 * entries are counted with one grouped command, without reading a chunk.
 */
export function requestChunkCollection(store: Store): Collection<RequestChunkDoc> {
  return store.collection<RequestChunkDoc>('request_log', [{ keys: { tenantId: 1, endsAt: 1, count: 1 } }]);
}

/** Entry `i` of a chunk, and its id in the list: the chunk's id and the entry's place in it. */
export function entryOf(chunk: RequestChunkDoc, i: number): RequestEntry & { id: string } {
  return {
    id: `${chunk.id}.${i}`,
    at: chunk.startsAt + chunk.offsetMs[i]!,
    method: chunk.method[i]!,
    route: chunk.route[i]!,
    path: chunk.path[i] ?? chunk.route[i]!,
    status: chunk.status[i]!,
    keyId: chunk.keyId[i] ?? null,
    requestId: chunk.requestId[i]!,
    durationMs: chunk.durationMs[i]!,
    error: chunk.error[i] ?? null,
  };
}

/** The chunk document of `entries` (at least one). */
export function chunkOf(id: string, tenantId: string, entries: RequestEntry[]): RequestChunkDoc {
  let startsAt = Infinity;
  let endsAt = -Infinity;
  for (const e of entries) {
    if (e.at < startsAt) startsAt = e.at;
    if (e.at > endsAt) endsAt = e.at;
  }
  return {
    id,
    tenantId,
    startsAt,
    endsAt,
    count: entries.length,
    offsetMs: entries.map((e) => e.at - startsAt),
    method: entries.map((e) => e.method),
    route: entries.map((e) => e.route),
    path: entries.map((e) => (e.path === e.route ? null : e.path)),
    status: entries.map((e) => e.status),
    keyId: entries.map((e) => e.keyId),
    requestId: entries.map((e) => e.requestId),
    durationMs: entries.map((e) => e.durationMs),
    error: entries.map((e) => e.error),
  };
}

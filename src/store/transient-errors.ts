import { Counter, register } from 'prom-client';
import { AppError } from '../errors.ts';

/**
 * A store failure that says nothing about the request: the backend was busy or
 * unreachable. It answers 503 `service_unavailable` with Retry-After instead
 * of a 500, and is retried here when retrying cannot apply a write twice.
 */
export const storeTransientErrors =
  (register.getSingleMetric('relaybox_store_transient_errors_total') as Counter<'operation' | 'outcome'> | undefined) ??
  new Counter({
    name: 'relaybox_store_transient_errors_total',
    help: 'Transient store failures by operation, and whether a retry recovered (retried) or the request got a 503 (unavailable)',
    labelNames: ['operation', 'outcome'],
  });

/** Backoff between attempts; three attempts stay well under a second (measured: FerretDB's lock waits are a few ms). */
const retryDelaysMs = [25, 100];
const retryAfterSeconds = 1;

/**
 * The server refused the operation before doing anything: SQLite under FerretDB
 * ("database is locked"), or FerretDB could not open a PostgreSQL connection for
 * it (the server's connection limit reached).
 */
function notExecuted(err: unknown): boolean {
  const { message } = err as { message?: unknown };
  return (
    typeof message === 'string' &&
    /database is locked|SQLITE_BUSY|failed to connect to `user=|too many clients already/i.test(message)
  );
}

/**
 * The driver error a bulk write carries when it failed before any server
 * answered (no server, a lost connection): the driver wraps it in a
 * MongoBulkWriteError, which says nothing of it but in `errorResponse`.
 * Any other error is its own cause.
 */
function driverError(err: unknown): unknown {
  if (typeof err !== 'object' || err === null) return err;
  const { name, errorResponse } = err as { name?: unknown; errorResponse?: unknown };
  return name === 'MongoBulkWriteError' && errorResponse instanceof Error ? errorResponse : err;
}

/** No server could be reached: the driver has already waited its selection timeout, so waiting again only delays the 503. */
const unreachable = (err: unknown) => (err as { name?: unknown }).name === 'MongoServerSelectionError';

/** The backend failed in a way a later attempt may not (lost connection, failover, time limit); a write may have been applied. */
function transient(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  if (notExecuted(err) || unreachable(err)) return true;
  const { name, code, hasErrorLabel } = err as {
    name?: unknown;
    code?: unknown;
    hasErrorLabel?: (label: string) => boolean;
  };
  if (name === 'MongoNetworkError' || name === 'MongoNetworkTimeoutError' || name === 'MongoTopologyClosedError')
    return true;
  if (
    typeof hasErrorLabel === 'function' &&
    (hasErrorLabel.call(err, 'RetryableWriteError') || hasErrorLabel.call(err, 'ResetPool'))
  )
    return true;
  return typeof code === 'number' && transientCodes.has(code);
}

/** MongoDB server codes for a primary stepping down, shutting down or a network time limit. */
const transientCodes = new Set([6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436]);

/**
 * Runs a store operation; `idempotent` says whether running it twice is the
 * same as once (reads). A write is retried only when the backend says it did
 * not execute it.
 */
export async function withTransientRetry<R>(
  operation: string,
  idempotent: boolean,
  work: () => Promise<R>,
): Promise<R> {
  for (let attempt = 0; ; attempt++) {
    try {
      const result = await work();
      if (attempt > 0) storeTransientErrors.labels(operation, 'retried').inc();
      return result;
    } catch (err) {
      const cause = driverError(err);
      if (!transient(cause)) throw err;
      const delay = retryDelaysMs[attempt];
      if (delay === undefined || unreachable(cause) || !(idempotent || notExecuted(cause))) {
        throw unavailable(operation, 'the store is busy or unreachable; try again shortly', err);
      }
      await new Promise((resolve) => setTimeout(resolve, delay * (0.5 + Math.random())));
    }
  }
}

/**
 * SQLite could not read or write its files: a volume gone read-only, a full
 * disk, a failing device. The request is not at fault, and the same write
 * succeeds once the volume is back.
 */
export function fileFailure(err: unknown): boolean {
  const { code } = (err ?? {}) as { code?: unknown };
  return typeof code === 'string' && /^SQLITE_(IOERR|READONLY|FULL|CANTOPEN|PERM)/.test(code);
}

/** The 503 a store failure that says nothing about the request is answered with, counted for the store-unavailable alert. */
export function unavailable(operation: string, message: string, cause: unknown): AppError {
  storeTransientErrors.labels(operation, 'unavailable').inc();
  return new AppError('service_unavailable', message, { retryAfterSeconds, cause });
}

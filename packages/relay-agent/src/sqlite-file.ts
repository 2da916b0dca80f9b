import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type Libsql from 'libsql';

/**
 * Opens SQLite files (chat.db, or the simulator's file of the same schema)
 * through libsql: SQLite in-process, with prebuilt binaries per platform.
 *
 * libsql 0.5 accepts better-sqlite3's `readonly` and `fileMustExist` options
 * but ignores them (a "read-only" connection writes, and creates a missing
 * file), so read-only is the `mode=ro` of a file: URI, which SQLite itself
 * enforces: no write, no file created. Never `immutable=1`: SQLite then reads
 * the -wal file too, so rows Messages has committed but not checkpointed are
 * seen.
 *
 * Values bound to a statement are numbers, bigints, strings, null and
 * Buffers only: libsql aborts the whole process on a boolean.
 */
export type SqliteDatabase = Libsql.Database;
export type SqliteStatement = Libsql.Statement;

/** How long a statement waits for a lock a writer (Messages, the simulator) holds. */
export const busyTimeoutMs = 5_000;

/** SQLite's primary result codes that mean "not allowed to open or read": on macOS, no Full Disk Access. */
const accessCodes = new Map([
  [3, 'SQLITE_PERM'],
  [14, 'SQLITE_CANTOPEN'],
  [23, 'SQLITE_AUTH'],
]);

export class ChatDbError extends Error {
  override name = 'ChatDbError';

  /** `code`: SQLite's result code (extended codes included), when there is one. */
  constructor(
    message: string,
    readonly code: number | undefined,
  ) {
    super(message);
  }

  /** macOS refuses to open chat.db this way when the terminal lacks Full Disk Access. */
  get accessDenied(): boolean {
    return (
      (this.code !== undefined && accessCodes.has(this.code & 0xff)) ||
      /authorization denied|operation not permitted/i.test(this.message)
    );
  }
}

const requireModule = createRequire(import.meta.url);
let libsql: typeof Libsql | undefined;

/** Loaded on first use, so a machine without the binary for its platform gets a sentence, not a stack trace at import. */
function loadLibsql(): typeof Libsql {
  try {
    return (libsql ??= requireModule('libsql') as typeof Libsql);
  } catch (err) {
    const reason = (err as Error).message.split('\n')[0];
    throw new ChatDbError(
      `libsql has no SQLite binary for ${process.platform}-${process.arch} here (${reason}); run npm install on this machine`,
      undefined,
    );
  }
}

/** Opens `path`; read-only never creates it. Fails with a `ChatDbError`. */
export function openSqliteFile(path: string, mode: 'readonly' | 'readwrite'): SqliteDatabase {
  const Database = loadLibsql();
  const url = pathToFileURL(resolve(path));
  if (mode === 'readonly') url.searchParams.set('mode', 'ro');
  try {
    return new Database(url.href, {
      timeout: busyTimeoutMs,
      readonly: mode === 'readonly',
      fileMustExist: mode === 'readonly',
    });
  } catch (err) {
    throw asChatDbError(err, path);
  }
}

/**
 * libsql's error as a `ChatDbError`: a failed statement carries SQLite's
 * code; a failed open is a plain Error ending in the code
 * (`ConnectionFailed("Unable to open connection to local database …: 14")`).
 */
export function asChatDbError(err: unknown, path: string): ChatDbError {
  if (err instanceof ChatDbError) return err;
  const message = (err as Error)?.message ?? String(err);
  const rawCode = (err as { rawCode?: unknown })?.rawCode;
  if (typeof rawCode === 'number')
    return new ChatDbError(`${path}: ${message} (${(err as { code?: string }).code ?? rawCode})`, rawCode);
  const openCode = /^ConnectionFailed\(.*: (\d+)"\)$/s.exec(message)?.[1];
  if (openCode !== undefined) {
    const code = Number(openCode);
    return new ChatDbError(
      `cannot open ${path}: ${code === 14 ? 'unable to open database file' : 'SQLite refused'} (${accessCodes.get(code) ?? `SQLite code ${code}`})`,
      code,
    );
  }
  return new ChatDbError(`${path}: ${message}`, undefined);
}

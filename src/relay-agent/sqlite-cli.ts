import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { SqliteProcess, SqliteRunError } from './sqlite-process.ts';

/**
 * Talks to a SQLite file through the `sqlite3` command-line program, because
 * Node 20 has no built-in SQLite and the npm bindings need native builds. The
 * program is started with execFile (no shell) and the SQL is one argv item, so
 * nothing here is shell-interpolated. Readers open the file `-readonly` with a
 * `mode=ro` URI and never `immutable=1`: SQLite itself then reads the -wal
 * file, so rows Messages has committed but not checkpointed are seen.
 */
export interface SqliteCliOptions {
  /** Path of the sqlite3 program; default `sqlite3` from PATH. */
  program?: string;
  readonly: boolean;
  /** How long a statement waits for a lock held by a writer. */
  busyTimeoutMs?: number;
  /** A run longer than this is killed. */
  timeoutMs?: number;
  /**
   * Keep one sqlite3 program running and feed it each statement, rather than
   * start one per statement; for owners that run many (the agent's poll loop,
   * the simulator). Call `close()` when done.
   */
  longLived?: boolean;
}

export class SqliteError extends Error {
  constructor(message: string, readonly stderr: string) {
    super(message);
    this.name = 'SqliteError';
  }

  /** macOS answers this way when the terminal lacks Full Disk Access. */
  get accessDenied(): boolean {
    return /authorization denied|unable to open database|operation not permitted/i.test(this.stderr);
  }
}

export type SqlValue = string | number | bigint | boolean | null | Uint8Array;

const maxOutputBytes = 64 * 1024 * 1024;

export class SqliteCli {
  private readonly program: string;
  private readonly target: string;
  private readonly readonlyMode: boolean;
  private readonly busyTimeoutMs: number;
  private readonly timeoutMs: number;
  private readonly process: SqliteProcess | undefined;

  constructor(readonly dbPath: string, options: SqliteCliOptions) {
    this.program = options.program ?? 'sqlite3';
    this.readonlyMode = options.readonly;
    this.busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    // A file: URI also keeps a path that starts with "-" from reading as an option.
    const url = pathToFileURL(resolve(dbPath));
    if (this.readonlyMode) url.searchParams.set('mode', 'ro');
    this.target = url.href;
    if (options.longLived) this.process = new SqliteProcess(this.program, [...this.modeFlags(), '-json', '-bail', '-cmd', `.timeout ${this.busyTimeoutMs}`, this.target], this.timeoutMs);
  }

  /** Ends the long-lived program, if any. */
  async close(): Promise<void> {
    await this.process?.close();
  }

  /** Runs one SELECT (or a script whose only row-returning statement is the last) and returns its rows. */
  async query<Row = Record<string, unknown>>(sql: string): Promise<Row[]> {
    const out = await this.run(['-json'], sql);
    const text = out.trim();
    return text === '' ? [] : (JSON.parse(text) as Row[]);
  }

  /** Runs statements that return no rows. Only for files this program owns (the simulator). */
  async exec(sql: string): Promise<void> {
    if (this.readonlyMode) throw new Error('exec on a read-only SQLite connection');
    await this.run([], sql);
  }

  /** Checks that the program exists, returning its version line. */
  async version(): Promise<string> {
    return new Promise((done, fail) => {
      execFile(this.program, ['-version'], { timeout: 5_000 }, (err, stdout) => (err ? fail(err) : done(stdout.trim())));
    });
  }

  private modeFlags(): string[] {
    return this.readonlyMode ? ['-readonly'] : [];
  }

  private async run(flags: string[], sql: string): Promise<string> {
    if (this.process) {
      try {
        return await this.process.run(sql);
      } catch (err) {
        const stderr = err instanceof SqliteRunError ? err.stderr : '';
        const detail = (err as Error).message.trim().split('\n')[0] ?? '';
        throw new SqliteError(`sqlite3 failed on ${this.dbPath}: ${detail}`, stderr || (err as Error).message);
      }
    }
    const args = [...this.modeFlags(), ...flags, '-bail', '-cmd', `.timeout ${this.busyTimeoutMs}`, this.target, sql];
    return new Promise((done, fail) => {
      execFile(this.program, args, { timeout: this.timeoutMs, maxBuffer: maxOutputBytes, encoding: 'utf8' }, (err, stdout, stderr) => {
        if (err) {
          const detail = (stderr || err.message).trim().split('\n')[0] ?? '';
          fail(new SqliteError(`sqlite3 failed on ${this.dbPath}: ${detail}`, stderr || err.message));
          return;
        }
        done(stdout);
      });
    });
  }
}

/**
 * A value as an SQL literal. Only the simulator builds SQL from values (the
 * CLI cannot bind parameters); strings are quoted by doubling `'`, which is
 * the whole of SQLite's string escaping, and blobs are hex.
 */
export function sqlLiteral(value: SqlValue): string {
  if (value === null) return 'NULL';
  if (typeof value === 'boolean') return value ? '1' : '0';
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`not a finite number: ${value}`);
    return String(value);
  }
  if (typeof value === 'string') {
    if (value.includes('\0')) throw new Error('a NUL character cannot pass through the sqlite3 program');
    return `'${value.replace(/'/g, "''")}'`;
  }
  return `X'${Buffer.from(value).toString('hex')}'`;
}

/** For the reader: cursor values are spliced only after this check. */
export function sqlInteger(value: number): string {
  if (!Number.isSafeInteger(value)) throw new Error(`not a safe integer: ${value}`);
  return String(value);
}

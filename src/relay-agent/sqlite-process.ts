import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomUUID } from 'node:crypto';

/**
 * One long-lived `sqlite3` program fed statements through stdin, for callers
 * that run many small statements (the agent's poll loop, the simulator's
 * writes): starting the program costs far more than a statement on chat.db.
 * Each script is followed by `.print <marker>`; its output is what stdout
 * carried before the marker. The program runs with `-bail`, so a failing
 * statement ends it (an open transaction is rolled back by SQLite) and the
 * next script starts a fresh one. Scripts run one at a time, in order.
 *
 * The process keeps the event loop alive only while a script is running, so
 * an owner that never calls `close()` does not hold its process open.
 */
export class SqliteProcess {
  private child: ChildProcessWithoutNullStreams | undefined;
  private readonly marker = `--relaybox-end-${randomUUID()}--`;
  private chain: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(private readonly program: string, private readonly args: string[], private readonly timeoutMs: number) {}

  /** Runs a script; resolves with its stdout, rejects with the program's stderr (or the reason it died). */
  run(script: string): Promise<string> {
    const result = this.chain.then(() => this.runNow(script));
    this.chain = result.catch(() => undefined);
    return result;
  }

  /** Ends the program once the scripts already queued have run. */
  async close(): Promise<void> {
    this.closed = true;
    await this.chain;
    const child = this.child;
    this.child = undefined;
    if (!child) return;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((done) => child.once('exit', () => done()));
    this.setRef(child, true);
    child.stdin.end();
    await exited;
  }

  private start(): ChildProcessWithoutNullStreams {
    const child = spawn(this.program, this.args, { stdio: ['pipe', 'pipe', 'pipe'] });
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    // A write to a program that died already fails here, and the run that made it fails through 'exit'.
    child.stdin.on('error', () => undefined);
    child.once('exit', () => {
      if (this.child === child) this.child = undefined;
    });
    this.setRef(child, false);
    return child;
  }

  private setRef(child: ChildProcessWithoutNullStreams, ref: boolean): void {
    for (const handle of [child, child.stdin, child.stdout, child.stderr] as Array<{ ref?: () => void; unref?: () => void }>) {
      if (ref) handle.ref?.();
      else handle.unref?.();
    }
  }

  private runNow(script: string): Promise<string> {
    if (this.closed) return Promise.reject(new Error('sqlite3 process closed'));
    const child = (this.child ??= this.start());
    this.setRef(child, true);
    return new Promise<string>((done, fail) => {
      let out = '';
      let err = '';
      const onOut = (chunk: string) => {
        out += chunk;
        const end = out.indexOf(`${this.marker}\n`);
        if (end === -1) return;
        finish();
        done(out.slice(0, end));
      };
      const onErr = (chunk: string) => {
        err += chunk;
      };
      const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
        finish();
        fail(new SqliteRunError(err.trim() || `sqlite3 exited (${signal ?? code}) before the script finished`, err));
      };
      const timer = setTimeout(() => {
        err ||= `timed out after ${this.timeoutMs} ms`;
        child.kill('SIGKILL');
      }, this.timeoutMs);
      const finish = () => {
        clearTimeout(timer);
        child.stdout.off('data', onOut);
        child.stderr.off('data', onErr);
        child.off('exit', onExit);
        this.setRef(child, false);
      };
      child.stdout.on('data', onOut);
      child.stderr.on('data', onErr);
      child.once('exit', onExit);
      // The `;` ends a last statement written without one, so the marker line is read as a command.
      child.stdin.write(`${script}\n;\n.print ${this.marker}\n`);
    });
  }
}

export class SqliteRunError extends Error {
  constructor(message: string, readonly stderr: string) {
    super(message);
  }
}

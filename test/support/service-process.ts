import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { childEnv } from './services.ts';

export interface ServiceProcess {
  child: ChildProcess;
  /** The port it printed it listens on (web and all roles). */
  port: number | undefined;
  lines: string[];
  /** Sends SIGTERM and resolves with the exit code and how long the exit took. */
  terminate(): Promise<{ code: number | null; ms: number }>;
}

/** Starts `src/main.ts` as a real process and waits for its "running"/"listening" log line. */
export async function startServiceProcess(
  role: 'all' | 'web' | 'worker',
  env: Record<string, string>,
  timeoutMs = 20_000,
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', role], {
    env: { ...childEnv(), PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const ready = new Promise<number | undefined>((resolve, reject) => {
    // A process that did not start is not left running: nothing else holds its id to stop it.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`service ${role} did not start in ${timeoutMs} ms\n${lines.join('\n')}\n${stderr}`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`service ${role} exited with ${code} before it started\n${lines.join('\n')}\n${stderr}`));
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      lines.push(line);
      try {
        const entry = JSON.parse(line) as { msg?: string; port?: number };
        if (entry.msg?.startsWith(`relaybox ${role} `)) {
          clearTimeout(timer);
          resolve(entry.port);
        }
      } catch {
        // not a log line
      }
    });
  });
  const port = await ready;
  return {
    child,
    port,
    lines,
    async terminate() {
      const started = Date.now();
      // Ended already (a SIGKILL leaves exitCode null): its 'exit' has been emitted and will not come again.
      if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, ms: 0 };
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      return { code, ms: Date.now() - started };
    },
  };
}

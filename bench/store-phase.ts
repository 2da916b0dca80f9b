import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { serviceNodeFlags } from './service-node-flags.ts';

const root = resolve(import.meta.dirname, '..');

/**
 * Runs one phase of `npm run bench:store` (`fill`, `serve`, `pages` or `stats`, with `from` the
 * checkout whose store it opens) in a fresh process, so its RSS and start are
 * its own, with the Node flags the service runs with; resolves with the
 * figures it printed.
 */
export function storePhase<R>(
  phase: 'fill' | 'serve' | 'pages' | 'stats',
  dir: string,
  count: number,
  from: string | undefined,
): Promise<R> {
  return new Promise((resolveResult, reject) => {
    const proc = spawn(
      process.execPath,
      [
        ...serviceNodeFlags,
        '--import',
        'tsx',
        join(root, 'bench/embedded-store.ts'),
        phase,
        dir,
        String(count),
        from ?? '',
      ],
      { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    proc.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    proc.once('exit', (code) =>
      code === 0 ? resolveResult(JSON.parse(out) as R) : reject(new Error(`${phase} exited with ${code}`)),
    );
  });
}

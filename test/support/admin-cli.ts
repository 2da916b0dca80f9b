import { spawn } from 'node:child_process';
import { childEnv } from './services.ts';

/** `npm run admin -- <args>` as a process of its own, with `env` added: its exit code and all it printed. */
export function runAdmin(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/admin/cli.ts', ...args], {
      env: { ...childEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c));
    child.stderr.on('data', (c: Buffer) => (output += c));
    child.on('exit', (code) => resolve({ code, output }));
  });
}

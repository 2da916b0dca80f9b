/**
 * The README's quick start, run as written: its shell block against a real
 * server process (embedded default), with only the address and the
 * simulator's directory swapped for this run's own. Its test key's message
 * must reach `delivered` with no relay connected, then its live message
 * through the agent, and the agent must stop.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { waitFor } from '../integration/runtime-contract.ts';
import { shellBlockAfter } from '../support/markdown-shell.ts';
import { startServiceProcess } from '../support/service-process.ts';

const root = new URL('../..', import.meta.url).pathname;

test('the README quick start runs as written and ends with a delivered message', { timeout: 120_000 }, async (t) => {
  const missing = ['curl', 'jq'].filter((program) => spawnSync('sh', ['-c', `command -v ${program}`]).status !== 0);
  if (missing.length > 0) {
    if (process.env.CI === 'true') throw new Error(`${missing.join(', ')} must be installed in CI`);
    return t.skip(`${missing.join(', ')} not installed: the quick start needs them`);
  }
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-quickstart-'));
  // The embedded default, as `npm start` on a fresh clone runs it: CI's REDIS_URL/MONGODB_URL would
  // point it at a shared database where the quick start's email may already be signed up.
  const server = await startServiceProcess('all', {
    DATA_DIR: join(dir, 'data'),
    LOG_LEVEL: 'warn',
    REDIS_URL: '',
    MONGODB_URL: '',
    // Quiet hours (docs/pacing.md#quiet-hours) would hold the message to +1 415 at night in California.
    PACING_QUIET_HOURS: 'off',
  });
  t.after(async () => {
    await server.terminate();
    await rm(dir, { recursive: true, force: true });
  });
  const script = shellBlockAfter(await readFile(join(root, 'README.md'), 'utf8'), '## Use it', 'README.md')
    .replaceAll('localhost:3000', `127.0.0.1:${server.port}`)
    .replaceAll('./data/sim', join(dir, 'sim'));
  assert.match(script, /npm run relay/, 'the quick start runs the agent');
  const testSend = script.search(/"mode":"test"/);
  assert.ok(testSend >= 0, 'the quick start makes a test key');
  assert.ok(testSend < script.indexOf('npm run relay'), 'the test key path comes first, before any relay');

  // `set -m`: job control as in an interactive terminal, where `kill %1` stops the agent's whole process group.
  const run = spawn('bash', ['-c', `set -m\n${script}\nwait\necho "quick start done"`], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  run.stdout.on('data', (c: Buffer) => (output += c.toString()));
  run.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const timer = setTimeout(() => run.kill('SIGKILL'), 90_000);
  const code = await new Promise<number | null>((done) => run.on('exit', (c) => done(c)));
  clearTimeout(timer);
  assert.equal(code, 0, output);
  const statuses = output.split('\n').filter((line) => /^(queued|processing|sent|delivered|failed)$/.test(line));
  assert.equal(statuses.at(-1), 'delivered', output);
  // Both sends reach delivered: the test key's through the built-in relay, before the agent starts; then the live one.
  assert.equal(statuses.filter((s) => s === 'delivered').length, 2, output);
  assert.match(output, /"event":"send\.delivered"/, 'the agent said it was delivered');
  assert.match(output, /"event":"stopping","signal":"SIGTERM"/, 'kill %1 stopped the agent');
  assert.match(output, /quick start done/);
  // npm exits on the signal first; the agent's own processes finish their clean stop a moment later.
  const stray = () =>
    spawnSync('sh', ['-c', `ps -eo args | grep -F -- '${join(dir, 'sim')}' | grep -v grep`], { encoding: 'utf8' })
      .stdout;
  await waitFor(() => stray() === '', 10_000, 'no agent process left behind');
});

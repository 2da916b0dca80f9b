/**
 * The automation walk-through (docs/automations.md, continuing the README's
 * quick start), run as written: its shell block against a real server process
 * (embedded default) and the relay agent in simulator mode, after what the
 * quick start leaves behind (an owner's access token, a registered agent),
 * with only the address and the simulator's directory swapped for this run's
 * own.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { shellBlockAfter } from '../support/markdown-shell.ts';
import { startServiceProcess } from '../support/service-process.ts';
import { request } from '../support/test-app.ts';

const root = new URL('../..', import.meta.url).pathname;

test(
  'the automation walk-through runs as written: the STOP gets the reply and the contact is tagged',
  { timeout: 180_000 },
  async (t) => {
    const missing = ['curl', 'jq'].filter((program) => spawnSync('sh', ['-c', `command -v ${program}`]).status !== 0);
    if (missing.length > 0) {
      if (process.env.CI === 'true') throw new Error(`${missing.join(', ')} must be installed in CI`);
      return t.skip(`${missing.join(', ')} not installed: the example needs them`);
    }
    const dir = await mkdtemp(join(tmpdir(), 'relaybox-automation-readme-'));
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
    const base = `http://127.0.0.1:${server.port}`;
    // What the quick start leaves: an owner's access token, and an agent registered once with a registration token.
    const signup = await request(base, 'POST', '/api/v1/auth/signup', {
      body: { organizationName: 'Acme', email: 'me@acme.test', password: 'a long password' },
    });
    assert.equal(signup.status, 201, signup.text);
    const accessToken = signup.body.accessToken as string;
    const relayToken = await request(base, 'POST', `/api/v1/tenants/${signup.body.organization.id}/relay-tokens`, {
      token: accessToken,
      body: {},
    });
    assert.equal(relayToken.status, 201, relayToken.text);
    const sim = join(dir, 'sim');
    const agent = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'packages/relay-agent/src/cli.ts',
        '--server',
        `ws://127.0.0.1:${server.port}/api/v1/relays/connect`,
        '--token',
        relayToken.body.token,
        '--simulate',
        '--chat-db',
        join(sim, 'chat.db'),
        '--state-dir',
        join(sim, 'state'),
      ],
      { cwd: root, stdio: 'ignore' },
    );
    const deadline = Date.now() + 60_000;
    while (!existsSync(join(sim, 'state', 'relay.json'))) {
      assert.ok(Date.now() < deadline, 'the agent registered');
      await sleep(100);
    }
    agent.kill('SIGTERM');
    await new Promise((resolve) => agent.once('exit', resolve));

    const script = shellBlockAfter(
      await readFile(join(root, 'docs', 'automations.md'), 'utf8'),
      '## Example: auto-reply to "STOP" and tag the contact',
      'docs/automations.md',
    )
      .replaceAll('localhost:3000', `127.0.0.1:${server.port}`)
      .replaceAll('./data/sim', sim);
    const run = spawn('bash', ['-c', `set -m\n${script}\nwait\necho "example done"`], {
      cwd: root,
      env: { ...process.env, ACCESS_TOKEN: accessToken, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    run.stdout.on('data', (c: Buffer) => (output += c.toString()));
    run.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => run.kill('SIGKILL'), 120_000);
    const code = await new Promise<number | null>((done) => run.on('exit', (c) => done(c)));
    clearTimeout(timer);
    assert.equal(code, 0, output);
    const lines = output.split('\n');
    const dry = JSON.parse(lines.find((l) => l.startsWith('{"matched"'))!);
    assert.deepEqual(dry.actionsWouldExecute, ['send_reply', 'create_contact']);
    assert.ok(
      lines.includes(
        '[{"type":"send_reply","status":"succeeded","error":null},{"type":"create_contact","status":"succeeded","error":null}]',
      ),
      output,
    );
    assert.ok(lines.includes('{"to":"+14155550123","body":"You are unsubscribed. Reply START to come back."}'), output);
    assert.ok(lines.includes('{"phoneNumbers":["+14155550123"],"tags":["unsubscribed"]}'), output);
    assert.match(output, /example done/);
  },
);

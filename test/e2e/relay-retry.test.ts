/**
 * A failed send is retried through the real agent and reaches Messages again:
 * the server in this process (each backend), the relay agent as a process in
 * simulator mode, failures injected into its simulated Messages app. The
 * simulator's send log is the proof of what went out.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { simulateFailures, readSendLog as sendLog } from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { waitFor } from '../integration/runtime-contract.ts';
import { backends, signup, startTestApp } from '../support/test-app.ts';

for (const backend of backends()) {
  describe(`retries through the relay agent (${backend})`, () => {
    test(
      'injected failures use up attempts of one message only; a retry is sent again and delivers',
      { timeout: 120_000 },
      async (t) => {
        const app = await startTestApp(backend, { MESSAGE_RETRY_BASE_MS: '200', MESSAGE_MAX_ATTEMPTS: '3' });
        const dir = await mkdtemp(join(tmpdir(), 'relaybox-retry-'));
        const chatDb = join(dir, 'chat.db');
        const org = await signup(app);
        const token = (
          await app.request('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`, { token: org.ownerToken })
        ).body.token as string;
        const agent = spawn(
          process.execPath,
          [
            '--import',
            'tsx',
            'packages/relay-agent/src/cli.ts',
            '--server',
            `${app.base.replace('http', 'ws')}/api/v1/relays/connect`,
            '--state-dir',
            join(dir, 'state'),
            '--chat-db',
            chatDb,
            '--simulate',
            '--poll-ms',
            '100',
            '--log-format',
            'json',
          ],
          {
            env: {
              ...process.env,
              RELAYBOX_TOKEN: token,
              LOG_LEVEL: 'info',
              RELAY_SIM_DELIVERY_MS: '200',
              RELAY_SUMMARY_MS: '500',
            },
            stdio: ['ignore', 'pipe', 'pipe'],
          },
        );
        let output = '';
        agent.stdout!.on('data', (c: Buffer) => (output += c.toString()));
        agent.stderr!.on('data', (c: Buffer) => (output += c.toString()));
        const exited = new Promise<number | null>((done) => agent.on('exit', (code) => done(code)));
        t.after(async () => {
          agent.kill('SIGKILL');
          await exited;
          await app.stop();
          await rm(dir, { recursive: true, force: true });
        });
        const call = (method: string, path: string, body?: unknown) =>
          app.request(method, path, { token: org.ownerToken, body });
        const statusOf = async (id: string) =>
          (await call('GET', `/api/v1/messages/${id}/status`)).body as {
            status: string;
            attempts: number;
            lastError: string | null;
          };
        const sendMessage = async (to: string, body: string) =>
          (await call('POST', '/api/v1/messages', { to, body })).body.id as string;
        const settled = (id: string) =>
          waitFor(
            async () => ['delivered', 'failed'].includes((await statusOf(id)).status),
            30_000,
            `${id} settled\n${output}`,
          );
        await waitFor(
          async () =>
            (await call('GET', '/api/v1/relays')).body.data.some((r: { status: string }) => r.status === 'online'),
          20_000,
          `relay online\n${output}`,
        );

        // Two failures: attempts 1 and 2 fail, attempt 3 is sent again and delivers.
        await simulateFailures(chatDb, 2);
        const retried = await sendMessage('+14155550100', 'retried until it goes');
        await settled(retried);
        assert.deepEqual(await statusOf(retried).then((s) => [s.status, s.attempts]), ['delivered', 3]);
        let log = await sendLog(chatDb);
        assert.deepEqual(
          log.filter((e) => e.messageId === retried).map((e) => [e.attempt, e.error]),
          [
            [1, 1],
            [2, 1],
            [3, 0],
          ],
          'three sends of the message',
        );

        // An unrelated message afterwards goes out once, at the first attempt: no failure was left over.
        const after = await sendMessage('+14155550101', 'unaffected');
        await settled(after);
        assert.deepEqual(await statusOf(after).then((s) => [s.status, s.attempts]), ['delivered', 1]);

        // Three failures with three attempts allowed: every attempt is sent and fails, and all three failures are used by it.
        await simulateFailures(chatDb, 3);
        const exhausted = await sendMessage('+14155550102', 'fails every time');
        await settled(exhausted);
        const final = await statusOf(exhausted);
        assert.deepEqual([final.status, final.attempts], ['failed', 3]);
        assert.match(final.lastError ?? '', /Messages reported error 1/);
        const next = await sendMessage('+14155550103', 'the next one is fine');
        await settled(next);
        assert.deepEqual(
          await statusOf(next).then((s) => [s.status, s.attempts]),
          ['delivered', 1],
          'no injected failure left for an unrelated message',
        );

        log = await sendLog(chatDb);
        const count = (id: string) => log.filter((e) => e.messageId === id).length;
        assert.deepEqual([retried, after, exhausted, next].map(count), [3, 1, 3, 1]);
        assert.deepEqual(
          log.filter((e) => e.messageId === exhausted).map((e) => [e.attempt, e.error]),
          [
            [1, 1],
            [2, 1],
            [3, 1],
          ],
        );

        // The operator saw each attempt and its outcome, in JSON lines.
        const events = output
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { event?: string; messageId?: string; attempt?: number; [k: string]: unknown });
        const of = (id: string) => events.filter((e) => e.messageId === id).map((e) => `${e.event}#${e.attempt}`);
        assert.deepEqual(
          of(retried).filter((e) => /accepted|failed|delivered/.test(e)),
          [
            'send.accepted#1',
            'send.failed#1',
            'send.accepted#2',
            'send.failed#2',
            'send.accepted#3',
            'send.delivered#3',
          ],
        );
        assert.ok(
          events.some((e) => e.event === 'online'),
          'online',
        );
        const summaries = events.filter((e) => e.event === 'summary');
        assert.ok(summaries.length > 0, 'a periodic summary');
        await waitFor(
          async () => {
            const all = output
              .split('\n')
              .filter((l) => l.includes('"event":"summary"'))
              .map((l) => JSON.parse(l) as { failed: number });
            return all.reduce((n, s) => n + s.failed, 0) === 5;
          },
          5_000,
          'the summaries count the five failed attempts',
        );
        assert.doesNotMatch(output, new RegExp(token), 'the registration token is not logged');
      },
    );
  });
}

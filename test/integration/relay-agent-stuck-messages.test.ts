/**
 * A stuck Messages app: the simulator takes sends and writes no chat.db row.
 * The agent reports itself degraded in its heartbeat, advertises no capacity,
 * restarts Messages at most once per interval, and takes sends again once
 * rows appear.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { simulateStall } from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { FakeRelayServer, startAgent } from '../support/fake-relay-server.ts';
import { until } from '../support/until.ts';

const restartIntervalMs = 6_000;

test(
  'a stuck Messages app degrades the relay, takes no new work, and is restarted at most once per interval',
  { timeout: 60_000 },
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'relaybox-stuck-'));
    const server = await FakeRelayServer.start();
    const chatDb = join(dir, 'chat.db');
    const agent = startAgent(
      [
        '--server',
        server.url,
        '--state-dir',
        join(dir, 'state'),
        '--chat-db',
        chatDb,
        '--simulate',
        '--capacity',
        '5',
        '--poll-ms',
        '100',
        '--token',
        'rtok_stuck',
        '--log-format',
        'json',
      ],
      { RELAY_STUCK_MS: '1000', RELAY_RESTART_INTERVAL_MS: String(restartIntervalMs), RELAY_SUMMARY_MS: '0' },
    );
    t.after(async () => {
      agent.child.kill('SIGKILL');
      await server.close();
      await rm(dir, { recursive: true, force: true });
    });
    const events = (name: string) =>
      agent
        .output()
        .split('\n')
        .filter((l) => l.includes(`"event":"${name}"`)).length;
    /** The log arrives through a pipe, after the frames that followed it: wait for the count, then check it stays. */
    const logged = async (name: string, count: number) => {
      await until(`${count} ${name} log lines`, async () => events(name) >= count, 5_000);
      assert.equal(events(name), count, name);
    };

    await server.waitFor('hello');
    server.send(0, {
      type: 'welcome',
      relayId: 'relay_stuck',
      credential: { relayId: 'relay_stuck', secret: 's' },
      inboundCursor: 0,
      heartbeatIntervalMs: 300,
    });
    const ready = await server.waitFor('ready', (f) => f.capacity === 5);

    // 1. Messages stalls: the send is taken (osascript succeeds) but no row appears.
    await simulateStall(chatDb);
    server.send(0, { type: 'send', messageId: 'msg_stuck1', attempt: 1, to: '+15550001111', body: 'one' });
    const stuckAt = Date.now();
    const degraded = await server.waitFor('heartbeat', (f) => f.degraded !== undefined, { from: ready.index });
    assert.match(
      degraded.frame.degraded!,
      /^Messages wrote no chat\.db row for a send within 1\.0 s; not taking new sends$/,
    );
    assert.ok(Date.now() - stuckAt >= 1_000, 'not before the stuck time');
    await server.waitFor('ready', (f) => f.capacity === 0, { from: ready.index });
    // The first restart comes at once; the simulator then writes the held row, and the relay recovers.
    const sent = await server.waitFor('status', (f) => f.messageId === 'msg_stuck1' && f.status === 'sent', {
      from: ready.index,
    });
    const recovered = await server.waitFor('ready', (f) => f.capacity === 5, { from: degraded.index });
    await server.waitFor('heartbeat', (f) => f.degraded === undefined, { from: recovered.index });
    assert.ok(sent.index > degraded.index);
    await logged('messages.restart', 1);
    await logged('messages.recovered', 1);
    const firstRestartAt = Date.now();

    // 2. It stalls again within the interval: degraded again, but no second restart until the interval has passed.
    await simulateStall(chatDb);
    server.send(0, { type: 'send', messageId: 'msg_stuck2', attempt: 1, to: '+15550001111', body: 'two' });
    const again = await server.waitFor('heartbeat', (f) => f.degraded !== undefined, { from: recovered.index });
    await server.waitFor('ready', (f) => f.capacity === 0, { from: recovered.index });
    await logged('messages.stuck', 2);
    assert.equal(events('messages.restart'), 1, 'no restart within the interval');
    const second = await server.waitFor('status', (f) => f.messageId === 'msg_stuck2' && f.status === 'sent', {
      from: again.index,
      timeoutMs: restartIntervalMs + 8_000,
    });
    assert.ok(Date.now() - firstRestartAt >= restartIntervalMs - 500, 'the second restart waited for the interval');
    await logged('messages.restart', 2);
    await server.waitFor('ready', (f) => f.capacity === 5, { from: second.index });
    assert.deepEqual(server.invalid, [], 'every frame matches the protocol');
  },
);

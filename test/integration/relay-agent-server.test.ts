/**
 * The relay agent as a real process (the CLI, in simulator mode) against a
 * tiny fake server that speaks the relay protocol: registration, credential
 * storage, credits, statuses from the simulated chat.db, inbound rows and their
 * replay after a drop, reconnects with the stored credential, and no message
 * sent twice across a reconnect and a restart.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ServerFrame } from '../../src/relay-protocol/frames.ts';
import { FakeRelayServer, startAgent } from '../support/fake-relay-server.ts';
import {
  simulateFailures,
  simulateInbound,
  readSendLog as sendLog,
} from '../../packages/relay-agent/src/simulated-messages-app.ts';

const welcome = (over: Partial<Extract<ServerFrame, { type: 'welcome' }>> = {}): ServerFrame => ({
  type: 'welcome',
  relayId: 'rly_test',
  inboundCursor: 0,
  heartbeatIntervalMs: 500,
  ...over,
});

test(
  'agent registers, reports statuses, replays unacked inbound rows, reconnects with its credential and never sends twice',
  { timeout: 60_000 },
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'relaybox-relay-agent-'));
    const server = await FakeRelayServer.start();
    const chatDb = join(dir, 'chat.db');
    const stateDir = join(dir, 'state');
    const args = [
      '--server',
      server.url,
      '--state-dir',
      stateDir,
      '--chat-db',
      chatDb,
      '--simulate',
      '--capacity',
      '5',
      '--poll-ms',
      '100',
      '--name',
      'test relay',
    ];
    let agent = startAgent([...args, '--token', 'rtok_secret_registration']);
    t.after(async () => {
      agent.child.kill('SIGKILL');
      await server.close();
      await rm(dir, { recursive: true, force: true });
    });

    // 1. Registration with the token; the credential from welcome is stored 0600.
    const hello1 = await server.waitFor('hello');
    assert.equal(hello1.frame.registrationToken, 'rtok_secret_registration');
    assert.equal(hello1.frame.credential, undefined);
    assert.equal(hello1.frame.name, 'test relay');
    server.send(hello1.conn, welcome({ credential: { relayId: 'rly_test', secret: 'relay-secret-123' } }));
    const ready = await server.waitFor('ready');
    assert.equal(ready.frame.capacity, 5);
    const state = JSON.parse(await readFile(join(stateDir, 'relay.json'), 'utf8')) as {
      relayId: string;
      secret: string;
    };
    assert.deepEqual([state.relayId, state.secret], ['rly_test', 'relay-secret-123']);
    assert.equal((await stat(join(stateDir, 'relay.json'))).mode & 0o777, 0o600);
    const heartbeat = await server.waitFor('heartbeat');
    assert.ok(heartbeat.frame.health.memoryTotalBytes > 0);

    // 2. A send is written by the simulator and reported sent, then delivered, with the row's guid.
    server.send(0, {
      type: 'send',
      messageId: 'msg_one',
      attempt: 1,
      to: '+1 (555) 000-1111',
      body: 'Hello "there" \\ friend',
    });
    const sent = await server.waitFor('status', (f) => f.messageId === 'msg_one' && f.status === 'sent');
    const delivered = await server.waitFor('status', (f) => f.messageId === 'msg_one' && f.status === 'delivered');
    assert.ok(sent.index < delivered.index, 'sent before delivered');
    // The hops the agent saw come with its statuses, in hop order (Messages may show the row before osascript returns).
    assert.deepEqual(
      sent.frame.checkpoints?.map((c: { hop: string }) => c.hop),
      ['relay_received', 'handed_to_app', 'seen_in_database'],
    );
    const log1 = await sendLog(chatDb);
    assert.equal(log1.length, 1);
    assert.equal(sent.frame.guid, log1[0]!.guid);
    server.send(0, { type: 'ack', of: 'status', messageId: 'msg_one', attempt: 1 });
    server.send(0, { type: 'ack', of: 'status', messageId: 'msg_one', attempt: 1 });
    await server.waitFor('ready', () => true, { from: ready.index + 1 }); // a credit came back

    // 3. An injected failure becomes a failed status. This send carries a trace context (the one before did not): accepted all the same, and logged with it.
    await simulateFailures(chatDb, 1);
    server.send(0, {
      type: 'send',
      messageId: 'msg_fail',
      attempt: 1,
      to: 'someone@example.com',
      body: 'will fail',
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    });
    const failed = await server.waitFor('status', (f) => f.messageId === 'msg_fail');
    assert.equal(failed.frame.status, 'failed');
    assert.match(failed.frame.error ?? '', /error 1/);
    assert.match(
      agent.output(),
      /"event":"send\.accepted","messageId":"msg_fail".*"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"/,
    );
    server.send(0, { type: 'ack', of: 'status', messageId: 'msg_fail', attempt: 1 });

    // 3b. Attachments are downloaded, handed over as files and deleted; a bad URL fails the send.
    const files = createServer((_req, res) => res.end('IMAGE'));
    await new Promise<void>((done) => files.listen(0, '127.0.0.1', done));
    t.after(() => files.close());
    const fileUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}/pic.png`;
    server.send(0, {
      type: 'send',
      messageId: 'msg_pic',
      attempt: 1,
      to: '+15550001111',
      body: 'look',
      attachments: [fileUrl],
    });
    server.send(0, {
      type: 'send',
      messageId: 'msg_badpic',
      attempt: 1,
      to: '+15550001111',
      attachments: ['file:///etc/passwd'],
    });
    await server.waitFor('status', (f) => f.messageId === 'msg_pic' && f.status === 'sent');
    const badPic = await server.waitFor('status', (f) => f.messageId === 'msg_badpic');
    assert.equal(badPic.frame.status, 'failed');
    assert.match(badPic.frame.error ?? '', /only http and https/);
    assert.equal((await sendLog(chatDb)).find((e) => e.messageId === 'msg_pic')?.attachments, 1);
    assert.deepEqual(await readdir(join(stateDir, 'attachments')), [], 'downloads deleted after the send');

    // 4. An inbound row is forwarded; the server does not ack it and drops the connection.
    const row = await simulateInbound(chatDb, {
      from: '+15557654321',
      body: 'hi from outside',
      attributedBodyOnly: true,
    });
    const inbound = await server.waitFor('inbound', (f) => f.rowId === row.rowId);
    assert.equal(inbound.frame.guid, row.guid);
    assert.equal(inbound.frame.body, 'hi from outside');
    assert.equal(inbound.frame.from, '+15557654321');
    server.sockets[0]!.terminate();

    // 5. The agent comes back with the stored credential, not the token, and replays the unacked row.
    const hello2 = await server.waitFor('hello', (_f, conn) => conn === 1);
    assert.equal(hello2.frame.registrationToken, undefined);
    assert.deepEqual(hello2.frame.credential, { relayId: 'rly_test', secret: 'relay-secret-123' });
    server.send(1, welcome());
    const replayed = await server.waitFor('inbound', (f, conn) => conn === 1 && f.rowId === row.rowId);
    assert.equal(replayed.frame.guid, row.guid);
    server.send(1, { type: 'ack', of: 'inbound', cursor: row.rowId });

    // 6. The server repeats a send it already gave: it is not sent again, its statuses are reported again.
    server.send(1, {
      type: 'send',
      messageId: 'msg_one',
      attempt: 1,
      to: '+15550001111',
      body: 'Hello "there" \\ friend',
    });
    await server.waitFor('status', (f, conn) => conn === 1 && f.messageId === 'msg_one' && f.status === 'delivered');
    assert.equal((await sendLog(chatDb)).filter((e) => e.messageId === 'msg_one').length, 1);

    // 7. A clean stop, then a restart: credential again, the acked row is not replayed, and msg_one still goes out once.
    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0, agent.output());
    const firstRunOutput = agent.output();
    agent = startAgent(args);
    const hello3 = await server.waitFor('hello', (_f, conn) => conn === 2);
    assert.deepEqual(hello3.frame.credential, { relayId: 'rly_test', secret: 'relay-secret-123' });
    server.send(2, welcome({ inboundCursor: row.rowId }));
    server.send(2, {
      type: 'send',
      messageId: 'msg_one',
      attempt: 1,
      to: '+15550001111',
      body: 'Hello "there" \\ friend',
    });
    server.send(2, { type: 'send', messageId: 'msg_two', attempt: 1, to: '+15550001111', body: 'second' });
    await server.waitFor('status', (f, conn) => conn === 2 && f.messageId === 'msg_two' && f.status === 'delivered');
    await server.waitFor('status', (f, conn) => conn === 2 && f.messageId === 'msg_one' && f.status === 'sent');
    const log = await sendLog(chatDb);
    assert.deepEqual(log.map((e) => e.messageId).sort(), ['msg_fail', 'msg_one', 'msg_pic', 'msg_two']);
    assert.equal(
      server.received.some((r) => r.conn === 2 && r.frame.type === 'inbound'),
      false,
      'acked row not replayed',
    );

    // 8. The server's retry of the failed send (attempt 2) is sent again; a repeat of attempt 1 is only re-reported.
    const beforeRetry = server.received.length;
    server.send(2, { type: 'send', messageId: 'msg_fail', attempt: 1, to: 'someone@example.com', body: 'will fail' });
    const refailed = await server.waitFor('status', (f, conn) => conn === 2 && f.messageId === 'msg_fail', {
      from: beforeRetry,
    });
    assert.deepEqual(
      [refailed.frame.attempt, refailed.frame.status],
      [1, 'failed'],
      'attempt 1 re-reported, not sent again',
    );
    server.send(2, { type: 'send', messageId: 'msg_fail', attempt: 2, to: 'someone@example.com', body: 'will fail' });
    const retried = await server.waitFor(
      'status',
      (f, conn) => conn === 2 && f.messageId === 'msg_fail' && f.attempt === 2 && f.status === 'delivered',
      { from: beforeRetry },
    );
    assert.ok(retried.frame.guid);
    assert.equal(
      server.received
        .slice(beforeRetry)
        .some(
          (r) =>
            r.frame.type === 'status' &&
            r.frame.messageId === 'msg_fail' &&
            r.frame.attempt === 2 &&
            r.frame.status === 'failed',
        ),
      false,
    );
    const failLog = (await sendLog(chatDb)).filter((e) => e.messageId === 'msg_fail');
    assert.deepEqual(
      failLog.map((e) => [e.attempt, e.error]),
      [
        [1, 1],
        [2, 0],
      ],
      'two sends: the failed attempt and its retry',
    );

    assert.deepEqual(server.invalid, [], 'every agent frame matched the schema');
    assert.doesNotMatch(
      firstRunOutput + agent.output(),
      /relay-secret-123|rtok_secret_registration/,
      'no secret in the logs',
    );
  },
);

test(
  'a refused registration token stops the agent with a plain message and exit code 1',
  { timeout: 20_000 },
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'relaybox-relay-agent-'));
    const server = await FakeRelayServer.start();
    t.after(async () => {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    });
    const agent = startAgent([
      '--server',
      server.url,
      '--state-dir',
      join(dir, 'state'),
      '--chat-db',
      join(dir, 'chat.db'),
      '--simulate',
      '--token',
      'rtok_expired',
    ]);
    t.after(() => agent.child.kill('SIGKILL'));
    const hello = await server.waitFor('hello');
    server.send(hello.conn, { type: 'error', code: 'unauthorized', message: 'registration token expired' });
    assert.equal(await agent.exited, 1);
    assert.match(
      agent.output(),
      /relay: the server refused the registration token: unauthorized: registration token expired/,
    );
    assert.doesNotMatch(agent.output(), /\n\s+at /, 'no stack trace');
    assert.equal(server.sockets.length, 1, 'no reconnect after a refusal');
  },
);

test('without a stored credential or --token the agent explains what to do', { timeout: 20_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-relay-agent-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const agent = startAgent([
    '--server',
    'ws://127.0.0.1:9/api/v1/relays/connect',
    '--state-dir',
    join(dir, 'state'),
    '--chat-db',
    join(dir, 'chat.db'),
    '--simulate',
  ]);
  assert.equal(await agent.exited, 1);
  assert.match(agent.output(), /no stored credential in .*relay\.json; run once with --token/);
});

test(
  'the agent tells its operator what it does, in plain lines with --log-format pretty, and takes the token from RELAYBOX_TOKEN',
  { timeout: 30_000 },
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'relaybox-relay-agent-'));
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
        '--poll-ms',
        '100',
        '--log-format',
        'pretty',
      ],
      { LOG_LEVEL: 'info', RELAYBOX_TOKEN: 'rtok_from_the_environment', RELAY_SUMMARY_MS: '300' },
    );
    t.after(async () => {
      agent.child.kill('SIGKILL');
      await server.close();
      await rm(dir, { recursive: true, force: true });
    });
    const hello = await server.waitFor('hello');
    assert.equal(hello.frame.registrationToken, 'rtok_from_the_environment');
    server.send(hello.conn, welcome({ credential: { relayId: 'rly_test', secret: 'relay-secret-123' } }));
    await simulateFailures(chatDb, 1);
    server.send(hello.conn, {
      type: 'send',
      messageId: 'msg_a',
      attempt: 1,
      to: '+15550001111',
      body: 'private words',
    });
    await server.waitFor('status', (f) => f.messageId === 'msg_a' && f.status === 'failed');
    server.send(hello.conn, {
      type: 'send',
      messageId: 'msg_a',
      attempt: 2,
      to: '+15550001111',
      body: 'private words',
    });
    await server.waitFor('status', (f) => f.messageId === 'msg_a' && f.attempt === 2 && f.status === 'delivered');
    const row = await simulateInbound(chatDb, { from: '+15557654321', body: 'hello back' });
    await server.waitFor('inbound', (f) => f.rowId === row.rowId);
    await waitForOutput(agent.output, /online as rly_test; last .*: \d+ accepted/);
    server.sockets[hello.conn]!.terminate();
    await server.waitFor('hello', (_f, conn) => conn === 1);
    await waitForOutput(agent.output, /authenticating with the credential/);

    const out = agent.output();
    const expected = [
      /connected to ws:\/\/127\.0\.0\.1:\d+\/api\/v1\/relays\/connect, authenticating with the registration token/,
      /registered and online as relay rly_test/,
      /send msg_a attempt 1 to \+1555•••1111 accepted/,
      /WARN.*send msg_a attempt 1 failed: Messages reported error 1/,
      /send msg_a attempt 2 to \+1555•••1111 accepted/,
      /send msg_a attempt 2 sent/,
      /send msg_a attempt 2 delivered/,
      new RegExp(`received message from \\+1555•••4321 forwarded \\(chat.db row ${row.rowId}\\)`),
      /disconnected \(1006: the connection was lost\) after [\d.]+ (ms|s) online/,
      /reconnecting in [\d.]+ (ms|s) \(try 1\)/,
      /connected to .*, authenticating with the credential/,
    ];
    for (const line of expected) assert.match(out, line);
    const lines = out.split('\n').filter(Boolean);
    assert.ok(
      lines.every((l) => /^\[\d\d:\d\d:\d\d\] (INFO|WARN|ERROR|DEBUG)/.test(l)),
      `every line is a timed, human line:\n${out}`,
    );
    assert.doesNotMatch(out, /private words|hello back/, 'no message body in the log');
    assert.doesNotMatch(out, /15550001111|15557654321/, 'handles are masked');
    assert.doesNotMatch(out, /rtok_from_the_environment|relay-secret-123/, 'no secret in the log');
  },
);

async function waitForOutput(output: () => string, pattern: RegExp, timeoutMs = 8_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pattern.test(output())) {
    if (Date.now() > deadline) throw new Error(`no output matching ${pattern} within ${timeoutMs} ms:\n${output()}`);
    await new Promise((done) => setTimeout(done, 50));
  }
}

import assert from 'node:assert/strict';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseCli, UsageError } from '../../src/relay-agent/cli-args.ts';
import { ReconnectBackoff } from '../../src/relay-agent/reconnect-backoff.ts';

const server = ['--server', 'ws://localhost:3000/api/v1/relays/connect'];

test('a run command gets the documented defaults', () => {
  const command = parseCli([...server, '--token', 'rtok_1'], {});
  assert.equal(command.kind, 'run');
  if (command.kind !== 'run') return;
  const c = command.config;
  assert.equal(c.registrationToken, 'rtok_1');
  assert.equal(c.stateDir, join(homedir(), '.relaybox-relay'));
  assert.equal(c.chatDbPath, join(homedir(), 'Library', 'Messages', 'chat.db'));
  assert.equal(c.capacity, 10);
  assert.equal(c.pollMs, 1000);
  assert.equal(c.simulate, false);
  assert.equal(c.reconnectBaseMs, 500);
  assert.equal(c.reconnectCapMs, 30_000);
  assert.equal(c.simulatorDeliveryMs, 500);
  assert.equal(c.simulatorReadMs, undefined);
});

test('RELAY_SIM_DELIVERY_MS and RELAY_SIM_READ_MS set the simulator delays', () => {
  const command = parseCli([...server, '--simulate', '--chat-db', '/tmp/c.db'], { RELAY_SIM_DELIVERY_MS: '40', RELAY_SIM_READ_MS: '70' });
  assert.ok(command.kind === 'run');
  assert.equal(command.config.simulatorDeliveryMs, 40);
  assert.equal(command.config.simulatorReadMs, 70);
});

test('bad arguments are usage errors naming the flag', () => {
  const cases: Array<[string[], RegExp]> = [
    [[], /--server is required/],
    [['--server', 'http://x/y'], /ws:\/\/ or wss:\/\//],
    [['--server', 'not a url'], /not a URL/],
    [[...server, '--capacity', '0'], /--capacity must be an integer from 1 to 1000/],
    [[...server, '--capacity', '2.5'], /--capacity/],
    [[...server, '--poll-ms', '10'], /--poll-ms/],
    [[...server, '--token', ''], /--token is empty/],
    [[...server, '--wat'], /Unknown option '--wat'/],
    [[...server, 'stray'], /positional|Unexpected argument/i],
    [[...server, '--simulate'], /--chat-db is required/],
    [[...server, '--simulate', '--chat-db', join(homedir(), 'Library', 'Messages', 'chat.db')], /real Messages database/],
    [['simulate-inbound', '--chat-db', '/tmp/c.db', '--from', '+1'], /--body is required/],
    [['simulate-failures', '--chat-db', '/tmp/c.db', '--count', '-1'], /--count/],
  ];
  for (const [argv, message] of cases) {
    assert.throws(() => parseCli(argv, {}), (err: unknown) => err instanceof UsageError && message.test(err.message), argv.join(' '));
  }
});

test('the injection subcommands parse', () => {
  assert.deepEqual(parseCli(['simulate-inbound', '--chat-db', '/tmp/c.db', '--from', '+15551234567', '--body', 'hi'], {}), {
    kind: 'simulate-inbound', chatDbPath: '/tmp/c.db', from: '+15551234567', body: 'hi', attributedBodyOnly: false, groupId: undefined,
  });
  assert.deepEqual(parseCli(['simulate-failures', '--chat-db', '/tmp/c.db', '--count', '3'], {}), { kind: 'simulate-failures', chatDbPath: '/tmp/c.db', count: 3 });
});

test('reconnect delays are full-jitter exponential from 500 ms, capped at 30 s, and reset', () => {
  const top = new ReconnectBackoff(500, 30_000, () => 0.999999);
  const ceilings = Array.from({ length: 10 }, () => top.nextDelayMs() + 1);
  assert.deepEqual(ceilings, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000]);
  top.reset();
  assert.equal(top.nextDelayMs(), 499);
  const bottom = new ReconnectBackoff(500, 30_000, () => 0);
  assert.equal(bottom.nextDelayMs(), 0, 'full jitter reaches down to zero');
});

import { resolve } from 'node:path';
import assert from 'node:assert/strict';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseCli, UsageError } from '../../packages/relay-agent/src/cli-args.ts';
import { usage } from '../../packages/relay-agent/src/cli-usage.ts';
import { ReconnectBackoff } from '../../packages/relay-agent/src/reconnect-backoff.ts';

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
  const command = parseCli([...server, '--simulate', '--chat-db', '/tmp/c.db'], {
    RELAY_SIM_DELIVERY_MS: '40',
    RELAY_SIM_READ_MS: '70',
  });
  assert.ok(command.kind === 'run');
  assert.equal(command.config.simulatorDeliveryMs, 40);
  assert.equal(command.config.simulatorReadMs, 70);
});

test('--simulate without --chat-db plays Messages on a chat.db in the state directory, for every command', () => {
  const stateDir = '/tmp/relay-state';
  const simulated = join(stateDir, 'simulated-chat.db');
  const run = parseCli([...server, '--simulate', '--state-dir', stateDir], {});
  assert.ok(run.kind === 'run');
  assert.equal(run.config.chatDbPath, simulated);
  const doctor = parseCli(['doctor', '--simulate', '--state-dir', stateDir], {});
  assert.ok(doctor.kind === 'doctor');
  assert.equal(doctor.chatDbPath, simulated);
  for (const argv of [
    ['simulate-inbound', '--from', '+1', '--body', 'b'],
    ['simulate-failures', '--count', '1'],
    ['simulate-sms-only', '--to', '+1'],
    ['simulate-stall'],
  ]) {
    const command = parseCli([...argv, '--state-dir', stateDir], {});
    assert.equal('chatDbPath' in command && command.chatDbPath, simulated, argv[0]);
  }
  const defaults = parseCli([...server, '--simulate'], {});
  assert.ok(defaults.kind === 'run');
  assert.equal(defaults.config.chatDbPath, join(homedir(), '.relaybox-relay', 'simulated-chat.db'));
  // Without --simulate the real Messages database stays the default.
  const real = parseCli(['doctor', '--state-dir', stateDir], {});
  assert.ok(real.kind === 'doctor');
  assert.equal(real.chatDbPath, join(homedir(), 'Library', 'Messages', 'chat.db'));
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
    [[...server, '--simulate', '--chat-db', ''], /--chat-db is empty/],
    [
      [...server, '--simulate', '--chat-db', join(homedir(), 'Library', 'Messages', 'chat.db')],
      /real Messages database/,
    ],
    [['simulate-inbound', '--chat-db', '/tmp/c.db', '--from', '+1'], /--body is required/],
    [['simulate-failures', '--chat-db', '/tmp/c.db', '--count', '-1'], /--count/],
    [['simulate-failures', '--chat-db', '/tmp/c.db', '--error', '0'], /--error must not be 0/],
    [['simulate-failures', '--chat-db', '/tmp/c.db', '--error', 'x'], /--error must be an integer/],
    [['simulate-failures', '--chat-db', '/tmp/c.db', '--error', '22', '--never-deliver'], /not both/],
    [['simulate-sms-only', '--chat-db', '/tmp/c.db'], /--to is required/],
    [['simulate-reaction', '--from', '+1', '--target', 'G', '--tapback', 'hug'], /--tapback must be one of/],
    [['simulate-reaction', '--from', '+1', '--target', 'G', '--tapback', 'emoji'], /--emoji goes with/],
    [['simulate-reaction', '--from', '+1', '--target', 'G', '--tapback', 'like', '--emoji', 'x'], /--emoji goes with/],
    [['simulate-reply', '--from', '+1', '--body', 'hi'], /--to-guid is required/],
    [['simulate-edit', '--guid', 'G'], /--body is required/],
    [['simulate-unsend'], /--guid is required/],
    [['simulate-group', '--group', 'g', '--from', '+1'], /one of --rename/],
    [['simulate-group', '--group', 'g', '--from', '+1', '--leave', '--rename', 'x'], /one of --rename/],
    [['simulate-unsend', '--guid', 'G', '--body', 'x'], /./],
    [[...server, '--log-format', 'xml'], /--log-format must be one of pretty, json/],
  ];
  for (const [argv, message] of cases) {
    assert.throws(
      () => parseCli(argv, {}),
      (err: unknown) => err instanceof UsageError && message.test(err.message),
      argv.join(' '),
    );
  }
});

test('the reply, edit and unsend injections parse', () => {
  const db = ['--chat-db', '/tmp/c.db'];
  assert.deepEqual(parseCli(['simulate-reply', ...db, '--from', '+1', '--to-guid', 'G', '--body', 'yes'], {}), {
    kind: 'simulate-reply',
    chatDbPath: '/tmp/c.db',
    from: '+1',
    replyToGuid: 'G',
    body: 'yes',
  });
  assert.deepEqual(parseCli(['simulate-edit', ...db, '--guid', 'G', '--body', 'new'], {}), {
    kind: 'simulate-edit',
    chatDbPath: '/tmp/c.db',
    guid: 'G',
    body: 'new',
  });
  assert.deepEqual(parseCli(['simulate-group', ...db, '--group', 'g', '--from', '+1', '--add', '+2'], {}), {
    kind: 'simulate-group',
    chatDbPath: '/tmp/c.db',
    group: 'g',
    from: '+1',
    change: 'participant_added',
    handle: '+2',
  });
  assert.deepEqual(parseCli(['simulate-unsend', ...db, '--guid', 'G'], {}), {
    kind: 'simulate-unsend',
    chatDbPath: '/tmp/c.db',
    guid: 'G',
  });
});

test('the injection subcommands parse', () => {
  assert.deepEqual(
    parseCli(['simulate-inbound', '--chat-db', '/tmp/c.db', '--from', '+15551234567', '--body', 'hi'], {}),
    {
      kind: 'simulate-inbound',
      chatDbPath: '/tmp/c.db',
      from: '+15551234567',
      body: 'hi',
      attributedBodyOnly: false,
      groupId: undefined,
      attachments: [],
    },
  );
  const attached = parseCli(
    [
      'simulate-inbound',
      '--chat-db',
      '/tmp/c.db',
      '--from',
      '+1',
      '--body',
      'b',
      '--attachment',
      '/tmp/a.png',
      '--attachment',
      'b',
    ],
    {},
  );
  assert.deepEqual(attached.kind === 'simulate-inbound' && attached.attachments, ['/tmp/a.png', resolve('b')]);
  assert.deepEqual(parseCli(['simulate-failures', '--chat-db', '/tmp/c.db', '--count', '3'], {}), {
    kind: 'simulate-failures',
    chatDbPath: '/tmp/c.db',
    count: 3,
    error: undefined,
    neverDeliver: false,
  });
  assert.deepEqual(parseCli(['simulate-failures', '--chat-db', '/tmp/c.db', '--error', '22'], {}), {
    kind: 'simulate-failures',
    chatDbPath: '/tmp/c.db',
    count: 1,
    error: 22,
    neverDeliver: false,
  });
  assert.deepEqual(parseCli(['simulate-failures', '--chat-db', '/tmp/c.db', '--never-deliver', '--count', '2'], {}), {
    kind: 'simulate-failures',
    chatDbPath: '/tmp/c.db',
    count: 2,
    error: undefined,
    neverDeliver: true,
  });
  assert.deepEqual(
    parseCli(
      [
        'simulate-reaction',
        '--chat-db',
        '/tmp/c.db',
        '--from',
        '+1',
        '--target',
        'G',
        '--tapback',
        'emoji',
        '--emoji',
        '🌮',
      ],
      {},
    ),
    {
      kind: 'simulate-reaction',
      chatDbPath: '/tmp/c.db',
      from: '+1',
      targetGuid: 'G',
      tapback: 'emoji',
      emoji: '🌮',
      removed: false,
    },
  );
  assert.deepEqual(parseCli(['simulate-sms-only', '--chat-db', '/tmp/c.db', '--to', '+15551234567', '--off'], {}), {
    kind: 'simulate-sms-only',
    chatDbPath: '/tmp/c.db',
    to: '+15551234567',
    smsOnly: false,
  });
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

test('the registration token can come from RELAYBOX_TOKEN; --token wins when both are given', () => {
  const fromEnv = parseCli(server, { RELAYBOX_TOKEN: 'rtok_env' });
  assert.ok(fromEnv.kind === 'run');
  assert.equal(fromEnv.config.registrationToken, 'rtok_env');
  const both = parseCli([...server, '--token', 'rtok_flag'], { RELAYBOX_TOKEN: 'rtok_env' });
  assert.ok(both.kind === 'run');
  assert.equal(both.config.registrationToken, 'rtok_flag');
  const none = parseCli(server, { RELAYBOX_TOKEN: '' });
  assert.ok(none.kind === 'run');
  assert.equal(none.config.registrationToken, undefined);
});

test('--log-format picks the log format; the summary interval comes from RELAY_SUMMARY_MS', () => {
  const json = parseCli([...server, '--log-format', 'json'], {});
  const pretty = parseCli([...server, '--log-format', 'pretty'], { RELAY_SUMMARY_MS: '0' });
  assert.ok(json.kind === 'run' && pretty.kind === 'run');
  assert.equal(json.config.logFormat, 'json');
  assert.equal(json.config.summaryIntervalMs, 60_000);
  assert.equal(pretty.config.logFormat, 'pretty');
  assert.equal(pretty.config.summaryIntervalMs, 0);
});

test('connect is the default command; --log-handles turns handle masking off', () => {
  const connect = parseCli(['connect', ...server, '--log-handles'], {});
  const bare = parseCli(server, {});
  assert.ok(connect.kind === 'run' && bare.kind === 'run');
  assert.equal(connect.config.serverUrl, bare.config.serverUrl);
  assert.equal(connect.config.logHandles, true);
  assert.equal(bare.config.logHandles, false);
});

test('a stuck Messages app must be noticed before an unmatched send is closed as sent', () => {
  const config = parseCli(server, { RELAY_STUCK_MS: '5000', RELAY_RESTART_INTERVAL_MS: '60000' });
  assert.ok(config.kind === 'run');
  assert.deepEqual([config.config.messagesStuckMs, config.config.messagesRestartIntervalMs], [5_000, 60_000]);
  assert.throws(
    () => parseCli(server, { RELAY_STUCK_MS: '120000' }),
    /^ConfigError: RELAY_STUCK_MS \(120000\) must be below RELAY_MATCH_WINDOW_MS \(120000\)$/,
  );
});

test('--help names only flags and environment variables that exist', () => {
  const values: Record<string, string> = {
    '--server': 'ws://h/api/v1/relays/connect',
    '--token': 't',
    '--name': 'n',
    '--state-dir': '/tmp/s',
    '--chat-db': '/tmp/c.db',
    '--capacity': '5',
    '--poll-ms': '100',
    '--log-format': 'json',
    '--from': '+15551234567',
    '--body': 'b',
    '--group': 'g',
    '--count': '1',
    '--error': '22',
    '--target': 'G',
    '--tapback': 'love',
    '--to': '+1',
    '--lines': '5',
  };
  const flags = new Set([...usage.matchAll(/(?<![\w-])--[a-z][a-z-]*/g)].map((m) => m[0]));
  assert.ok(flags.size >= 15, [...flags].join(' '));
  const contexts = [
    [...server, '--simulate', '--chat-db', '/tmp/c.db'],
    ['simulate-inbound', '--chat-db', '/tmp/c.db', '--from', '+1', '--body', 'b'],
    ['simulate-failures', '--chat-db', '/tmp/c.db', '--count', '1'],
    ['service', 'install'],
    ['service', 'logs'],
    ['doctor'],
    ['simulate-stall', '--chat-db', '/tmp/c.db'],
    ['simulate-sms-only', '--chat-db', '/tmp/c.db', '--to', '+1'],
    ['simulate-reaction', '--chat-db', '/tmp/c.db', '--from', '+1', '--target', 'G', '--tapback', 'emoji'],
    ['simulate-reply', '--chat-db', '/tmp/c.db', '--from', '+1', '--body', 'b'],
    ['simulate-edit', '--chat-db', '/tmp/c.db', '--body', 'b'],
    ['simulate-group', '--chat-db', '/tmp/c.db', '--group', 'g', '--from', '+1'],
  ];
  for (const flag of flags) {
    const args = flag in values ? [flag, values[flag]!] : [flag];
    const accepted = contexts.some((context) => {
      try {
        parseCli([...context, ...args], {});
        return true;
      } catch (err) {
        return !/Unknown option/.test((err as Error).message);
      }
    });
    assert.ok(accepted, `${flag} is named in --help but no command accepts it`);
  }

  const envValues: Record<string, string> = {
    RELAY_MATCH_WINDOW_MS: '300000',
    LOG_LEVEL: 'debug',
    RELAYBOX_TOKEN: 'x',
    RELAY_OSASCRIPT: '/x/osascript',
  };
  const variables = [...new Set([...usage.matchAll(/\b(RELAY[A-Z0-9_]*|LOG_LEVEL)\b/g)].map((m) => m[1]!))];
  assert.ok(variables.length >= 7, variables.join(' '));
  const base = parseCli(server, {});
  for (const name of variables) {
    const withVar = parseCli(server, { [name]: envValues[name] ?? '7' });
    assert.notDeepEqual(withVar, base, `${name} is named in --help but changes nothing`);
  }
});

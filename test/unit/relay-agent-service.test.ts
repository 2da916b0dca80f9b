import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { inNpxCache, parseLaunchctlPrint } from '../../packages/relay-agent/src/launch-agent.ts';

const root = join(import.meta.dirname, '../..');
const bin = join(root, 'packages/relay-agent/bin/relaybox-relay.js');
const home = mkdtempSync(join(tmpdir(), 'relay-service-'));
after(() => rmSync(home, { recursive: true, force: true }));
const uid = process.getuid!();
const server = 'wss://api.example.com/api/v1/relays/connect';

function relay(args: string[]) {
  return spawnSync(process.execPath, [bin, ...args], {
    encoding: 'utf8',
    env: { ...process.env, HOME: home },
    timeout: 30_000,
  });
}

type Plist = string | number | boolean | Plist[] | { [key: string]: Plist };

/** A property list parser for the XML launchd reads: dict, array, key, string, integer, true, false. */
function parsePlist(xml: string): Plist {
  const tokens = [
    ...xml.replace(/<\?xml[^>]*\?>|<!DOCTYPE[^>]*>/g, '').matchAll(/<(\/?)([a-z]+)(?:\s[^>]*?)?(\/?)>|([^<]+)/g),
  ].filter((m) => m[4] === undefined || m[4].trim() !== '');
  let i = 0;
  const unescape = (text: string) => text.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
  const text = (tag: string): string => {
    const value = tokens[i]?.[4] !== undefined ? unescape(tokens[i++]![4]!) : '';
    assert.equal(tokens[i]?.[0], `</${tag}>`);
    i += 1;
    return value;
  };
  const value = (): Plist => {
    const [, close, tag, selfClosing] = tokens[i++]!;
    assert.equal(close, '', 'an opening tag');
    if (selfClosing) {
      assert.ok(tag === 'true' || tag === 'false', `<${tag}/>`);
      return tag === 'true';
    }
    if (tag === 'string') return text(tag);
    if (tag === 'integer') return Number(text(tag));
    if (tag === 'array') {
      const items: Plist[] = [];
      while (tokens[i]![0] !== '</array>') items.push(value());
      i += 1;
      return items;
    }
    if (tag === 'dict') {
      const dict: Record<string, Plist> = {};
      while (tokens[i]![0] !== '</dict>') {
        assert.equal(tokens[i++]![0], '<key>');
        const key = text('key');
        dict[key] = value();
      }
      i += 1;
      return dict;
    }
    assert.equal(tag, 'plist', `unexpected <${tag}>`);
    const inner = value();
    assert.equal(tokens[i++]![0], '</plist>');
    return inner;
  };
  const parsed = value();
  assert.equal(i, tokens.length, 'nothing after </plist>');
  return parsed;
}

/** `--dry-run` output: the property list, then one `$ command` line per step. */
function dryRun(args: string[]): { plist: string; commands: string[] } {
  const run = relay(args);
  assert.equal(run.status, 0, run.stderr);
  const end = run.stdout.indexOf('</plist>\n');
  const plist = end < 0 ? '' : run.stdout.slice(0, end + '</plist>\n'.length);
  const commands = run.stdout.slice(plist.length).split('\n').filter(Boolean);
  for (const line of commands) assert.match(line, /^\$ /);
  return { plist, commands: commands.map((l) => l.slice(2)) };
}

/** A relay registered in `stateDir`, as a first `connect --token` leaves it. */
function register(stateDir: string, serverUrl = server): void {
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(
    join(stateDir, 'relay.json'),
    JSON.stringify({ serverUrl, relayId: 'relay_1', secret: 's', registeredAt: 'x', inboundFloor: 0 }),
  );
}

test('service install --dry-run prints a LaunchAgent that restarts after a crash only, and the launchctl commands; it writes nothing', () => {
  const stateDir = join(home, 'state');
  register(stateDir);
  const { plist, commands } = dryRun([
    'service',
    'install',
    '--server',
    server,
    '--name',
    'Front desk <1>',
    '--state-dir',
    stateDir,
    '--dry-run',
  ]);
  const logs = join(home, 'Library/Logs/Relaybox');
  const plistPath = join(home, 'Library/LaunchAgents/com.relaybox.relay.plist');
  const parsed = parsePlist(plist) as Record<string, Plist>;
  const path = String((parsed.EnvironmentVariables as Record<string, Plist>).PATH);
  assert.deepEqual(parsed, {
    Label: 'com.relaybox.relay',
    ProgramArguments: [
      bin,
      'connect',
      '--server',
      server,
      '--name',
      'Front desk <1>',
      '--state-dir',
      stateDir,
      '--log-format',
      'json',
    ],
    RunAtLoad: true,
    KeepAlive: { SuccessfulExit: false },
    ThrottleInterval: 30,
    ProcessType: 'Background',
    EnvironmentVariables: { PATH: path },
    StandardOutPath: join(logs, 'relay.log'),
    StandardErrorPath: join(logs, 'relay.err.log'),
  });
  // The program is the agent's script, which finds node on this PATH: first where this shell finds it (a
  // link like /opt/homebrew/bin/node), last this Node's resolved folder, which a Homebrew upgrade removes.
  assert.ok(statSync(bin).mode & 0o111, 'the script is executable');
  const pathDirs = path.split(':');
  const shellNode = process.env.PATH!.split(':').find((dir) => dir.startsWith('/') && existsSync(join(dir, 'node')));
  assert.equal(pathDirs[0], shellNode ?? '/opt/homebrew/bin');
  for (const dir of ['/opt/homebrew/bin', '/usr/local/bin', '/usr/bin', '/bin', '/usr/sbin', '/sbin'])
    assert.ok(pathDirs.includes(dir), dir);
  assert.ok(pathDirs.includes(join(process.execPath, '..')), "this Node's folder, as a last resort");
  assert.equal(new Set(pathDirs).size, pathDirs.length, 'each folder once');
  assert.deepEqual(commands, [
    `mkdir -p ${join(home, 'Library/LaunchAgents')}`,
    `mkdir -p ${logs}`,
    `write ${plistPath}`,
    `launchctl bootout gui/${uid}/com.relaybox.relay`,
    `launchctl bootstrap gui/${uid} ${plistPath}`,
  ]);
  assert.deepEqual(readdirSync(home), ['state'], 'a dry run writes nothing');
  rmSync(stateDir, { recursive: true });
});

test('service install --dry-run refuses what the real command refuses: no registered relay, with or without --server', () => {
  for (const args of [[], ['--server', server]]) {
    const refused = relay(['service', 'install', '--state-dir', join(home, 'nothing'), ...args, '--dry-run']);
    assert.equal(refused.status, 1, refused.stdout);
    assert.equal(refused.stdout, '', 'no property list for a service that could not run');
    assert.match(
      refused.stderr,
      /^relay: no relay is registered in .*nothing: run relaybox-relay connect --server \S+ --token TOKEN once first\n$/,
    );
  }
  assert.deepEqual(readdirSync(home), []);
});

test("a service never runs from npx's cache, which npm clears", () => {
  assert.equal(inNpxCache('/Users/ann/.npm/_npx/1f2e/node_modules/relaybox-relay/bin/relaybox-relay.js'), true);
  assert.equal(inNpxCache('/opt/homebrew/lib/node_modules/relaybox-relay/bin/relaybox-relay.js'), false);
});

test('service install takes the server from the stored credential', () => {
  const stateDir = join(home, 'registered');
  register(stateDir, 'wss://stored.example.com/api/v1/relays/connect');
  const { plist } = dryRun([
    'service',
    'install',
    '--state-dir',
    stateDir,
    '--chat-db',
    'chat.db',
    '--log-handles',
    '--dry-run',
  ]);
  const args = (parsePlist(plist) as Record<string, Plist>).ProgramArguments as string[];
  assert.deepEqual(args.slice(1), [
    'connect',
    '--server',
    'wss://stored.example.com/api/v1/relays/connect',
    '--state-dir',
    stateDir,
    '--chat-db',
    join(process.cwd(), 'chat.db'),
    '--log-handles',
    '--log-format',
    'json',
  ]);
  assert.ok(!plist.includes('"s"') && !args.includes('s'), 'the credential secret is not in the property list');
  rmSync(stateDir, { recursive: true });
});

test('service uninstall, status and logs --dry-run print their commands', () => {
  const plistPath = join(home, 'Library/LaunchAgents/com.relaybox.relay.plist');
  const logs = join(home, 'Library/Logs/Relaybox');
  assert.deepEqual(dryRun(['service', 'uninstall', '--dry-run']), {
    plist: '',
    commands: [`launchctl bootout gui/${uid}/com.relaybox.relay`, `rm -f ${plistPath}`],
  });
  assert.deepEqual(dryRun(['service', 'status', '--dry-run']).commands, [
    `launchctl print gui/${uid}/com.relaybox.relay`,
  ]);
  assert.deepEqual(dryRun(['service', 'logs', '--dry-run']).commands, [
    `tail -n 200 ${logs}/relay.log ${logs}/relay.err.log`,
  ]);
  assert.deepEqual(dryRun(['service', 'logs', '--lines', '50', '--follow', '--dry-run']).commands, [
    `tail -n 50 -F ${logs}/relay.log ${logs}/relay.err.log`,
  ]);
});

test(
  'service commands: bad actions are usage errors; without --dry-run off macOS they refuse',
  { skip: process.platform === 'darwin' },
  () => {
    const bad = relay(['service', 'restart']);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /^relay: service needs one of install, uninstall, status, logs, got "restart"/);
    const real = relay(['service', 'status']);
    assert.equal(real.status, 1);
    assert.equal(real.stderr, 'relay: launchd services exist only on macOS; --dry-run prints what would be done\n');
  },
);

test('service status reads launchctl print', () => {
  const printed = [
    'gui/501/com.relaybox.relay = {',
    '\tactive count = 1',
    '\tpath = /Users/ann/Library/LaunchAgents/com.relaybox.relay.plist',
    '\tstate = running',
    '\tprogram = /opt/homebrew/bin/node',
    '\tpid = 4242',
    '\tlast exit code = (never exited)',
    '}',
  ].join('\n');
  assert.deepEqual(parseLaunchctlPrint(0, printed), {
    loaded: true,
    state: 'running',
    pid: 4242,
    lastExitCode: '(never exited)',
  });
  assert.deepEqual(
    parseLaunchctlPrint(113, 'Could not find service "com.relaybox.relay" in domain for user gui: 501'),
    {
      loaded: false,
      state: undefined,
      pid: undefined,
      lastExitCode: undefined,
    },
  );
});

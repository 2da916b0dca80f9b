/**
 * `relaybox-relay doctor --json` against the simulator and a relay server
 * that answers hello: a passing run, an unreadable chat.db, a refused
 * credential and a skewed clock.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { WebSocketServer } from 'ws';
import { simulateInbound } from '../../packages/relay-agent/src/simulated-messages-app.ts';
import type { Check } from '../../packages/relay-agent/src/doctor.ts';

const bin = join(import.meta.dirname, '../../packages/relay-agent/bin/relaybox-relay.js');

/** A relay endpoint that welcomes the credential `relay_doc`/`good`, refuses any other, and dates its HTTP answers `clockOffsetMs` off. */
class DoctorServer {
  frames: Array<Record<string, unknown>> = [];
  clockOffsetMs = 0;
  private constructor(
    private readonly http: Server,
    private readonly wss: WebSocketServer,
  ) {
    http.on('request', (_req, res) => {
      res.setHeader('Date', new Date(Date.now() + this.clockOffsetMs).toUTCString());
      res.writeHead(426).end('upgrade required');
    });
    wss.on('connection', (socket) => {
      socket.on('message', (data) => {
        const frame = JSON.parse(data.toString()) as Record<string, unknown> & {
          credential?: { relayId: string; secret: string };
        };
        this.frames.push(frame);
        if (frame.type !== 'hello') return;
        if (frame.credential?.secret === 'good')
          socket.send(
            JSON.stringify({
              type: 'welcome',
              relayId: frame.credential.relayId,
              inboundCursor: 0,
              heartbeatIntervalMs: 30_000,
            }),
          );
        else socket.send(JSON.stringify({ type: 'error', code: 'unauthorized', message: 'unknown relay credential' }));
      });
    });
  }

  static async start(): Promise<DoctorServer> {
    const http = createServer();
    const wss = new WebSocketServer({ server: http, path: '/api/v1/relays/connect' });
    await new Promise<void>((done) => http.listen(0, '127.0.0.1', done));
    return new DoctorServer(http, wss);
  }

  get url(): string {
    return `ws://127.0.0.1:${(this.http.address() as AddressInfo).port}/api/v1/relays/connect`;
  }

  async close(): Promise<void> {
    for (const client of this.wss.clients) client.terminate();
    this.wss.close();
    await new Promise<void>((done) => this.http.close(() => done()));
  }
}

let dir: string;
let server: DoctorServer;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'relaybox-doctor-'));
  server = await DoctorServer.start();
  await simulateInbound(join(dir, 'chat.db'), { from: '+14155550123', body: 'hello', attributedBodyOnly: false });
});
after(async () => {
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

async function registered(name: string, secret: string): Promise<string> {
  const stateDir = join(dir, name);
  await mkdir(stateDir, { recursive: true });
  await writeFile(
    join(stateDir, 'relay.json'),
    JSON.stringify({
      serverUrl: server.url,
      relayId: 'relay_doc',
      secret,
      registeredAt: new Date().toISOString(),
      inboundFloor: 0,
    }),
  );
  return stateDir;
}

/** `relaybox-relay doctor --json ARGS` as a process: its exit code and output. */
async function doctorRun(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [bin, 'doctor', '--json', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const code = await new Promise<number | null>((done) => child.on('exit', done));
  return { code, stdout, stderr };
}

async function doctor(
  args: string[],
): Promise<{ code: number | null; ok: boolean; checks: Map<Check['name'], Check>; stderr: string }> {
  const { code, stdout, stderr } = await doctorRun(args);
  const report = JSON.parse(stdout) as { ok: boolean; checks: Check[] };
  return { code, ok: report.ok, checks: new Map(report.checks.map((c) => [c.name, c])), stderr };
}

const results = (checks: Map<Check['name'], Check>) =>
  Object.fromEntries([...checks].map(([name, c]) => [name, c.result]));

test('doctor --json passes against the simulator with a registered relay, without taking work', async () => {
  server.frames = [];
  const run = await doctor([
    '--simulate',
    '--chat-db',
    join(dir, 'chat.db'),
    '--state-dir',
    await registered('good', 'good'),
  ]);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.ok, true);
  assert.deepEqual(results(run.checks), {
    'chat-db': 'ok',
    automation: 'ok',
    'imessage-account': 'ok',
    server: 'ok',
    clock: 'ok',
    disk: 'ok',
  });
  assert.equal(
    run.checks.get('imessage-account')!.detail,
    'iMessage account r•••@simulator.invalid',
    'the account is masked',
  );
  assert.match(run.checks.get('server')!.detail, /accepted the credential of relay relay_doc$/);
  assert.deepEqual(
    server.frames.map((f) => f.type),
    ['hello'],
    'a hello and no ready: the server gives no work',
  );
});

test('doctor --json with an unreadable chat.db fails that check with its fix, and exits 1', async () => {
  const stateDir = await registered('good', 'good');
  const garbage = join(dir, 'garbage.db');
  await writeFile(garbage, 'this is not a database, and long enough to have a header of its own.'.repeat(20));
  for (const [chatDb, simulate] of [
    [join(dir, 'missing.db'), true],
    [garbage, false],
  ] as const) {
    const run = await doctor([...(simulate ? ['--simulate'] : []), '--chat-db', chatDb, '--state-dir', stateDir]);
    assert.equal(run.code, 1);
    assert.equal(run.ok, false);
    const check = run.checks.get('chat-db')!;
    assert.equal(check.result, 'fail');
    assert.ok(check.detail.startsWith(`cannot read ${chatDb}: `), check.detail);
    assert.match(check.fix!, simulate ? /simulate-inbound/ : /Full Disk Access/);
    assert.equal(run.checks.get('imessage-account')!.result, 'fail');
    assert.equal(run.checks.get('server')!.result, 'ok');
  }
});

test('doctor --json: a refused credential and a skewed clock fail with their fixes', async () => {
  server.clockOffsetMs = 5 * 60_000;
  try {
    const run = await doctor([
      '--simulate',
      '--chat-db',
      join(dir, 'chat.db'),
      '--state-dir',
      await registered('revoked', 'revoked'),
    ]);
    assert.equal(run.code, 1);
    assert.deepEqual(results(run.checks), {
      'chat-db': 'ok',
      automation: 'ok',
      'imessage-account': 'ok',
      server: 'fail',
      clock: 'fail',
      disk: 'ok',
    });
    assert.match(
      run.checks.get('server')!.detail,
      /refused the stored credential: unauthorized: unknown relay credential$/,
    );
    assert.match(run.checks.get('server')!.fix!, /^register again: delete .*relay\.json/);
    assert.match(run.checks.get('clock')!.detail, /^this Mac's clock is 30\d s behind the server's$/);
  } finally {
    server.clockOffsetMs = 0;
  }
});

test('doctor --simulate without --chat-db reads the simulated chat.db in its state directory', async () => {
  const stateDir = await registered('own-db', 'good');
  await simulateInbound(join(stateDir, 'simulated-chat.db'), {
    from: '+14155550123',
    body: 'hello',
    attributedBodyOnly: false,
  });
  const run = await doctor(['--simulate', '--state-dir', stateDir]);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.checks.get('chat-db')!.detail, `${join(stateDir, 'simulated-chat.db')} is readable (1 messages)`);
});

test('doctor --json answers a refused command line and a failure as JSON on stdout, never the usage text', async () => {
  for (const [args, kind, code, message] of [
    [['--simulate', '--bogus'], 'usage', 2, /^Unknown option '--bogus'/],
    [['--server', 'http://x/api/v1/relays/connect'], 'usage', 2, /^--server must be a ws:\/\/ or wss:\/\/ URL/],
    [['--simulate', '--chat-db', ''], 'usage', 2, /^--chat-db is empty$/],
  ] as const) {
    const { code: exit, stdout, stderr } = await doctorRun(args);
    assert.equal(exit, code, args.join(' '));
    assert.equal(stderr, '', args.join(' '));
    const answer = JSON.parse(stdout) as { ok: boolean; error: { kind: string; message: string } };
    assert.equal(answer.ok, false);
    assert.equal(answer.error.kind, kind);
    assert.match(answer.error.message, message);
  }
});

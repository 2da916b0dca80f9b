import { execFile } from 'node:child_process';
import { statfs } from 'node:fs/promises';
import { dirname } from 'node:path';
import { serverFrame, type HelloFrame } from 'relaybox-relay-protocol/frames.ts';
import { parseFrame } from 'relaybox-relay-protocol/frame-parser.ts';
import WebSocket from 'ws';
import { agentVersion } from './agent-config.ts';
import { ChatDbReader } from './chat-db-reader.ts';
import { maskHandles } from './handle-mask.ts';
import { RelayStateStore, type RelayState } from './relay-state.ts';
import { ChatDbError } from './sqlite-file.ts';

/**
 * `relaybox-relay doctor`: the checks where a relay setup fails, each with its
 * result and, when it fails, the fix. `warn` does not fail the run.
 */
export type CheckResult = 'ok' | 'warn' | 'fail';

export interface Check {
  name: 'chat-db' | 'automation' | 'imessage-account' | 'server' | 'clock' | 'disk';
  result: CheckResult;
  detail: string;
  fix?: string;
}

export interface DoctorOptions {
  chatDbPath: string;
  stateDir: string;
  /** From --server, else the stored credential's. */
  serverUrl: string | undefined;
  simulate: boolean;
  name: string;
  osascriptPath: string;
  systemInfo: HelloFrame['systemInfo'];
  logHandles: boolean;
}

/** Limits of the checks, with their reasons. */
export const doctorLimits = {
  /** Beyond this the server's token and signature times, and the agent's status times, are visibly wrong. */
  maxClockSkewMs: 30_000,
  /** The send journal and attachment downloads live in the state directory. */
  minFreeDiskBytes: 200 * 1024 * 1024,
  handshakeTimeoutMs: 10_000,
  probeTimeoutMs: 15_000,
};

const fullDiskAccessFix =
  'give Full Disk Access to the app that runs the agent (System Settings → Privacy & Security → Full Disk Access): ' +
  `your terminal app, or for the service the Node binary ${process.execPath}; then restart it`;

export async function runDoctor(options: DoctorOptions): Promise<Check[]> {
  const mask = (text: string) => (options.logHandles ? text : maskHandles(text));
  let state: RelayState | undefined;
  let stateError: string | undefined;
  try {
    state = await new RelayStateStore(options.stateDir).load();
  } catch (err) {
    stateError = (err as Error).message;
  }
  const [chatDb, account] = await checkChatDb(options, mask);
  const server = await checkServer(options, state, stateError);
  return [
    chatDb,
    await checkAutomation(options),
    account,
    server,
    await checkClock(options.serverUrl ?? state?.serverUrl),
    await checkDisk(options.stateDir),
  ];
}

async function checkChatDb(options: DoctorOptions, mask: (text: string) => string): Promise<[Check, Check]> {
  const reader = new ChatDbReader(options.chatDbPath);
  try {
    const rows = await reader.maxRowId();
    const chatDb: Check = {
      name: 'chat-db',
      result: 'ok',
      detail: `${options.chatDbPath} is readable (${rows} messages)`,
    };
    const handle = await reader.iMessageAccount();
    const account: Check = handle
      ? { name: 'imessage-account', result: 'ok', detail: `iMessage account ${mask(handle)}` }
      : {
          name: 'imessage-account',
          result: 'warn',
          detail: 'chat.db has no iMessage message yet, so the account is not known',
          fix: 'open Messages, sign in to iMessage (Messages → Settings → iMessage) and send or receive one message',
        };
    return [chatDb, account];
  } catch (err) {
    const denied = err instanceof ChatDbError && err.accessDenied;
    const chatDb: Check = {
      name: 'chat-db',
      result: 'fail',
      detail: `cannot read ${options.chatDbPath}: ${(err as Error).message}`,
      fix: options.simulate
        ? 'create the simulator database: relaybox-relay simulate-inbound --from HANDLE --body TEXT (with the same --state-dir or --chat-db), or run connect --simulate once'
        : denied
          ? fullDiskAccessFix
          : `check --chat-db; if the path is right, ${fullDiskAccessFix}`,
    };
    return [
      chatDb,
      { name: 'imessage-account', result: 'fail', detail: 'unknown: chat.db cannot be read', fix: 'fix chat-db first' },
    ];
  } finally {
    await reader.close();
  }
}

/** The Automation permission: a harmless AppleScript that asks Messages for its name. */
async function checkAutomation(options: DoctorOptions): Promise<Check> {
  if (options.simulate) return { name: 'automation', result: 'ok', detail: 'the simulated Messages app takes sends' };
  if (process.platform !== 'darwin') {
    return {
      name: 'automation',
      result: 'fail',
      detail: 'the Messages app exists only on macOS',
      fix: 'on this machine run with --simulate',
    };
  }
  const probe = await new Promise<{ ok: boolean; output: string }>((done) => {
    execFile(
      options.osascriptPath,
      ['-e', 'tell application "Messages" to get name'],
      { timeout: doctorLimits.probeTimeoutMs },
      (err, stdout, stderr) => {
        done({ ok: !err, output: `${stdout}${stderr}`.trim() || (err?.message ?? '') });
      },
    );
  });
  if (probe.ok) return { name: 'automation', result: 'ok', detail: 'Messages answers AppleScript' };
  const denied = /-1743|not authori[sz]ed|not allowed/i.test(probe.output);
  return {
    name: 'automation',
    result: 'fail',
    detail: `Messages did not answer AppleScript: ${probe.output}`,
    fix: denied
      ? 'allow the app that runs the agent to control Messages: System Settings → Privacy & Security → Automation (for the service: node)'
      : 'open Messages once and check that it starts',
  };
}

/** A hello with the stored credential and no `ready`: the server says welcome and gives no work. */
async function checkServer(
  options: DoctorOptions,
  state: RelayState | undefined,
  stateError: string | undefined,
): Promise<Check> {
  const url = options.serverUrl ?? state?.serverUrl;
  if (stateError)
    return {
      name: 'server',
      result: 'fail',
      detail: stateError,
      fix: 'register again: relaybox-relay connect --server URL --token TOKEN',
    };
  if (!state || !url) {
    return {
      name: 'server',
      result: 'fail',
      detail: `no relay is registered in ${options.stateDir}`,
      fix: 'register: relaybox-relay connect --server URL --token TOKEN',
    };
  }
  const hello: HelloFrame = {
    type: 'hello',
    credential: { relayId: state.relayId, secret: state.secret },
    name: options.name,
    systemInfo: options.systemInfo,
    agentVersion,
  };
  const answer = await new Promise<{ welcome?: string; error?: string; unreachable?: string }>((done) => {
    const socket = new WebSocket(url, { handshakeTimeout: doctorLimits.handshakeTimeoutMs, perMessageDeflate: false });
    const timer = setTimeout(
      () => finish({ unreachable: `no answer to hello within ${doctorLimits.handshakeTimeoutMs} ms` }),
      doctorLimits.handshakeTimeoutMs,
    );
    function finish(result: { welcome?: string; error?: string; unreachable?: string }): void {
      clearTimeout(timer);
      socket.removeAllListeners();
      socket.on('error', () => {});
      socket.close(1000, 'doctor');
      done(result);
    }
    socket.on('open', () => socket.send(JSON.stringify(hello)));
    socket.on('unexpected-response', (_req, res) => finish({ error: `HTTP ${res.statusCode}` }));
    socket.on('error', (err) => finish({ unreachable: err.message }));
    socket.on('close', (code, reason) => finish({ error: `closed ${code} ${reason.toString()}`.trim() }));
    socket.on('message', (data) => {
      const parsed = parseFrame(data.toString(), serverFrame);
      if (!parsed.ok) return finish({ error: `invalid frame: ${parsed.error}` });
      if (parsed.frame.type === 'welcome') return finish({ welcome: parsed.frame.relayId });
      if (parsed.frame.type === 'error') return finish({ error: `${parsed.frame.code}: ${parsed.frame.message}` });
    });
  });
  if (answer.welcome)
    return { name: 'server', result: 'ok', detail: `${url} accepted the credential of relay ${answer.welcome}` };
  if (answer.unreachable) {
    return {
      name: 'server',
      result: 'fail',
      detail: `cannot reach ${url}: ${answer.unreachable}`,
      fix: 'check the --server URL, the network and any proxy or firewall',
    };
  }
  return {
    name: 'server',
    result: 'fail',
    detail: `${url} refused the stored credential: ${answer.error}`,
    fix: `register again: delete ${options.stateDir}/relay.json and run relaybox-relay connect --token TOKEN with a new registration token`,
  };
}

/** The server's clock from its HTTP `Date` header (one-second resolution), against the midpoint of the request. */
async function checkClock(serverUrl: string | undefined): Promise<Check> {
  if (!serverUrl)
    return {
      name: 'clock',
      result: 'fail',
      detail: 'no server to compare with',
      fix: 'give --server or register first',
    };
  const url = new URL(serverUrl);
  url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
  const before = Date.now();
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(doctorLimits.handshakeTimeoutMs) });
    await res.body?.cancel();
    const date = res.headers.get('date');
    if (!date) return { name: 'clock', result: 'warn', detail: 'the server sent no Date header' };
    const skewMs = Date.parse(date) + 500 - (before + Date.now()) / 2;
    const detail = `this Mac's clock is ${Math.abs(Math.round(skewMs / 1000))} s ${skewMs > 0 ? 'behind' : 'ahead of'} the server's`;
    if (Math.abs(skewMs) <= doctorLimits.maxClockSkewMs) return { name: 'clock', result: 'ok', detail };
    return {
      name: 'clock',
      result: 'fail',
      detail,
      fix: 'turn on System Settings → General → Date & Time → Set time and date automatically',
    };
  } catch (err) {
    return {
      name: 'clock',
      result: 'fail',
      detail: `cannot reach ${url.origin}: ${(err as Error).message}`,
      fix: 'check the --server URL and the network',
    };
  }
}

async function checkDisk(stateDir: string): Promise<Check> {
  // The state directory may not exist yet: its nearest existing parent is on the same disk.
  for (let dir = stateDir; ; dir = dirname(dir)) {
    try {
      const fs = await statfs(dir);
      const free = fs.bavail * fs.bsize;
      const detail = `${Math.floor(free / 1024 / 1024)} MB free for the send journal in ${stateDir}`;
      if (free >= doctorLimits.minFreeDiskBytes) return { name: 'disk', result: 'ok', detail };
      return {
        name: 'disk',
        result: 'fail',
        detail,
        fix: `free at least ${doctorLimits.minFreeDiskBytes / 1024 / 1024} MB on that disk`,
      };
    } catch (err) {
      if (dirname(dir) === dir)
        return { name: 'disk', result: 'fail', detail: (err as Error).message, fix: 'check --state-dir' };
    }
  }
}

/** The human report: one line per check, the fix under a failed one. */
export function formatChecks(checks: Check[]): string {
  const mark = { ok: '✓', warn: '!', fail: '✗' } as const;
  return checks
    .map((c) => `${mark[c.result]} ${c.name}: ${c.detail}${c.fix && c.result !== 'ok' ? `\n    fix: ${c.fix}` : ''}\n`)
    .join('');
}

export const doctorPassed = (checks: Check[]) => checks.every((c) => c.result !== 'fail');

import { resolve } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import {
  buildAgentConfig,
  defaultChatDbPath,
  defaultStateDir,
  logFormats,
  simulatedChatDbPath,
  type AgentConfig,
  type LogFormat,
} from './agent-config.ts';
import { tapbacks, type GroupChange, type ReactionInjection, type Tapback } from './simulated-messages-app.ts';

/** A mistake on the command line: printed with the usage, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

export type CliCommand =
  | { kind: 'help' }
  | { kind: 'run'; config: AgentConfig }
  | {
      kind: 'service';
      action: 'install';
      dryRun: boolean;
      serverUrl: string | undefined;
      stateDir: string;
      connectArgs: string[];
    }
  | { kind: 'service'; action: 'uninstall' | 'status'; dryRun: boolean }
  | { kind: 'service'; action: 'logs'; dryRun: boolean; lines: number; follow: boolean }
  | {
      kind: 'doctor';
      json: boolean;
      serverUrl: string | undefined;
      stateDir: string;
      chatDbPath: string;
      simulate: boolean;
      logHandles: boolean;
    }
  | {
      kind: 'simulate-inbound';
      chatDbPath: string;
      from: string;
      body: string;
      attributedBodyOnly: boolean;
      groupId: string | undefined;
      /** Files recorded as the message's attachments (absolute paths). */
      attachments: string[];
    }
  | { kind: 'simulate-failures'; chatDbPath: string; count: number; error: number | undefined; neverDeliver: boolean }
  | { kind: 'simulate-sms-only'; chatDbPath: string; to: string; smsOnly: boolean }
  | { kind: 'simulate-no-imessage'; chatDbPath: string; to: string; noImessage: boolean }
  | ({ kind: 'simulate-reaction'; chatDbPath: string } & ReactionInjection)
  | { kind: 'simulate-reply'; chatDbPath: string; from: string; replyToGuid: string; body: string }
  | { kind: 'simulate-edit'; chatDbPath: string; guid: string; body: string }
  | { kind: 'simulate-unsend'; chatDbPath: string; guid: string }
  | ({ kind: 'simulate-group'; chatDbPath: string; group: string; from: string } & GroupChange)
  | { kind: 'simulate-stall'; chatDbPath: string; stalled: boolean };

const runOptions = {
  server: { type: 'string' },
  token: { type: 'string' },
  name: { type: 'string' },
  'state-dir': { type: 'string' },
  'chat-db': { type: 'string' },
  simulate: { type: 'boolean' },
  capacity: { type: 'string' },
  'poll-ms': { type: 'string' },
  'sync-history': { type: 'boolean' },
  'log-format': { type: 'string' },
  'log-handles': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const inboundOptions = {
  'chat-db': { type: 'string' },
  'state-dir': { type: 'string' },
  from: { type: 'string' },
  body: { type: 'string' },
  'attributed-only': { type: 'boolean' },
  group: { type: 'string' },
  attachment: { type: 'string', multiple: true },
} as const;

const installOptions = {
  server: { type: 'string' },
  name: { type: 'string' },
  'state-dir': { type: 'string' },
  'chat-db': { type: 'string' },
  'log-handles': { type: 'boolean' },
  'dry-run': { type: 'boolean' },
} as const;

const logsOptions = { lines: { type: 'string' }, follow: { type: 'boolean' }, 'dry-run': { type: 'boolean' } } as const;

const doctorOptions = {
  json: { type: 'boolean' },
  server: { type: 'string' },
  'state-dir': { type: 'string' },
  'chat-db': { type: 'string' },
  simulate: { type: 'boolean' },
  'log-handles': { type: 'boolean' },
} as const;

const serviceActions = ['install', 'uninstall', 'status', 'logs'] as const;

/** Where a simulator command writes: --chat-db, or the simulated chat.db in --state-dir. */
const simulatorFileOptions = {
  'chat-db': { type: 'string' },
  'state-dir': { type: 'string' },
} as const;

const failureOptions = {
  'chat-db': { type: 'string' },
  'state-dir': { type: 'string' },
  count: { type: 'string' },
  error: { type: 'string' },
  'never-deliver': { type: 'boolean' },
} as const;

export function parseCli(argv: string[], env: Record<string, string | undefined> = process.env): CliCommand {
  const [first, ...rest] = argv;
  if (first === 'simulate-inbound') {
    const { values } = parse(rest, inboundOptions);
    return {
      kind: 'simulate-inbound',
      chatDbPath: simulatorDb(values['chat-db'], values['state-dir']),
      from: required(values.from, '--from'),
      body: values.body ?? requiredMissing('--body'),
      attributedBodyOnly: values['attributed-only'] ?? false,
      groupId: values.group,
      attachments: (values.attachment ?? []).map((path) => resolve(path)),
    };
  }
  if (first === 'simulate-stall') {
    const { values } = parse(rest, {
      'chat-db': { type: 'string' },
      'state-dir': { type: 'string' },
      off: { type: 'boolean' },
    } as const);
    return {
      kind: 'simulate-stall',
      chatDbPath: simulatorDb(values['chat-db'], values['state-dir']),
      stalled: !values.off,
    };
  }
  if (first === 'simulate-failures') {
    const { values } = parse(rest, failureOptions);
    const error = integer(values.error, '--error', -2_147_483_648, 2_147_483_647);
    if (error === 0) throw new UsageError('--error must not be 0: 0 is no error');
    const neverDeliver = values['never-deliver'] ?? false;
    if (error !== undefined && neverDeliver) throw new UsageError('give --error or --never-deliver, not both');
    return {
      kind: 'simulate-failures',
      chatDbPath: simulatorDb(values['chat-db'], values['state-dir']),
      count: integer(values.count, '--count', 0, 1_000_000) ?? 1,
      error,
      neverDeliver,
    };
  }
  if (first === 'simulate-reaction') {
    const { values } = parse(rest, {
      ...simulatorFileOptions,
      from: { type: 'string' },
      target: { type: 'string' },
      tapback: { type: 'string' },
      emoji: { type: 'string' },
      removed: { type: 'boolean' },
    } as const);
    const tapback = required(values.tapback, '--tapback');
    if (!(tapbacks as readonly string[]).includes(tapback))
      throw new UsageError(`--tapback must be one of ${tapbacks.join(', ')}, got "${tapback}"`);
    if ((tapback === 'emoji') !== (values.emoji !== undefined))
      throw new UsageError('--emoji goes with --tapback emoji, and only with it');
    return {
      kind: 'simulate-reaction',
      chatDbPath: simulatorDb(values['chat-db'], values['state-dir']),
      from: required(values.from, '--from'),
      targetGuid: required(values.target, '--target'),
      tapback: tapback as Tapback,
      ...(values.emoji !== undefined ? { emoji: values.emoji } : {}),
      removed: values.removed ?? false,
    };
  }
  if (first === 'simulate-reply') {
    const { values } = parse(rest, {
      ...simulatorFileOptions,
      from: { type: 'string' },
      'to-guid': { type: 'string' },
      body: { type: 'string' },
    } as const);
    return {
      kind: 'simulate-reply',
      chatDbPath: simulatorDb(values['chat-db'], values['state-dir']),
      from: required(values.from, '--from'),
      replyToGuid: required(values['to-guid'], '--to-guid'),
      body: values.body ?? requiredMissing('--body'),
    };
  }
  if (first === 'simulate-group') {
    const { values } = parse(rest, {
      ...simulatorFileOptions,
      group: { type: 'string' },
      from: { type: 'string' },
      rename: { type: 'string' },
      add: { type: 'string' },
      remove: { type: 'string' },
      leave: { type: 'boolean' },
    } as const);
    const given = [values.rename, values.add, values.remove, values.leave].filter((v) => v !== undefined);
    if (given.length !== 1) throw new UsageError('give one of --rename, --add, --remove or --leave');
    const change: GroupChange =
      values.rename !== undefined
        ? { change: 'renamed', name: values.rename }
        : values.add !== undefined
          ? { change: 'participant_added', handle: values.add }
          : values.remove !== undefined
            ? { change: 'participant_removed', handle: values.remove }
            : { change: 'participant_left' };
    return {
      kind: 'simulate-group',
      chatDbPath: simulatorDb(values['chat-db'], values['state-dir']),
      group: required(values.group, '--group'),
      from: required(values.from, '--from'),
      ...change,
    };
  }
  if (first === 'simulate-edit' || first === 'simulate-unsend') {
    const { values } = parse(rest, {
      ...simulatorFileOptions,
      guid: { type: 'string' },
      ...(first === 'simulate-edit' ? { body: { type: 'string' } } : {}),
    } as const);
    const chatDbPath = simulatorDb(values['chat-db'], values['state-dir']);
    const guid = required(values.guid, '--guid');
    if (first === 'simulate-unsend') return { kind: 'simulate-unsend', chatDbPath, guid };
    const body = (values as { body?: string }).body;
    return { kind: 'simulate-edit', chatDbPath, guid, body: body ?? requiredMissing('--body') };
  }
  if (first === 'simulate-sms-only' || first === 'simulate-no-imessage') {
    const { values } = parse(rest, {
      ...simulatorFileOptions,
      to: { type: 'string' },
      off: { type: 'boolean' },
    } as const);
    const target = { chatDbPath: simulatorDb(values['chat-db'], values['state-dir']), to: required(values.to, '--to') };
    return first === 'simulate-sms-only'
      ? { kind: first, ...target, smsOnly: !values.off }
      : { kind: first, ...target, noImessage: !values.off };
  }
  if (first === 'service') return parseService(rest);
  if (first === 'doctor') {
    const { values } = parse(rest, doctorOptions);
    const simulate = values.simulate ?? false;
    const stateDir = values['state-dir'] ?? defaultStateDir;
    return {
      kind: 'doctor',
      json: values.json ?? false,
      serverUrl: values.server === undefined ? undefined : serverUrl(values.server).href,
      stateDir,
      chatDbPath: simulate ? simulatorDb(values['chat-db'], stateDir) : (values['chat-db'] ?? defaultChatDbPath),
      simulate,
      logHandles: values['log-handles'] ?? false,
    };
  }
  const { values } = parse(first === 'connect' ? rest : argv, runOptions);
  if (values.help) return { kind: 'help' };
  const url = serverUrl(required(values.server, '--server'));
  if (values.token !== undefined && values.token.trim() === '') throw new UsageError('--token is empty');
  const logFormat = values['log-format'];
  if (logFormat !== undefined && !logFormats.includes(logFormat as LogFormat))
    throw new UsageError(`--log-format must be one of ${logFormats.join(', ')}, got "${logFormat}"`);
  checkName(values.name);
  const chatDbPath = values.simulate ? simulatorDb(values['chat-db'], values['state-dir']) : values['chat-db'];
  return {
    kind: 'run',
    config: buildAgentConfig(
      {
        serverUrl: url.href,
        registrationToken: values.token,
        name: values.name,
        stateDir: values['state-dir'],
        chatDbPath,
        simulate: values.simulate,
        capacity: integer(values.capacity, '--capacity', 1, 1000),
        pollMs: integer(values['poll-ms'], '--poll-ms', 50, 60_000),
        syncHistory: values['sync-history'],
        logFormat: logFormat as LogFormat | undefined,
        logHandles: values['log-handles'],
      },
      env,
    ),
  };
}

function parseService(argv: string[]): CliCommand {
  const [action, ...rest] = argv;
  if (!serviceActions.includes(action as (typeof serviceActions)[number])) {
    throw new UsageError(`service needs one of ${serviceActions.join(', ')}${action ? `, got "${action}"` : ''}`);
  }
  if (action === 'logs') {
    const { values } = parse(rest, logsOptions);
    return {
      kind: 'service',
      action,
      dryRun: values['dry-run'] ?? false,
      lines: integer(values.lines, '--lines', 1, 100_000) ?? 200,
      follow: values.follow ?? false,
    };
  }
  if (action !== 'install') {
    const { values } = parse(rest, { 'dry-run': { type: 'boolean' } } as const);
    return { kind: 'service', action: action as 'uninstall' | 'status', dryRun: values['dry-run'] ?? false };
  }
  const { values } = parse(rest, installOptions);
  checkName(values.name);
  const url = values.server === undefined ? undefined : serverUrl(values.server).href;
  // The service starts elsewhere than this shell: every path in its arguments is absolute.
  const stateDir = resolve(values['state-dir'] ?? defaultStateDir);
  const connectArgs = [
    ...(values.name !== undefined ? ['--name', values.name] : []),
    '--state-dir',
    stateDir,
    ...(values['chat-db'] !== undefined ? ['--chat-db', resolve(values['chat-db'])] : []),
    ...(values['log-handles'] ? ['--log-handles'] : []),
    '--log-format',
    'json',
  ];
  return { kind: 'service', action, dryRun: values['dry-run'] ?? false, serverUrl: url, stateDir, connectArgs };
}

function serverUrl(value: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`--server is not a URL: ${value}`);
  }
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:')
    throw new UsageError(`--server must be a ws:// or wss:// URL, got ${url.protocol}//`);
  return url;
}

function checkName(name: string | undefined): void {
  if (name !== undefined && (name.trim() === '' || name.length > 200))
    throw new UsageError('--name must be 1..200 characters');
}

function parse<O extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: O) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false });
  } catch (err) {
    // parseArgs' messages name the flag ("Unknown option '--x'"); keep them, drop the error code.
    throw new UsageError((err as Error).message.replace(/\. To specify a positional argument.*$/s, ''));
  }
}

/**
 * The simulator writes to its file, so it must not be the real Messages database; unnamed, it is
 * the state directory's own, so `connect --simulate` and the simulate-* commands meet on one file.
 */
function simulatorDb(value: string | undefined, stateDir = defaultStateDir): string {
  if (value === '') throw new UsageError('--chat-db is empty');
  const path = value ?? simulatedChatDbPath(stateDir);
  if (resolve(path) === defaultChatDbPath)
    throw new UsageError(`the simulator must not write to the real Messages database ${defaultChatDbPath}`);
  return path;
}

function required(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') return requiredMissing(flag);
  return value;
}

function requiredMissing(flag: string): never {
  throw new UsageError(`${flag} is required`);
}

function integer(raw: string | undefined, flag: string, min: number, max: number): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isSafeInteger(n) || n < min || n > max)
    throw new UsageError(`${flag} must be an integer from ${min} to ${max}, got "${raw}"`);
  return n;
}

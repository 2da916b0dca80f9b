import { homedir, hostname } from 'node:os';
import { join } from 'node:path';

/** Every default of the relay agent, in one place, units in the names. */
export interface AgentConfig {
  /** ws(s)://host/api/v1/relays/connect */
  serverUrl: string;
  /** Single-use registration token; only needed until a credential is stored. */
  registrationToken: string | undefined;
  name: string;
  stateDir: string;
  chatDbPath: string;
  simulate: boolean;
  /** Sends the agent accepts in flight (`ready.capacity`). */
  capacity: number;
  /** How often chat.db is read for new rows and status changes. */
  pollMs: number;
  /**
   * On first registration, forward the whole chat.db history as inbound rows.
   * Off by default: the agent starts at the newest row, so years of old
   * messages do not arrive as new ones (and trigger automations).
   */
  syncHistory: boolean;
  logLevel: string;
  /** `pretty`: one human-readable line per event; `json`: pino's JSON lines. */
  logFormat: LogFormat;
  /** Log phone numbers and email handles in full (`--log-handles`, for a support session); masked by default. */
  logHandles: boolean;
  /** How often the one-line summary is logged; 0: never (RELAY_SUMMARY_MS). */
  summaryIntervalMs: number;
  osascriptPath: string;
  reconnectBaseMs: number;
  reconnectCapMs: number;
  /** A connection open this long resets the reconnect backoff. */
  reconnectStableMs: number;
  /** How long after handing a message to Messages its chat.db row may take to appear. */
  matchWindowMs: number;
  /** A send handed to Messages with no chat.db row after this long marks the relay degraded (RELAY_STUCK_MS); below matchWindowMs. */
  messagesStuckMs: number;
  /** A stuck Messages app is restarted at most once per this interval (RELAY_RESTART_INTERVAL_MS). */
  messagesRestartIntervalMs: number;
  /** How long a sent row is watched for delivered/read before the agent stops looking. */
  trackStatusMs: number;
  /** Inbound rows read per poll. */
  inboundBatch: number;
  /** Inbound rows sent but not acked after which the agent waits for acks. */
  maxUnackedInbound: number;
  /** osascript runs longer than this are killed and the send fails. */
  sendTimeoutMs: number;
  attachmentsDir: string;
  /** Messages reads a file after `send` returns, so downloads are kept this long. */
  attachmentCleanupDelayMs: number;
  /** Simulator: delay before an outgoing row is marked delivered (RELAY_SIM_DELIVERY_MS). */
  simulatorDeliveryMs: number;
  /** Simulator: delay after delivery before read; unset means never (RELAY_SIM_READ_MS). */
  simulatorReadMs: number | undefined;
  /** Sends remembered for dedupe after they finish. */
  journalRetentionMs: number;
}

export const agentVersion = '0.4.0';

export type LogFormat = 'pretty' | 'json';
export const logFormats: readonly LogFormat[] = ['pretty', 'json'];

export const defaultChatDbPath = join(homedir(), 'Library', 'Messages', 'chat.db');
export const defaultStateDir = join(homedir(), '.relaybox-relay');
/** Where `--simulate` keeps its Messages database when no --chat-db is given. */
export const simulatedChatDbPath = (stateDir: string) => join(stateDir, 'simulated-chat.db');

type Env = Record<string, string | undefined>;

function envInt(env: Env, name: string, fallback: number): number;
function envInt(env: Env, name: string, fallback: undefined): number | undefined;
function envInt(env: Env, name: string, fallback: number | undefined): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) throw new ConfigError(`${name} must be a non-negative integer, got "${raw}"`);
  return n;
}

/** The longest delay a Node.js timer keeps: past it `setTimeout` and `setInterval` fire at once. */
const longestTimerMs = 2 ** 31 - 1;

/** A delay that becomes a timer: refused past `longestTimerMs` rather than firing at once. */
function envTimerMs(env: Env, name: string, fallback: number): number;
function envTimerMs(env: Env, name: string, fallback: undefined): number | undefined;
function envTimerMs(env: Env, name: string, fallback: number | undefined): number | undefined {
  const n = envInt(env, name, fallback as number);
  if (n !== undefined && n > longestTimerMs)
    throw new ConfigError(
      `${name} must be at most ${longestTimerMs} ms (about 24.8 days, the longest timer), got "${env[name]}"`,
    );
  return n;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export interface AgentFlags {
  serverUrl: string;
  registrationToken?: string | undefined;
  name?: string | undefined;
  stateDir?: string | undefined;
  chatDbPath?: string | undefined;
  simulate?: boolean | undefined;
  capacity?: number | undefined;
  pollMs?: number | undefined;
  syncHistory?: boolean | undefined;
  logFormat?: LogFormat | undefined;
  logHandles?: boolean | undefined;
}

export function buildAgentConfig(flags: AgentFlags, env: Env = process.env): AgentConfig {
  const config = agentConfig(flags, env);
  // Past the match window an unmatched send is closed as sent, so a stuck Messages app must be noticed before it.
  if (config.messagesStuckMs >= config.matchWindowMs) {
    throw new ConfigError(
      `RELAY_STUCK_MS (${config.messagesStuckMs}) must be below RELAY_MATCH_WINDOW_MS (${config.matchWindowMs})`,
    );
  }
  return config;
}

function agentConfig(flags: AgentFlags, env: Env): AgentConfig {
  const stateDir = flags.stateDir ?? defaultStateDir;
  const simulate = flags.simulate ?? false;
  return {
    serverUrl: flags.serverUrl,
    // From the environment, the token stays out of `ps` and the shell history.
    registrationToken: flags.registrationToken ?? (env.RELAYBOX_TOKEN || undefined),
    name: flags.name ?? hostname(),
    stateDir,
    chatDbPath: flags.chatDbPath ?? defaultChatDbPath,
    simulate,
    capacity: flags.capacity ?? 10,
    pollMs: flags.pollMs ?? 1_000,
    syncHistory: flags.syncHistory ?? false,
    logLevel: env.LOG_LEVEL || 'info',
    // A person at a terminal reads lines; a service manager or log shipper gets JSON.
    logFormat: flags.logFormat ?? (process.stdout.isTTY ? 'pretty' : 'json'),
    logHandles: flags.logHandles ?? false,
    summaryIntervalMs: envTimerMs(env, 'RELAY_SUMMARY_MS', 60_000),
    osascriptPath: env.RELAY_OSASCRIPT || '/usr/bin/osascript',
    reconnectBaseMs: 500,
    reconnectCapMs: 30_000,
    reconnectStableMs: 10_000,
    matchWindowMs: envInt(env, 'RELAY_MATCH_WINDOW_MS', 120_000),
    messagesStuckMs: envInt(env, 'RELAY_STUCK_MS', 60_000),
    messagesRestartIntervalMs: envTimerMs(env, 'RELAY_RESTART_INTERVAL_MS', 10 * 60_000),
    trackStatusMs: 24 * 60 * 60 * 1000,
    inboundBatch: 100,
    maxUnackedInbound: 500,
    sendTimeoutMs: 60_000,
    attachmentsDir: join(stateDir, 'attachments'),
    attachmentCleanupDelayMs: simulate ? 0 : 60_000,
    simulatorDeliveryMs: envTimerMs(env, 'RELAY_SIM_DELIVERY_MS', 500),
    simulatorReadMs: envTimerMs(env, 'RELAY_SIM_READ_MS', undefined),
    journalRetentionMs: 7 * 24 * 60 * 60 * 1000,
  };
}

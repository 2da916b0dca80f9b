import { build as prettyStream } from 'pino-pretty';
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { maskFields, maskHandles } from './handle-mask.ts';
import type { LogFormat } from './agent-config.ts';

export type { Logger };

/** Secrets and message bodies never reach a log line, wherever they appear in a logged object. */
const redactPaths = [
  'token',
  '*.token',
  'registrationToken',
  '*.registrationToken',
  'secret',
  '*.secret',
  'credential',
  '*.credential',
  'body',
  '*.body',
];

export interface AgentLogOptions {
  /** Log phone numbers and email handles in full (`--log-handles`); masked otherwise. */
  logHandles?: boolean;
}

function createLogger(level: string, destination: DestinationStream, options: AgentLogOptions): Logger {
  const masking: LoggerOptions = options.logHandles
    ? {}
    : {
        formatters: { log: (fields) => maskFields(fields) as Record<string, unknown> },
        hooks: {
          logMethod(args, method) {
            method.apply(
              this,
              args.map((arg) => (typeof arg === 'string' ? maskHandles(arg) : arg)) as Parameters<typeof method>,
            );
          },
        },
      };
  return pino(
    { name: 'relay-agent', level, redact: { paths: redactPaths, censor: '[redacted]' }, ...masking },
    destination,
  );
}

/** Fields every pino line has; the human format shows them as the time and level prefix, or not at all. */
const baseFields = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg']);

/**
 * The agent's logger. `json` is pino's JSON lines (for a service manager or a
 * log shipper); `pretty` is one line per event for a person at a terminal:
 * time, level and the sentence, then any detail fields as key=value. Operator
 * events (lines with an `event` field) already say everything in their
 * sentence, so their fields are shown only in JSON.
 */
export function createAgentLogger(
  level: string,
  format: LogFormat,
  destination: NodeJS.WritableStream = process.stdout,
  options: AgentLogOptions = {},
): Logger {
  if (format === 'json') return createLogger(level, destination as DestinationStream, options);
  const colorize = (destination as { isTTY?: boolean }).isTTY === true;
  const pretty = prettyStream({
    destination,
    sync: true,
    colorize,
    translateTime: 'SYS:HH:MM:ss',
    ignore: 'pid,hostname,name',
    hideObject: true,
    messageFormat: (log, messageKey) => {
      const text = String(log[messageKey] ?? '');
      if (log.event !== undefined) return text;
      const details = Object.entries(log)
        .filter(([key, value]) => !baseFields.has(key) && value !== undefined)
        .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
      return details.length > 0 ? `${text} (${details.join(', ')})` : text;
    },
  });
  return createLogger(level, pretty, options);
}

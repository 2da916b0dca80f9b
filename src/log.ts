import pino, { type Logger } from 'pino';

export type { Logger };

/** Field names that must never reach a log line, wherever they appear in a logged object. */
const redactPaths = [
  'password',
  '*.password',
  'token',
  '*.token',
  'refreshToken',
  '*.refreshToken',
  'accessToken',
  '*.accessToken',
  'key',
  '*.key',
  'secret',
  '*.secret',
  'authorization',
  '*.authorization',
  'req.headers.authorization',
];

/** `destination` lets a test read what would be logged. */
export function createLogger(level: string, name = 'relaybox', destination?: pino.DestinationStream): Logger {
  const options = { name, level, redact: { paths: redactPaths, censor: '[redacted]' } };
  return destination ? pino(options, destination) : pino(options);
}

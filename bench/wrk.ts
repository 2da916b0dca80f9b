/**
 * wrk (a load generator in C that costs far less CPU than one in Node) driving
 * POST /api/v1/messages, and what its report says. Needs `wrk` on the PATH
 * (Debian: apt-get install wrk).
 */
import { spawnSync } from 'node:child_process';

const requestTimeoutSeconds = 30;

export interface WrkResult {
  requestsPerSecond: number;
  /** Requests per second answered 2xx: the accepted sends. */
  sendsPerSecond: number;
  accepted: number;
  non2xx: number;
  socketErrors: number;
  p50Ms: number;
  p99Ms: number;
}

/**
 * Runs wrk with one thread and `connections` keep-alive connections for
 * `seconds`, requests made by the Lua `script`. A request is given up after
 * `requestTimeoutSeconds` (wrk's own default, 2 s, would leave a slow
 * backend's slowest answers out of its latency figures).
 */
export function wrk(url: string, script: string, seconds: number, connections: number): WrkResult {
  const run = spawnSync(
    'wrk',
    [
      '-t',
      '1',
      '-c',
      String(connections),
      '-d',
      `${seconds}s`,
      '--timeout',
      `${requestTimeoutSeconds}s`,
      '--latency',
      '-s',
      script,
      url,
    ],
    { encoding: 'utf8', timeout: (seconds + requestTimeoutSeconds + 30) * 1000 },
  );
  if (run.error) throw new Error(`wrk could not run (${run.error.message}); install it (Debian: apt-get install wrk)`);
  if (run.status !== 0) throw new Error(`wrk exited with ${run.status}: ${run.stderr}`);
  return parseWrk(run.stdout);
}

/** wrk's latency figures ("50%    3.21ms") in milliseconds. */
function percentile(out: string, p: string): number {
  const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s)\\s*$`, 'm').exec(out);
  if (!m) return NaN;
  const value = Number(m[1]);
  return m[2] === 'us' ? value / 1000 : m[2] === 's' ? value * 1000 : value;
}

function parseWrk(out: string): WrkResult {
  const rate = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const total = Number(/(\d+) requests in/.exec(out)?.[1]);
  return {
    requestsPerSecond: rate,
    sendsPerSecond: rate * (total > 0 ? (total - non2xx) / total : 1),
    accepted: total - non2xx,
    non2xx,
    socketErrors: socket ? socket.slice(1).reduce((s, v) => s + Number(v), 0) : 0,
    p50Ms: percentile(out, '50'),
    p99Ms: percentile(out, '99'),
  };
}

/** A wrk script of sends with `key`: a handful of recipients (100 conversations), a body that changes. */
export function sendScript(key: string): string {
  return [
    'wrk.method = "POST"',
    `wrk.headers["Authorization"] = "Bearer ${key}"`,
    'wrk.headers["Content-Type"] = "application/json"',
    'local n = 0',
    'request = function()',
    '  n = n + 1',
    '  return wrk.format(nil, nil, nil, string.format(\'{"to":"+1415555%04d","body":"bench %d"}\', n % 100, n))',
    'end',
  ].join('\n');
}

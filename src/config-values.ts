/** Readers of the settings' values from the environment: each refuses a bad value at start, naming the variable. */
import { isTimeZone } from './time-zone.ts';

export type Env = Record<string, string | undefined>;

/** An integer setting of at least `min` (0 unless said otherwise); anything else stops the process at start, naming the variable. */
export function int(env: Env, name: string, fallback: number, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be an integer of at least ${min}, got "${raw}"`);
  return n;
}

/** Durations, counts and sizes for which 0 makes no sense. */
export const positive = (env: Env, name: string, fallback: number) => int(env, name, fallback, 1);

/** A daily window `HH:MM-HH:MM` of local time, or `off`. */
export function quietHours(env: Env, name: string, fallback: string): { start: string; end: string } | false {
  const raw = env[name] || fallback;
  if (raw === 'off') return false;
  const m = /^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$/.exec(raw);
  if (!m) throw new Error(`${name} must be HH:MM-HH:MM (local time) or off, got "${raw}"`);
  return { start: `${m[1]}:${m[2]}`, end: `${m[3]}:${m[4]}` };
}

/** An IANA time zone this runtime knows. */
export function timeZone(env: Env, name: string, fallback: string): string {
  const raw = env[name] || fallback;
  if (!isTimeZone(raw)) throw new Error(`${name} must be an IANA time zone such as Europe/Paris, got "${raw}"`);
  return raw;
}

/** The longest delay a Node.js timer keeps: past it `setTimeout` and `setInterval` fire at once. */
export const longestTimerMs = 2 ** 31 - 1;

/** A duration that becomes a timer: positive, and refused past `longestTimerMs` rather than firing at once. */
export function timerMs(env: Env, name: string, fallback: number, min = 1): number {
  const n = int(env, name, fallback, min);
  if (n > longestTimerMs)
    throw new Error(
      `${name} must be at most ${longestTimerMs} ms (about 24.8 days, the longest timer), got "${env[name]}"`,
    );
  return n;
}

/** `true` or `false`; anything else stops the process at start, naming the variable. */
export function flag(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw !== 'true' && raw !== 'false') throw new Error(`${name} must be true or false, got "${raw}"`);
  return raw === 'true';
}

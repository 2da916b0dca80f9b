import { hash, randomFillSync } from 'node:crypto';

const idBytes = 16;
/** Randomness drawn a few KiB at a time: one system call per 256 ids instead of one per id. */
const pool = Buffer.alloc(idBytes * 256);
let offset = pool.length;

/** `bytes` (at most 16) random bytes from the pool, encoded. */
function draw(bytes: number, encoding: 'base64url' | 'hex'): string {
  if (offset + bytes > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const text = pool.toString(encoding, offset, offset + bytes);
  offset += bytes;
  return text;
}

/** A resource id: a readable prefix and 16 random bytes, e.g. `msg_3q2x...`. */
export function newId(prefix: string): string {
  return `${prefix}_${draw(idBytes, 'base64url')}`;
}

/** `bytes` random bytes (at most 16) as lower-case hex: trace and span ids. */
export function randomHex(bytes: number): string {
  return draw(bytes, 'hex');
}

/** The id alphabet in byte order, so that a time written in it sorts as the time does. */
const ordered = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
/** Characters of an ordered id that hold its time: 8 × 6 bits of milliseconds, enough until the year 10889. */
export const idTimeChars = 8;

/**
 * An id of the same shape as `newId`'s whose first 8 characters are its
 * creation time in milliseconds (then 14 random characters, 84 bits): the
 * ids of one collection inserted in time order go to the end of its id index
 * rather than to a random page of it, which on the embedded store is a page
 * written per insert. For records whose creation time is not a secret
 * (messages carry it as `createdAt`); never for keys or tokens.
 */
export function newOrderedId(prefix: string): string {
  let time = '';
  for (let t = Date.now(), i = 0; i < idTimeChars; i++, t = Math.floor(t / 64)) time = ordered[t % 64]! + time;
  return `${prefix}_${time}${newId('').slice(1, 1 + 22 - idTimeChars)}`;
}

/** The last millisecond formatted: a busy process asks for the time many times per millisecond. */
let lastMs = Number.NaN;
let lastIso = '';

export function nowIso(): string {
  const ms = Date.now();
  if (ms !== lastMs) {
    lastMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}

const idSuffix = /^[A-Za-z0-9_-]{22}$/;

/** Whether `value` is exactly an id `newId(prefix)` could have made (no padding, no other byte). */
export function isId(prefix: string, value: string): boolean {
  return value.startsWith(`${prefix}_`) && idSuffix.test(value.slice(prefix.length + 1));
}

/**
 * The first `length` characters (at most 43) of the SHA-256 of `text` in base64url: ids that follow from what
 * they name, so every writer of the same thing makes the same id. One call, no hash object (a quarter of
 * `createHash`'s time for a short text).
 */
export function digestId(text: string, length: number): string {
  return hash('sha256', text, 'base64url').slice(0, length);
}

import { randomFillSync } from 'node:crypto';

const idBytes = 16;
/** Randomness drawn a few KiB at a time: one system call per 256 ids instead of one per id. */
const pool = Buffer.alloc(idBytes * 256);
let offset = pool.length;

/** A resource id: a readable prefix and 16 random bytes, e.g. `msg_3q2x...`. */
export function newId(prefix: string): string {
  if (offset + idBytes > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const id = pool.toString('base64url', offset, offset + idBytes);
  offset += idBytes;
  return `${prefix}_${id}`;
}

export function nowIso(): string {
  return new Date().toISOString();
}

const idSuffix = /^[A-Za-z0-9_-]{22}$/;

/** Whether `value` is exactly an id `newId(prefix)` could have made (no padding, no other byte). */
export function isId(prefix: string, value: string): boolean {
  return value.startsWith(`${prefix}_`) && idSuffix.test(value.slice(prefix.length + 1));
}

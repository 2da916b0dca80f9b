import { randomBytes } from 'node:crypto';

/** A resource id: a readable prefix and 16 random bytes, e.g. `msg_3q2x...`. */
export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(16).toString('base64url')}`;
}

export function nowIso(): string {
  return new Date().toISOString();
}

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export const apiKeyPrefix = 'rbx_live_';

/** A new API key: 32 random bytes carry the entropy, so a fast hash is enough to store it. */
export function newApiKey(): { raw: string; hash: string; visiblePrefix: string } {
  const raw = `${apiKeyPrefix}${randomBytes(32).toString('base64url')}`;
  return { raw, hash: sha256(raw), visiblePrefix: raw.slice(0, apiKeyPrefix.length + 6) };
}

export const platformKeyPrefix = 'rbx_platform_';

/** A new platform-admin key and the SHA-256 digest PLATFORM_ADMIN_KEY_HASHES holds of it (the key itself is stored nowhere). */
export function newPlatformKey(): { raw: string; hash: string } {
  const raw = `${platformKeyPrefix}${randomBytes(32).toString('base64url')}`;
  return { raw, hash: sha256(raw) };
}

/** An opaque refresh token; only its hash is stored. */
export function newRefreshToken(): { raw: string; hash: string } {
  const raw = randomBytes(32).toString('base64url');
  return { raw, hash: sha256(raw) };
}

export function sha256(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

export function sameSecret(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

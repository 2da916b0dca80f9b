import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** What new keys begin with, by mode: a live key reaches the organization's data, a test key its test data. */
export const apiKeyPrefixes = { live: 'rb_live_', test: 'rb_test_' } as const;
/** What keys made before test mode begin with: they keep working, as live keys. */
export const legacyApiKeyPrefix = 'rbx_live_';

/** Whether a bearer credential is an API key (of either mode, or an older one) rather than an access token. */
export function isApiKey(credential: string): boolean {
  return (
    credential.startsWith(apiKeyPrefixes.live) ||
    credential.startsWith(apiKeyPrefixes.test) ||
    credential.startsWith(legacyApiKeyPrefix)
  );
}

/** A new API key: 32 random bytes carry the entropy, so a fast hash is enough to store it. */
export function newApiKey(mode: 'live' | 'test' = 'live'): { raw: string; hash: string; visiblePrefix: string } {
  const prefix = apiKeyPrefixes[mode];
  const raw = `${prefix}${randomBytes(32).toString('base64url')}`;
  return { raw, hash: sha256(raw), visiblePrefix: raw.slice(0, prefix.length + 6) };
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

/**
 * What a credential held in memory is keyed by: SHA-256 of it behind 32
 * random bytes made with the digester, never the credential itself nor the
 * SHA-256 the store keeps, so a heap dump holds no working credential and
 * nothing that matches the store or another process. A secret prefix rather
 * than HMAC: the digest never leaves the process, so length extension gains
 * nothing, and the one-shot `hash` costs a quarter of `createHmac`.
 */
export function memoryDigester(): (credential: string) => string {
  // ASCII (base64), so the prefix and the credential are hashed exactly as written.
  const prefix = randomBytes(32).toString('base64');
  return (credential) => hash('sha256', prefix + credential, 'base64');
}

export function sha256(value: string): string {
  return hash('sha256', value, 'hex');
}

export function sameSecret(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

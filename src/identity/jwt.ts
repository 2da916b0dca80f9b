import { createHmac } from 'node:crypto';
import { link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, importJWK, importPKCS8, importSPKI, jwtVerify, SignJWT, type JWK } from 'jose';
import { VerifiedTokens } from './verified-tokens.ts';

/** The one algorithm we sign with and the only one we accept (no `none`, no HMAC confusion). */
export const jwtAlgorithm = 'EdDSA';

export interface JwtSettings {
  issuer: string;
  audience: string;
  accessTokenTtlSeconds: number;
  privateKeyPem: string | undefined;
  publicKeyPem: string | undefined;
  dataDir: string;
}

export interface AccessClaims {
  sub: string;
  org: string;
  role: string;
}

type SigningKey = Awaited<ReturnType<typeof importPKCS8>>;

export interface AccessTokens {
  sign(claims: AccessClaims): Promise<{ token: string; expiresIn: number }>;
  /** The claims of a valid token, or undefined for anything else (expired, forged, wrong audience...). */
  verify(token: string): Promise<AccessClaims | undefined>;
  /** The claims of a token this process verified and that has not expired, at once; undefined: `verify` it. */
  known(token: string): AccessClaims | undefined;
  /**
   * A secret for another purpose (signed download links), derived from the
   * signing key: every process that shares the key agrees on it, and it
   * changes when the key does.
   */
  deriveSecret(purpose: string): Buffer;
}

export async function loadAccessTokens(settings: JwtSettings): Promise<AccessTokens> {
  const { privateKey, publicKey, material } = await loadKeys(settings);
  const verified = new VerifiedTokens<AccessClaims>();
  return {
    known: (token) => verified.known(token),
    deriveSecret: (purpose) => createHmac('sha256', material).update(`relaybox:${purpose}`).digest(),
    async sign(claims) {
      const token = await new SignJWT({ org: claims.org, role: claims.role })
        .setProtectedHeader({ alg: jwtAlgorithm, typ: 'JWT' })
        .setSubject(claims.sub)
        .setIssuer(settings.issuer)
        .setAudience(settings.audience)
        .setIssuedAt()
        .setExpirationTime(`${settings.accessTokenTtlSeconds}s`)
        .sign(privateKey);
      return { token, expiresIn: settings.accessTokenTtlSeconds };
    },
    async verify(token) {
      try {
        const { payload } = await jwtVerify(token, publicKey, {
          algorithms: [jwtAlgorithm],
          issuer: settings.issuer,
          audience: settings.audience,
          requiredClaims: ['sub', 'exp', 'iss', 'aud'],
        });
        if (typeof payload.sub !== 'string' || typeof payload.org !== 'string' || typeof payload.role !== 'string')
          return undefined;
        const claims = { sub: payload.sub, org: payload.org, role: payload.role };
        verified.keep(token, claims, payload.exp!);
        return claims;
      } catch {
        return undefined;
      }
    },
  };
}

const keyFile = 'jwt-signing-key.json';

async function loadKeys(
  settings: JwtSettings,
): Promise<{ privateKey: SigningKey; publicKey: SigningKey; material: string }> {
  if (settings.privateKeyPem && settings.publicKeyPem) {
    return {
      material: settings.privateKeyPem,
      privateKey: await importPKCS8(settings.privateKeyPem, jwtAlgorithm),
      publicKey: await importSPKI(settings.publicKeyPem, jwtAlgorithm),
    };
  }
  const jwks = await readOrCreateKeyFile(settings.dataDir);
  return {
    material: JSON.stringify(jwks.privateJwk),
    privateKey: (await importJWK(jwks.privateJwk, jwtAlgorithm)) as SigningKey,
    publicKey: (await importJWK(jwks.publicJwk, jwtAlgorithm)) as SigningKey,
  };
}

/** Processes sharing a DATA_DIR must agree on one key: the first to create the file wins, the others read it. */
async function readOrCreateKeyFile(dataDir: string): Promise<{ privateJwk: JWK; publicJwk: JWK }> {
  const path = join(dataDir, keyFile);
  try {
    return JSON.parse(await readFile(path, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await mkdir(dataDir, { recursive: true });
  const { privateKey, publicKey } = await generateKeyPair(jwtAlgorithm, { crv: 'Ed25519', extractable: true });
  const jwks = { privateJwk: await exportJWK(privateKey), publicJwk: await exportJWK(publicKey) };
  // Written whole to a private name first, then linked: a reader never sees half a file.
  const draft = `${path}.${process.pid}.tmp`;
  await writeFile(draft, JSON.stringify(jwks), { mode: 0o600 });
  try {
    await link(draft, path);
    return jwks;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return JSON.parse(await readFile(path, 'utf8'));
  } finally {
    await unlink(draft);
  }
}

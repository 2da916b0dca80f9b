import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

const keyFile = 'webhook-secret.key';
const keyBytes = 32;
const ivBytes = 12;
const version = 'v1';

/**
 * Webhook secrets at rest: AES-256-GCM, a fresh IV per value, the version and
 * IV stored beside the ciphertext. The stored form names no secret; only a
 * process holding the key reads it back.
 */
export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== keyBytes) throw new Error(`the webhook secret key must be ${keyBytes} bytes`);
  }

  seal(plain: string): string {
    const iv = randomBytes(ivBytes);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const sealed = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return [
      version,
      iv.toString('base64url'),
      cipher.getAuthTag().toString('base64url'),
      sealed.toString('base64url'),
    ].join(':');
  }

  open(stored: string): string {
    const [v, iv, tag, sealed] = stored.split(':');
    if (v !== version || !iv || !tag || sealed === undefined) throw new Error('unreadable sealed secret');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(sealed, 'base64url')), decipher.final()]).toString('utf8');
  }
}

/** The key from WEBHOOK_SECRET_KEY (base64 or hex), or the one generated into dataDir on first start. */
export async function loadSecretBox(configured: string | undefined, dataDir: string): Promise<SecretBox> {
  if (configured) return new SecretBox(parseKey(configured));
  return new SecretBox(await readOrCreateKey(dataDir));
}

function parseKey(text: string): Buffer {
  const trimmed = text.trim();
  const key = /^[0-9a-f]{64}$/i.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64');
  if (key.length !== keyBytes) throw new Error(`WEBHOOK_SECRET_KEY must be ${keyBytes} bytes, base64 or hex`);
  return key;
}

/** Processes sharing a DATA_DIR must agree on one key: the first to create the file wins, the others read it. */
async function readOrCreateKey(dataDir: string): Promise<Buffer> {
  const path = join(dataDir, keyFile);
  try {
    return parseKey(await readFile(path, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await mkdir(dataDir, { recursive: true });
  const draft = `${path}.${process.pid}.tmp`;
  await writeFile(draft, randomBytes(keyBytes).toString('base64'), { mode: 0o600 });
  try {
    await link(draft, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    await unlink(draft);
  }
  return parseKey(await readFile(path, 'utf8'));
}

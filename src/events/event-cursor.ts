import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { AppError, validationError } from '../errors.ts';
import { platformScope, type Collection, type Store } from '../store/collection.ts';

interface CursorKeyDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  /** 32 random bytes, base64. */
  key: string;
}

const keyId = 'event-cursor';
/** A cursor is one AES block, in base64url. */
export const cursorPattern = '^[A-Za-z0-9_-]{22}$';
/** The kinds of stream position: the embedded stream's sequence number, or a Redis stream id (`ms-seq`). */
const sequence = 1;
const streamId = 2;

/**
 * What an organization sees of an event's position in the stream (`cursor`
 * in GET /api/v1/events): the position itself is one sequence for every
 * organization, so its number would tell one organization how many events
 * the others had between two of its own. A cursor is that position
 * encrypted with the organization's own key (AES on one block, the key an
 * HMAC of a secret kept in the store and the organization id): opaque, the
 * same for the same event, and meaningless to any other organization.
 * Positions keep their order in the store; a cursor passed back as `after`
 * is decrypted to the position it stands for.
 */
export class EventCursors {
  private secret: Promise<Buffer> | undefined;

  constructor(private readonly keys: Collection<CursorKeyDoc>) {}

  /** The secret every process of the deployment shares, made by the first one that needs it. */
  private load(): Promise<Buffer> {
    this.secret ??= (async () => {
      const existing = await this.keys.findOne(platformScope, { id: keyId });
      if (existing) return Buffer.from(existing.key, 'base64');
      try {
        await this.keys.insertOne(platformScope, {
          id: keyId,
          tenantId: platformScope.tenantId,
          key: randomBytes(32).toString('base64'),
        });
      } catch (err) {
        if (!(err instanceof AppError && err.code === 'conflict')) throw err; // another process made it first
      }
      return Buffer.from((await this.keys.findOne(platformScope, { id: keyId }))!.key, 'base64');
    })().catch((err: unknown) => {
      this.secret = undefined;
      throw err;
    });
    return this.secret;
  }

  /** The organization's own cursor key: its event cursors' AES key, and what its list cursors are signed with (`ListCursors`). */
  async orgKey(tenantId: string): Promise<Buffer> {
    return createHmac('sha256', await this.load())
      .update(tenantId)
      .digest();
  }

  /** The cursors of positions as stored (`sortableCursor`), for one organization. */
  async encode(tenantId: string, positions: string[]): Promise<string[]> {
    if (positions.length === 0) return [];
    const cipher = createCipheriv('aes-256-ecb', await this.orgKey(tenantId), null).setAutoPadding(false);
    return positions.map((p) => cipher.update(pack(p)).toString('base64url'));
  }

  /** The stream position (as the stream gave it) a cursor of this organization stands for; a 400 for anything else. */
  async decode(tenantId: string, cursor: string): Promise<string> {
    const block = Buffer.from(cursor, 'base64url');
    if (block.length === 16) {
      const decipher = createDecipheriv('aes-256-ecb', await this.orgKey(tenantId), null).setAutoPadding(false);
      const position = unpack(decipher.update(block));
      if (position !== null) return position;
    }
    throw validationError('/after', 'is not a cursor of this organization');
  }
}

export function cursorKeysCollection(store: Store): Collection<CursorKeyDoc> {
  return store.collection<CursorKeyDoc>('event_cursor_keys');
}

/** A stored position as one block: kind, the two numbers, and three zero bytes that a forged or foreign cursor fails. */
function pack(position: string): Buffer {
  const [first, second] = position.split('-');
  const block = Buffer.alloc(16);
  block[0] = second === undefined ? sequence : streamId;
  block.writeBigUInt64BE(BigInt(first!), 1);
  block.writeUInt32BE(Number(second ?? 0), 9);
  return block;
}

function unpack(block: Buffer): string | null {
  if (block[13] !== 0 || block[14] !== 0 || block[15] !== 0) return null;
  const first = block.readBigUInt64BE(1).toString();
  if (block[0] === sequence && block.readUInt32BE(9) === 0) return first;
  if (block[0] === streamId) return `${first}-${block.readUInt32BE(9)}`;
  return null;
}

import { createHmac, timingSafeEqual } from 'node:crypto';
import { validationError } from '../errors.ts';

/** The sort keys of one item of a list, in the list's sort order: its sort value(s), then its id. */
export type SortKeys = Array<string | number>;

/** Where cursors get their key: the deployment's cursor key of each organization (`EventCursors.orgKey`). */
export interface CursorKeys {
  orgKey(tenantId: string): Promise<Buffer>;
}

/** Bytes of the tag: 128 bits, a forgery chance of 2^-128 per try. */
const tagBytes = 16;
/** The longest `after` a list takes: a tag and a few sort keys (an ISO time and an id are about 100 characters). */
export const maxCursorChars = 512;
export const cursorCharacters = '^[A-Za-z0-9_-]+$';

/**
 * The cursors of the keyset lists (`nextCursor`, passed back as `after`):
 * the sort keys of a page's last item as JSON, after an HMAC tag that binds
 * them to the organization and the list (its route), all in base64url. The
 * keys are the organization's own (they are in the item it was shown), so
 * they are signed, not hidden; a cursor that was altered or made up, or made
 * for another organization or another list, fails the tag and is a 400
 * before anything is read. Not a secret either: anyone in the organization
 * who holds one reads what its credentials let it read.
 */
export class ListCursors {
  constructor(private readonly keys: CursorKeys) {}

  private async tag(tenantId: string, list: string, payload: Buffer): Promise<Buffer> {
    // A key of its own for list cursors, apart from the AES key of event cursors.
    const key = createHmac('sha256', await this.keys.orgKey(tenantId))
      .update('list-cursor')
      .digest();
    return createHmac('sha256', key).update(list).update('\u0000').update(payload).digest().subarray(0, tagBytes);
  }

  async encode(tenantId: string, list: string, keys: SortKeys): Promise<string> {
    const payload = Buffer.from(JSON.stringify(keys));
    return Buffer.concat([await this.tag(tenantId, list, payload), payload]).toString('base64url');
  }

  /** The sort keys of a cursor this organization was given by this list; a 400 for anything else. */
  async decode(tenantId: string, list: string, cursor: string): Promise<SortKeys> {
    const raw = Buffer.from(cursor, 'base64url');
    if (raw.length > tagBytes && raw.toString('base64url') === cursor) {
      const payload = raw.subarray(tagBytes);
      if (timingSafeEqual(raw.subarray(0, tagBytes), await this.tag(tenantId, list, payload))) {
        const keys = JSON.parse(payload.toString()) as unknown;
        if (
          Array.isArray(keys) &&
          keys.length > 0 &&
          keys.every((k) => typeof k === 'string' || (typeof k === 'number' && Number.isFinite(k)))
        )
          return keys as SortKeys;
      }
    }
    throw validationError('/after', 'is not a cursor this list gave this organization: pass nextCursor as it came');
  }
}

import { AppError } from '../errors.ts';
import { nowIso } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { RelayCredential } from '../relay-protocol/frames.ts';
import type { Principal } from '../roles.ts';
import type { Collection } from '../store/collection.ts';
import { FileTooLarge, type FileStore } from '../store/file-store.ts';
import { mimeTypeOf, type AttachmentLinks } from './attachment-links.ts';
import { attachmentIdOf, fileNameOf, type AttachmentDoc } from './attachment-store.ts';
import type { MessageQueries } from './message-queries.ts';

/** What an upload answers its relay. */
export interface UploadAnswer {
  id: string;
  status: AttachmentDoc['status'];
  size: number | null;
}

export interface AttachmentServiceDeps {
  attachments: Collection<AttachmentDoc>;
  files: FileStore;
  links: AttachmentLinks;
  queries: MessageQueries;
  /** The relay a credential belongs to (relays/relay-registry.ts). */
  relay(credential: RelayCredential): Promise<{ id: string; tenantId: string } | undefined>;
  maxBytes: number;
  log: Logger;
}

/**
 * Received attachments: their relay uploads each one's bytes once, streamed
 * into the store's file bucket; the API lists them with signed, expiring
 * links; a link streams the file back. Every read is scoped to the
 * organization (and so to its test or live data): the relay's for an
 * upload, the caller's for the list, the link's signed one for a download.
 */
export class AttachmentService {
  constructor(private readonly deps: AttachmentServiceDeps) {}

  /** The relay an `Authorization: Bearer <relayId>:<secret>` names; 401 for anything else. */
  async relayOf(authorization: string | undefined): Promise<{ id: string; tenantId: string }> {
    const match = /^Bearer ([A-Za-z0-9_-]{1,128}):([A-Za-z0-9_-]{1,256})$/.exec(authorization ?? '');
    const relay = match ? await this.deps.relay({ relayId: match[1]!, secret: match[2]! }) : undefined;
    if (!relay) throw new AppError('unauthorized', 'a relay credential is needed: Bearer <relayId>:<secret>');
    return relay;
  }

  /**
   * Stores the bytes of the relay's attachment `guid`, read as they arrive.
   * One stored already is answered as it is without reading a byte (a
   * repeated upload stores nothing twice); one larger than the limit, by its
   * Content-Length or once past it, becomes `failed` and is answered 413.
   */
  async upload(
    relay: { id: string; tenantId: string },
    guid: string,
    declaredLength: string | undefined,
    body: AsyncIterable<Buffer>,
    /** The relay cannot upload it (the file is not on the Mac): why. */
    unavailable?: string,
  ): Promise<UploadAnswer> {
    const { attachments, files, maxBytes } = this.deps;
    const doc = await attachments.findOne({ tenantId: relay.tenantId }, { id: attachmentIdOf(relay.tenantId, guid) });
    if (!doc) throw new AppError('not_found', 'no received message has this attachment; send its row first');
    if (doc.status === 'ready') return answer(doc);
    if (doc.status === 'failed') throw new AppError('conflict', `this attachment failed: ${doc.reason ?? 'unknown'}`);
    const scope = { tenantId: doc.tenantId, teamId: doc.teamId };
    if (unavailable !== undefined) {
      const failed = await attachments.updateOne(
        scope,
        { id: doc.id, status: 'pending' },
        { $set: { status: 'failed', reason: unavailable.slice(0, 500), updatedAt: nowIso() } },
      );
      return answer(failed ?? doc);
    }
    const declared = Number(declaredLength);
    if (declaredLength !== undefined && Number.isFinite(declared) && declared > maxBytes)
      return this.tooLarge(doc, declared);
    let stored;
    try {
      stored = await files.put(body, { maxBytes, name: doc.filename });
    } catch (err) {
      if (err instanceof FileTooLarge) return this.tooLarge(doc, undefined);
      throw err;
    }
    const now = nowIso();
    const ready = await attachments.updateOne(
      scope,
      { id: doc.id, status: 'pending' },
      { $set: { status: 'ready', fileKey: stored.key, size: stored.size, sha256: stored.sha256, updatedAt: now } },
    );
    if (!ready) {
      // Stored beside us by another upload of the same file: the first one's bytes are kept.
      await files.delete(stored.key);
      const current = await attachments.findOne(scope, { id: doc.id });
      return answer(current ?? doc);
    }
    this.deps.log.info({ attachmentId: doc.id, relayId: relay.id, bytes: stored.size }, 'attachment stored');
    return answer(ready);
  }

  private async tooLarge(doc: AttachmentDoc, declared: number | undefined): Promise<never> {
    const reason = `larger than ${this.deps.maxBytes} bytes, the largest attachment kept`;
    await this.deps.attachments.updateOne(
      { tenantId: doc.tenantId, teamId: doc.teamId },
      { id: doc.id, status: 'pending' },
      {
        $set: { status: 'failed', reason, ...(declared !== undefined ? { size: declared } : {}), updatedAt: nowIso() },
      },
    );
    throw new AppError('payload_too_large', `the attachment is ${reason}`);
  }

  /** A message's attachments with signed links: a received one's as its relay uploaded them, a sent one's URLs. */
  async list(principal: Principal, messageId: string, base: string) {
    const message = await this.deps.queries.one(principal, messageId);
    const docs = await this.deps.attachments.find(
      { tenantId: principal.tenantId, teamId: message.teamId },
      { messageId: message.id },
      { sort: { index: 1 }, limit: 100 },
    );
    if (docs.length === 0 && message.direction === 'received')
      // Stored before relays uploaded attachments: only the names are known (a path kept then is never shown).
      return message.attachments.map((path, index) => {
        const filename = fileNameOf(path);
        const { expiresAt } = this.deps.links.link(base, principal.tenantId, message.id, index);
        const reason = 'received before relays uploaded attachments';
        return {
          id: `${message.id}.${index}`,
          url: null,
          filename,
          mimeType: mimeTypeOf(filename),
          size: null,
          status: 'failed' as const,
          reason,
          expiresAt,
        };
      });
    if (docs.length === 0) return this.deps.links.entries(base, principal.tenantId, message.id, message.attachments);
    return docs.map((doc) => {
      const link = this.deps.links.link(base, principal.tenantId, message.id, doc.index);
      return {
        id: doc.id,
        url: doc.status === 'ready' ? link.url : null,
        filename: doc.filename,
        mimeType: doc.mimeType ?? mimeTypeOf(doc.filename),
        size: doc.size,
        status: doc.status,
        ...(doc.reason ? { reason: doc.reason } : {}),
        expiresAt: link.expiresAt,
      };
    });
  }

  /**
   * What a signed link leads to: a received attachment's bytes, or a
   * redirect to a sent one's URL. A link that is not genuine or has expired
   * is 403; one whose attachment is gone is 404.
   */
  async download(
    token: string,
  ): Promise<
    { kind: 'file'; doc: AttachmentDoc; size: number; chunks: AsyncIterable<Buffer> } | { kind: 'url'; url: string }
  > {
    const claims = this.deps.links.verify(token);
    if (!claims) throw new AppError('forbidden', 'this download link is not genuine or has expired');
    const doc = await this.deps.attachments.findOne({ tenantId: claims.o }, { messageId: claims.m, index: claims.i });
    if (!doc) {
      const source = (await this.deps.queries.oneInOrg(claims.o, claims.m))?.attachments[claims.i];
      if (!source || !/^https?:\/\//i.test(source)) throw new AppError('not_found', 'attachment not found');
      return { kind: 'url', url: source };
    }
    if (doc.status !== 'ready' || !doc.fileKey)
      throw new AppError(
        'conflict',
        doc.status === 'failed'
          ? `this attachment failed: ${doc.reason ?? 'unknown'}`
          : 'this attachment is not uploaded yet: its relay sends it after the message',
      );
    const file = await this.deps.files.open(doc.fileKey);
    if (!file) throw new AppError('not_found', 'attachment not found');
    return { kind: 'file', doc, size: file.size, chunks: file.chunks };
  }
}

function answer(doc: AttachmentDoc): UploadAnswer {
  return { id: doc.id, status: doc.status, size: doc.size };
}

import type { InboundFile } from '../relay-protocol/frames.ts';
import type { Store } from '../store/collection.ts';
import { digestId } from '../ids.ts';

export const attachmentStatuses = ['pending', 'ready', 'failed'] as const;
export type AttachmentStatus = (typeof attachmentStatuses)[number];

/**
 * An attachment of a received message: recorded `pending` with the message,
 * `ready` once its relay uploaded the bytes (kept in the store's file bucket
 * under `fileKey`), `failed` with a reason when they will never come. Its
 * path on the Mac is never kept: only the file's name.
 */
export interface AttachmentDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  teamId: string;
  messageId: string;
  /** Its position among the message's attachments (the signed link's `i`). */
  index: number;
  /** The attachment's guid in the relay's chat.db: what the relay uploads it by. */
  guid: string;
  filename: string;
  mimeType: string | null;
  /** Bytes: as the relay announced them while pending, as stored once ready. */
  size: number | null;
  status: AttachmentStatus;
  reason?: string;
  fileKey?: string;
  sha256?: string;
  relayId: string;
  createdAt: string;
  updatedAt: string;
}

/** The bucket the bytes are kept in (a directory of the data dir, or GridFS `attachments.files`/`.chunks`). */
export const attachmentBucket = 'attachments';

export function attachmentCollection(store: Store) {
  return store.collection<AttachmentDoc>('attachments', [{ keys: { tenantId: 1, messageId: 1, index: 1 } }]);
}

/** The id of a received attachment: from its organization and chat.db guid, so a replayed row finds the stored one. */
export function attachmentIdOf(tenantId: string, guid: string): string {
  return `att_${digestId(`${tenantId}\u0000${guid}`, 24)}`;
}

/** The last segment of a path, as the file's name: what is kept of an attachment's place on the Mac. */
export function fileNameOf(path: string): string {
  const name = path.split(/[/\\]/).pop() ?? '';
  return name === '' ? 'attachment' : name;
}

/**
 * The attachment documents of a received message, all `pending` but those
 * the relay said it cannot upload. An agent older than 0.4 sends only paths
 * (`legacyPaths`): their names are kept, marked `failed`, since it uploads
 * nothing.
 */
export function receivedAttachments(
  base: { tenantId: string; teamId: string; messageId: string; messageGuid: string; relayId: string; at: string },
  files: InboundFile[] | undefined,
  legacyPaths: string[] | undefined,
): AttachmentDoc[] {
  const { messageGuid, ...owner } = base;
  const entries = files
    ? files.map((f) => ({ ...f, reason: f.unavailable }))
    : (legacyPaths ?? []).map((path, i) => ({
        guid: `${messageGuid}/${i}`,
        name: fileNameOf(path),
        mimeType: undefined,
        size: undefined,
        reason: 'the relay agent is older than 0.4 and does not upload attachments: update it',
      }));
  return entries.map((f, index) => ({
    id: attachmentIdOf(base.tenantId, f.guid),
    tenantId: owner.tenantId,
    teamId: owner.teamId,
    messageId: owner.messageId,
    index,
    guid: f.guid,
    filename: fileNameOf(f.name),
    mimeType: f.mimeType ?? null,
    size: f.size ?? null,
    status: f.reason ? 'failed' : 'pending',
    ...(f.reason ? { reason: f.reason } : {}),
    relayId: owner.relayId,
    createdAt: owner.at,
    updatedAt: owner.at,
  }));
}

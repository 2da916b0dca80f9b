import { frameLimits, type ChangeFrame, type InboundFrame } from 'relaybox-relay-protocol/frames.ts';
import type { UploadJob } from './attachment-upload.ts';
import type { ChatAttachment, ChatDbReader, ChatRow } from './chat-db-reader.ts';

/** Our message id of a chat.db guid the agent sent (send-journal.ts `messageIdOf`). */
export type SentMessageIds = (guid: string) => string | undefined;

export interface InboundForwarderOptions {
  batch: number;
  /** Stop reading while this many forwarded rows wait for an ack. */
  maxUnacked: number;
}

/**
 * The inbound half of the cursor protocol, for one connection. It starts at
 * the server's cursor from `welcome` (never below the relay's floor), sends
 * each newer incoming row once on this connection, and moves the acked
 * cursor only on the server's `ack`. A new connection starts a new forwarder
 * from the server's cursor again, so rows sent but not acked before a drop
 * are sent again: at-least-once, and the server dedupes by guid.
 */
export class InboundForwarder {
  /** Highest ROWID read on this connection (sent or skipped). */
  private readCursor: number;
  /** Highest ROWID the server acknowledged as durably stored. */
  private ackedCursor: number;
  /** ROWIDs sent and not yet acked, ascending. */
  private unacked: number[] = [];
  /** The attachments of rows sent and not yet acked, by ROWID: uploaded once the server has the row. */
  private uploads = new Map<number, UploadJob[]>();

  constructor(
    startCursor: number,
    private readonly reader: ChatDbReader,
    private readonly options: InboundForwarderOptions,
    private readonly sentIds: SentMessageIds = () => undefined,
  ) {
    this.readCursor = startCursor;
    this.ackedCursor = startCursor;
  }

  get acked(): number {
    return this.ackedCursor;
  }

  get waitingForAck(): number {
    return this.unacked.length;
  }

  /** Reads the next rows; returns their frames, in ROWID order, to send now. */
  async poll(): Promise<InboundFrame[]> {
    const room = this.options.maxUnacked - this.unacked.length;
    if (room <= 0) return [];
    const rows = await this.reader.readIncoming(this.readCursor, Math.min(room, this.options.batch));
    const frames: InboundFrame[] = [];
    for (const row of rows) {
      this.readCursor = row.rowId;
      const frame = toInboundFrame(row, this.sentIds);
      if (!frame) continue;
      // A group event carries the members as they are now: a replay sends the latest list.
      if (frame.group && frame.chatGuid)
        frame.group.participants = (await this.reader.chatMembers(row.chatGuid!))
          .filter((h) => h.length <= frameLimits.handleLength)
          .slice(0, frameLimits.groupMembers);
      frames.push(frame);
      this.unacked.push(row.rowId);
      const jobs = forwardedFiles(row.attachments).map((a) => ({ guid: a.guid, path: a.path }));
      if (jobs.length > 0) this.uploads.set(row.rowId, jobs);
    }
    return frames;
  }

  /** Moves the acked cursor; answers the attachments of the rows it covers, now theirs to upload. */
  onAck(cursor: number): UploadJob[] {
    if (cursor <= this.ackedCursor) return [];
    this.ackedCursor = cursor;
    this.unacked = this.unacked.filter((rowId) => rowId > cursor);
    const jobs: UploadJob[] = [];
    for (const [rowId, files] of this.uploads)
      if (rowId <= cursor) {
        jobs.push(...files);
        this.uploads.delete(rowId);
      }
    return jobs;
  }
}

/** The attachments a frame names: those whose guid fits the protocol, at most its count. */
function forwardedFiles(attachments: ChatAttachment[]): ChatAttachment[] {
  return attachments.filter((a) => a.guid.length <= frameLimits.guidLength).slice(0, frameLimits.attachments);
}

/**
 * A row as an inbound frame, cut to the protocol's limits; undefined for rows
 * with nothing to forward. A tapback or reply names its target by guid, and
 * by our message id when the agent sent the target (`sentIds`).
 */
export function toInboundFrame(row: ChatRow, sentIds: SentMessageIds = () => undefined): InboundFrame | undefined {
  const attachments = forwardedFiles(row.attachments);
  const { reaction, groupEvent } = row;
  if (reaction && reaction.targetGuid.length > frameLimits.guidLength) return undefined;
  // A group event is about a group chat, named by its guid.
  if (groupEvent && !(row.isGroup && row.chatGuid && row.chatGuid.length <= frameLimits.guidLength)) return undefined;
  if (!reaction && !groupEvent && row.body === '' && attachments.length === 0) return undefined;
  const from = (row.handle ?? row.chatGuid ?? 'unknown').slice(0, frameLimits.handleLength);
  const frame: InboundFrame = {
    type: 'inbound',
    rowId: row.rowId,
    guid: row.guid.slice(0, frameLimits.guidLength),
    from,
    isGroup: row.isGroup,
    body: truncate(row.body, frameLimits.bodyLength),
    receivedAt: new Date(row.dateMs ?? Date.now()).toISOString(),
  };
  if (row.chatGuid) frame.chatGuid = row.chatGuid.slice(0, frameLimits.guidLength);
  // Names only: the path on the Mac stays on the Mac; the bytes are uploaded after the row's ack (attachment-upload.ts).
  if (attachments.length > 0)
    frame.files = attachments.map((a) => ({
      guid: a.guid,
      name: truncate(a.name.split('/').pop() || 'attachment', frameLimits.nameLength),
      ...(a.mimeType && a.mimeType.length <= frameLimits.nameLength ? { mimeType: a.mimeType } : {}),
      ...(a.size !== undefined ? { size: a.size } : {}),
    }));
  if (reaction) {
    frame.reaction = { kind: reaction.kind, ...messageRef(reaction.targetGuid, sentIds), removed: reaction.removed };
    if (reaction.emoji) frame.reaction.emoji = truncate(reaction.emoji, 64);
  }
  if (row.replyToGuid && row.replyToGuid.length <= frameLimits.guidLength)
    frame.replyTo = messageRef(row.replyToGuid, sentIds);
  if (groupEvent) {
    frame.group = { change: groupEvent.change };
    if (groupEvent.name !== undefined) frame.group.name = truncate(groupEvent.name, frameLimits.nameLength);
    if (groupEvent.handle !== undefined) frame.group.handle = groupEvent.handle.slice(0, frameLimits.handleLength);
  }
  return frame;
}

function messageRef(guid: string, sentIds: SentMessageIds): { guid: string; messageId?: string } {
  const messageId = sentIds(guid);
  return messageId ? { guid, messageId } : { guid };
}

export interface ChangeForwarderOptions {
  batch: number;
  /** Stop reading while this many changes wait for an ack. */
  maxUnacked: number;
}

/**
 * Edits and unsends of received messages, for one connection. Messages
 * changes the old row in place, so the ROWID cursor cannot see them: they are
 * read by their time (`date_edited`, `date_retracted`) from the agent's
 * change cursor, the time of the latest change the server acknowledged,
 * which the agent keeps in its state (`onAcked`). Rows changed at that very
 * time are read again after a reconnect; the server makes each change's
 * event once.
 */
export class ChangeForwarder {
  private ackedMs: number;
  /** Changes sent on this connection (`guid@ms`) and the highest time acked. */
  private readonly sent = new Map<string, number>();
  private unacked = 0;

  constructor(
    startMs: number,
    private readonly reader: ChatDbReader,
    private readonly options: ChangeForwarderOptions,
    private readonly onAcked: (ms: number) => void,
  ) {
    this.ackedMs = startMs;
  }

  get acked(): number {
    return this.ackedMs;
  }

  async poll(): Promise<ChangeFrame[]> {
    const room = this.options.maxUnacked - this.unacked;
    if (room <= 0) return [];
    const rows = await this.reader.readChanged(this.ackedMs, this.options.batch + this.sent.size);
    const frames: ChangeFrame[] = [];
    for (const row of rows) {
      const frame = toChangeFrame(row);
      if (!frame) continue;
      const key = `${frame.guid}@${frame.at}`;
      if (this.sent.has(key)) continue;
      this.sent.set(key, Date.parse(frame.at));
      this.unacked += 1;
      frames.push(frame);
      if (frames.length >= room) break;
    }
    return frames;
  }

  onAck(at: string): void {
    const ms = Date.parse(at);
    if (!Number.isFinite(ms)) return;
    this.unacked = Math.max(0, this.unacked - 1);
    if (ms <= this.ackedMs) return;
    this.ackedMs = ms;
    // Changes before the acked time are never read again; those at it are, and stay known.
    for (const [key, keyMs] of this.sent) if (keyMs < ms) this.sent.delete(key);
    this.onAcked(ms);
  }
}

/** An edited or unsent row as a change frame (an unsend wins over an edit); undefined for a row never changed. */
export function toChangeFrame(row: ChatRow): ChangeFrame | undefined {
  if (row.guid.length > frameLimits.guidLength) return undefined;
  const unsent = row.dateRetractedMs !== undefined;
  const atMs = row.dateRetractedMs ?? row.dateEditedMs;
  if (atMs === undefined) return undefined;
  const frame: ChangeFrame = {
    type: 'change',
    rowId: row.rowId,
    guid: row.guid,
    change: unsent ? 'unsent' : 'edited',
    at: new Date(atMs).toISOString(),
  };
  if (!unsent) frame.body = truncate(row.body, frameLimits.bodyLength);
  return frame;
}

/** Cuts at a code point boundary, never through a surrogate pair. */
function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max);
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

import { frameLimits, type InboundFrame } from 'relaybox-relay-protocol/frames.ts';
import type { ChatDbReader, ChatRow } from './chat-db-reader.ts';

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

  constructor(
    startCursor: number,
    private readonly reader: ChatDbReader,
    private readonly options: InboundForwarderOptions,
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
      const frame = toInboundFrame(row);
      if (!frame) continue;
      frames.push(frame);
      this.unacked.push(row.rowId);
    }
    return frames;
  }

  onAck(cursor: number): void {
    if (cursor <= this.ackedCursor) return;
    this.ackedCursor = cursor;
    this.unacked = this.unacked.filter((rowId) => rowId > cursor);
  }
}

/** A row as an inbound frame, cut to the protocol's limits; undefined for rows with nothing to forward. */
export function toInboundFrame(row: ChatRow): InboundFrame | undefined {
  const attachments = row.attachments
    .filter((p) => p.length <= frameLimits.pathLength)
    .slice(0, frameLimits.attachments);
  if (row.body === '' && attachments.length === 0) return undefined;
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
  if (attachments.length > 0) frame.attachments = attachments;
  return frame;
}

/** Cuts at a code point boundary, never through a surrogate pair. */
function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max);
  return /[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut;
}

import type { ChatDbReader, ChatRow } from './chat-db-reader.ts';
import { normalizeBody, normalizeHandle } from './message-sender.ts';
import type { SendJournal, SendRecord, StatusStep } from './send-journal.ts';
import { failureReasonOf, failureText } from './send-failure-reason.ts';

export interface OutgoingTrackerOptions {
  matchWindowMs: number;
  trackStatusMs: number;
  /** Outgoing rows read per query. */
  batch?: number;
}

/** The service names a status frame carries (relay-protocol `sendService`); another value is left out, not refused. */
const servicePattern = /^[A-Za-z0-9.]{1,32}$/;

/** A row written this long before the agent accepted the send cannot be that send (clock steps aside). */
const earliestRowSlackMs = 5_000;

/**
 * Turns chat.db's outgoing rows into statuses for the sends the agent made.
 * A row belongs to a send when its handle and text are the send's recipient
 * and body and it was written after the send was accepted; the oldest waiting
 * send takes the oldest such row, and the matched row's guid is remembered so
 * later polls follow that row alone. Statuses only move forward:
 * sent → delivered → read (never read in a group chat, where Messages sends
 * no read receipts), or failed (error ≠ 0) before delivery, with the
 * reason its error code maps to: a row that shows its error at once is
 * failed without a sent, one whose error comes later is sent, then failed.
 */
export class OutgoingTracker {
  private readonly batch: number;

  constructor(
    private readonly journal: SendJournal,
    private readonly reader: ChatDbReader,
    private readonly options: OutgoingTrackerOptions,
  ) {
    this.batch = options.batch ?? 200;
  }

  /** Starts the outgoing scan at the newest row on the very first run; rows already there are not the agent's. */
  async init(): Promise<void> {
    if (this.journal.outgoingCursor === null) this.journal.setOutgoingCursor(await this.reader.maxRowId());
  }

  /** Reads chat.db once; returns the sends that gained status steps. */
  async poll(nowMs = Date.now()): Promise<SendRecord[]> {
    const changed = new Set<SendRecord>();
    await this.scanNewRows(changed, nowMs);
    await this.followTrackedRows(changed, nowMs);
    this.expire(changed, nowMs);
    return [...changed];
  }

  private async scanNewRows(changed: Set<SendRecord>, nowMs: number): Promise<void> {
    for (;;) {
      const cursor = this.journal.outgoingCursor ?? 0;
      const rows = await this.reader.readOutgoing(cursor, this.batch);
      if (rows.length === 0) return;
      const waiting = this.journal
        .inPhase('sending', 'handed', 'orphaned')
        .filter((r) => r.rowId === undefined)
        .sort((a, b) => a.acceptedAtMs - b.acceptedAtMs);
      for (const row of rows) {
        const record = waiting.find((r) => r.rowId === undefined && belongsTo(row, r));
        if (record) {
          record.rowId = row.rowId;
          record.guid = row.guid;
          this.journal.rememberSent(row.guid, record.messageId);
          if (row.service && servicePattern.test(row.service)) record.service = row.service;
          record.seenAtMs = nowMs;
          this.journal.setPhase(record, 'tracking', nowMs);
          if (this.advance(record, row, nowMs)) changed.add(record);
        }
        this.journal.setOutgoingCursor(row.rowId);
      }
      if (rows.length < this.batch) return;
    }
  }

  private async followTrackedRows(changed: Set<SendRecord>, nowMs: number): Promise<void> {
    const tracked = this.journal.inPhase('tracking').filter((r) => r.rowId !== undefined);
    if (tracked.length === 0) return;
    const byRow = new Map(tracked.map((r) => [r.rowId as number, r]));
    const delivered = (r: SendRecord) => r.steps.some((s) => s.status === 'delivered');
    const awaitingRead = tracked.filter(delivered).map((r) => r.rowId as number);
    const awaitingDelivery = tracked.filter((r) => !delivered(r)).map((r) => r.rowId as number);
    for (const row of await this.reader.readRowsWithNews(awaitingDelivery, awaitingRead)) {
      const record = byRow.get(row.rowId);
      if (record && this.advance(record, row, nowMs)) changed.add(record);
    }
  }

  private expire(changed: Set<SendRecord>, nowMs: number): void {
    for (const record of this.journal.inPhase('handed', 'orphaned', 'tracking')) {
      const age = nowMs - record.phaseAtMs;
      if (record.phase === 'handed' && age > this.options.matchWindowMs) {
        // Messages took it (osascript succeeded) but no row matched, e.g. it rewrote the text; it did go out.
        this.addStep(record, { status: 'sent', at: new Date(record.phaseAtMs).toISOString() });
        this.journal.setPhase(record, 'closed', nowMs);
        changed.add(record);
      } else if (record.phase === 'orphaned' && age > this.options.matchWindowMs) {
        this.addStep(record, {
          status: 'failed',
          at: new Date(nowMs).toISOString(),
          error: 'the relay agent stopped while sending and found no sent message in chat.db',
        });
        this.journal.setPhase(record, 'closed', nowMs);
        changed.add(record);
      } else if (record.phase === 'tracking' && age > this.options.trackStatusMs) {
        this.journal.setPhase(record, 'closed', nowMs);
      }
    }
  }

  /** Adds the steps the row shows that the record lacks; true if any. */
  private advance(record: SendRecord, row: ChatRow, nowMs: number): boolean {
    const has = new Set(record.steps.map((s) => s.status));
    if (has.has('failed') || has.has('read')) return false;
    const before = record.steps.length;
    const iso = (ms: number | undefined) => new Date(ms ?? nowMs).toISOString();
    if (row.error !== 0) {
      // An error after delivery (a later retry of an edit, say) does not undo the delivery.
      if (!has.has('delivered')) {
        this.addStep(record, {
          status: 'failed',
          at: iso(nowMs),
          error: failureText(row.error),
          reason: failureReasonOf(row.error),
        });
        this.journal.setPhase(record, 'closed', nowMs);
      }
      return record.steps.length > before;
    }
    if (!has.has('sent')) this.addStep(record, { status: 'sent', at: iso(row.dateMs) });
    if ((row.isDelivered || row.dateDeliveredMs !== undefined) && !has.has('delivered')) {
      this.addStep(record, { status: 'delivered', at: iso(row.dateDeliveredMs) });
    }
    // Messages sends no read receipts in a group chat: a group row's read fields are never the recipients' read.
    if (row.isGroup) {
      if (record.steps.some((s) => s.status === 'delivered')) this.journal.setPhase(record, 'closed', nowMs);
    } else if ((row.isRead || row.dateReadMs !== undefined) && !has.has('read')) {
      this.addStep(record, { status: 'read', at: iso(row.dateReadMs) });
      this.journal.setPhase(record, 'closed', nowMs);
    }
    return record.steps.length > before;
  }

  private addStep(record: SendRecord, step: StatusStep): void {
    const last = record.steps.at(-1);
    // Never report a step earlier than the one before it: chat.db and Date.now() may disagree by milliseconds.
    if (last && step.at < last.at) step = { ...step, at: last.at };
    this.journal.addStep(record, step);
  }
}

function belongsTo(row: ChatRow, record: SendRecord): boolean {
  if (!row.handle || normalizeHandle(row.handle) !== normalizeHandle(record.to)) return false;
  if (row.dateMs !== undefined && row.dateMs < record.acceptedAtMs - earliestRowSlackMs) return false;
  return normalizeBody(row.body) === normalizeBody(record.body);
}

import { readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { AgentCheckpoint, DeliveryStatus, FailureReason } from 'relaybox-relay-protocol/frames.ts';
import { ensurePrivateDir } from './relay-state.ts';

/**
 * Where a send is:
 * - queued: accepted from the server, not yet handed to Messages
 * - sending: handed to Messages (osascript running); written to disk *before*
 *   osascript starts, so a crash never leads to a second send
 * - orphaned: was `sending` when the agent stopped; the outcome is unknown
 *   until its chat.db row is found
 * - handed: Messages accepted it; waiting for its chat.db row
 * - tracking: row found; watching it for delivered/read
 * - closed: nothing more will be reported
 */
export type SendPhase = 'queued' | 'sending' | 'orphaned' | 'handed' | 'tracking' | 'closed';

export interface StatusStep {
  status: DeliveryStatus;
  at: string;
  error?: string;
  /** A failure Messages wrote on the row: its reason (send-failure-reason.ts). */
  reason?: FailureReason;
}

export interface SendRecord {
  messageId: string;
  /** The server's attempt number: a retry is a new record, a repeated `send` of the same attempt is not. */
  attempt: number;
  to: string;
  /** Kept only until the row is matched (then emptied): the journal is not a message archive. */
  body: string;
  attachmentUrls: string[];
  phase: SendPhase;
  acceptedAtMs: number;
  /** When the phase last changed. */
  phaseAtMs: number;
  rowId?: number;
  guid?: string;
  /** The service of the matched row (`iMessage`, `SMS`): reported with each status once known. */
  service?: string;
  /** Sent as SMS on purpose: the server asked (`send.service`), or the send's fallback and a handle with no iMessage. */
  sendAs?: 'SMS';
  /** When Messages took it (osascript succeeded), and when its chat.db row was matched: hops reported with its statuses. */
  handedAtMs?: number;
  seenAtMs?: number;
  /** Statuses reported, in order. */
  steps: StatusStep[];
  /** How many of `steps` the server has acked. */
  acked: number;
}

interface JournalFile {
  /** Highest chat.db ROWID of outgoing rows already examined for matches. */
  outgoingCursor: number | null;
  records: SendRecord[];
  /** The chat.db guids of the agent's sends and their message ids, oldest first (absent in journals before reactions). */
  sentGuids?: Array<[string, string]>;
}

/** The journal key of one send attempt. */
export function attemptKey(messageId: string, attempt: number): string {
  return `${messageId}#${attempt}`;
}

/** A send counts against the server's credit until it is sent or failed. */
export function isFinished(record: SendRecord): boolean {
  return record.steps.some((s) => s.status === 'sent' || s.status === 'failed');
}

const maxRecords = 20_000;
/** Sent messages whose guid the agent remembers, so a tapback or reply on one names our message id (~100 bytes each). */
export const maxSentGuids = 10_000;

/**
 * Every send attempt the agent accepted, by (messageId, attempt), kept on disk
 * in `<state-dir>/sends.json`: it is how a `send` the server repeats for the
 * same attempt (after a reconnect or a restart) is recognised and never sent
 * twice, while the server's retry of a failed attempt (the next attempt
 * number) is a new send; and how statuses the server has not acked are sent
 * again.
 */
export class SendJournal {
  readonly path: string;
  private readonly records = new Map<string, SendRecord>();
  /** guid → message id of the newest `maxSentGuids` sends matched to their chat.db row, oldest first; outlives the records. */
  private readonly sentGuids = new Map<string, string>();
  outgoingCursor: number | null = null;
  private writing: Promise<void> = Promise.resolve();
  private dirty = false;

  constructor(
    readonly stateDir: string,
    private readonly retentionMs: number,
  ) {
    this.path = join(stateDir, 'sends.json');
  }

  async load(nowMs = Date.now()): Promise<void> {
    let file: JournalFile;
    try {
      file = JSON.parse(await readFile(this.path, 'utf8')) as JournalFile;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new Error(`cannot read ${this.path}: ${(err as Error).message}`);
    }
    this.outgoingCursor = file.outgoingCursor;
    for (const [guid, messageId] of file.sentGuids ?? []) this.sentGuids.set(guid, messageId);
    for (const record of file.records) {
      // A send a previous run accepted and never began is the server's again (see `forgetQueued`).
      if (record.phase === 'queued') {
        this.dirty = true;
        continue;
      }
      // A send that was with osascript when the agent stopped may or may not have gone out.
      if (record.phase === 'sending') Object.assign(record, { phase: 'orphaned', phaseAtMs: nowMs });
      // Journals written before attempts were numbered hold first attempts only.
      record.attempt ??= 1;
      this.records.set(attemptKey(record.messageId, record.attempt), record);
    }
  }
  /**
   * Forgets the sends accepted and not begun, and returns them. The server
   * takes every send back when the connection it came on closes, and gives
   * it again, to this relay or to a standby of its line (docs/relay-agent.md,
   * "Standby relays"): begun after that, it could go twice; forgotten, the
   * server's next hand-over sends it once.
   */
  forgetQueued(): SendRecord[] {
    const dropped: SendRecord[] = [];
    for (const [key, record] of this.records) {
      if (record.phase !== 'queued') continue;
      this.records.delete(key);
      dropped.push(record);
    }
    if (dropped.length > 0) this.dirty = true;
    return dropped;
  }

  get(messageId: string, attempt: number): SendRecord | undefined {
    return this.records.get(attemptKey(messageId, attempt));
  }

  all(): IterableIterator<SendRecord> {
    return this.records.values();
  }

  inPhase(...phases: SendPhase[]): SendRecord[] {
    return [...this.records.values()].filter((r) => phases.includes(r.phase));
  }

  add(record: SendRecord): void {
    this.records.set(attemptKey(record.messageId, record.attempt), record);
    this.changed();
  }

  setPhase(record: SendRecord, phase: SendPhase, nowMs = Date.now()): void {
    record.phase = phase;
    record.phaseAtMs = nowMs;
    if (phase === 'tracking' || phase === 'closed') record.body = '';
    this.changed();
  }

  /** Called for every status step added, wherever it comes from. */
  onStep: ((record: SendRecord, step: StatusStep) => void) | undefined;

  addStep(record: SendRecord, step: StatusStep): void {
    record.steps.push(step);
    this.changed();
    this.onStep?.(record, step);
  }

  markAcked(record: SendRecord): void {
    if (record.acked < record.steps.length) record.acked += 1;
    this.changed();
  }

  /** Remembers which of our messages a chat.db row is, for tapbacks and replies on it; the oldest is forgotten past the cap. */
  rememberSent(guid: string, messageId: string): void {
    if (this.sentGuids.get(guid) === messageId) return;
    this.sentGuids.delete(guid);
    this.sentGuids.set(guid, messageId);
    if (this.sentGuids.size > maxSentGuids) this.sentGuids.delete(this.sentGuids.keys().next().value as string);
    this.changed();
  }

  /** Our message id of a chat.db guid the agent sent; undefined for any other (a received message, one sent by hand). */
  messageIdOf(guid: string): string | undefined {
    return this.sentGuids.get(guid);
  }

  setOutgoingCursor(rowId: number): void {
    if (this.outgoingCursor === rowId) return;
    this.outgoingCursor = rowId;
    this.changed();
  }

  /** Unfinished sends: what the server's credit counts. */
  unfinishedCount(): number {
    let n = 0;
    for (const r of this.records.values()) if (!isFinished(r)) n += 1;
    return n;
  }

  changed(): void {
    this.dirty = true;
  }

  /** Writes the journal if anything changed; resolves once it is on disk. Writes never overlap. */
  flush(nowMs = Date.now()): Promise<void> {
    this.writing = this.writing.then(async () => {
      if (!this.dirty) return;
      this.dirty = false;
      this.prune(nowMs);
      const file: JournalFile = {
        outgoingCursor: this.outgoingCursor,
        records: [...this.records.values()],
        sentGuids: [...this.sentGuids],
      };
      await ensurePrivateDir(this.stateDir);
      const tmp = `${this.path}.${process.pid}.tmp`;
      await writeFile(tmp, JSON.stringify(file), { mode: 0o600 });
      await rename(tmp, this.path);
    });
    return this.writing;
  }

  /** Forgets closed, fully acked sends after the retention time, oldest first past the size cap. */
  private prune(nowMs: number): void {
    for (const [id, r] of this.records) {
      if (r.phase === 'closed' && r.acked >= r.steps.length && nowMs - r.phaseAtMs > this.retentionMs)
        this.records.delete(id);
    }
    if (this.records.size <= maxRecords) return;
    const closed = [...this.records.values()]
      .filter((r) => r.phase === 'closed')
      .sort((a, b) => a.phaseAtMs - b.phaseAtMs);
    for (const r of closed.slice(0, this.records.size - maxRecords))
      this.records.delete(attemptKey(r.messageId, r.attempt));
  }
}

/** The hops of a send this agent saw, in order: it took the `send` frame, Messages took the message, its chat.db row was matched. */
export function checkpointsOf(record: SendRecord): AgentCheckpoint[] {
  const hops: Array<[AgentCheckpoint['hop'], number | undefined]> = [
    ['relay_received', record.acceptedAtMs],
    ['handed_to_app', record.handedAtMs],
    ['seen_in_database', record.seenAtMs],
  ];
  return hops.filter(([, at]) => at !== undefined).map(([hop, at]) => ({ hop, at: new Date(at!).toISOString() }));
}

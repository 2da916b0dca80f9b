import type { Logger } from './agent-logger.ts';
import { downloadAttachments } from './attachment-download.ts';
import type { MessageSender } from './message-sender.ts';
import type { SendJournal, SendRecord } from './send-journal.ts';

export interface SendWorkerOptions {
  attachmentsDir: string;
  attachmentCleanupDelayMs: number;
  logger: Logger;
  /**
   * Whether a queued send may begin now: only while the connection it came
   * on is open. A Mac that slept past its heartbeat timeout wakes with a
   * queue the server has taken back (and maybe given to a standby).
   */
  mayBegin(): boolean;
  /** A send changed phase or gained a status step. */
  onChange(record: SendRecord): void;
}

/**
 * Hands queued sends to Messages one at a time, oldest first (Messages and
 * osascript do not cope well with parallel sends). The `sending` phase is on
 * disk before osascript starts: after a crash that send is never retried,
 * only looked for in chat.db.
 */
export class SendWorker {
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly cleanups = new Map<NodeJS.Timeout, () => Promise<void>>();

  constructor(
    private readonly journal: SendJournal,
    private readonly sender: MessageSender,
    private readonly options: SendWorkerOptions,
  ) {}

  /** Starts working through the queue if idle. */
  wake(): void {
    if (this.running || this.stopped) return;
    this.running = this.drain().finally(() => {
      this.running = undefined;
      if (!this.stopped && this.options.mayBegin() && this.journal.inPhase('queued').length > 0) this.wake();
    });
  }

  /** Waits for the send in progress, then takes no more. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
    // Leaving now: delete downloads still waiting out their grace time rather than leave them on disk.
    const pending = [...this.cleanups];
    this.cleanups.clear();
    await Promise.all(pending.map(([timer, cleanup]) => (clearTimeout(timer), cleanup().catch(() => undefined))));
  }

  private async drain(): Promise<void> {
    for (;;) {
      if (this.stopped || !this.options.mayBegin()) return;
      const next = this.journal.inPhase('queued').sort((a, b) => a.acceptedAtMs - b.acceptedAtMs)[0];
      if (!next) return;
      try {
        await this.sendOne(next);
      } catch (err) {
        // A bug or a disk error; fail this one send rather than stall the queue.
        this.options.logger.error({ messageId: next.messageId, err: (err as Error).message }, 'send crashed');
        if (next.phase === 'queued' || next.phase === 'sending')
          this.fail(next, `relay agent error: ${(err as Error).message}`);
      }
    }
  }

  private async sendOne(record: SendRecord): Promise<void> {
    const log = this.options.logger.child({ messageId: record.messageId });
    let attachmentPaths: string[] = [];
    let cleanup: (() => Promise<void>) | undefined;
    if (record.attachmentUrls.length > 0) {
      const download = await downloadAttachments(record.attachmentUrls, { dir: this.options.attachmentsDir });
      if (!download.ok) {
        log.warn({ error: download.error }, 'attachment download failed');
        this.fail(record, download.error);
        return;
      }
      attachmentPaths = download.paths;
      cleanup = download.cleanup;
    }
    // The download took a while: the connection may have gone meanwhile, and the send with it (forgotten).
    if (!this.options.mayBegin() || this.journal.get(record.messageId, record.attempt) !== record) {
      if (cleanup) this.scheduleCleanup(cleanup);
      return;
    }
    this.journal.setPhase(record, 'sending');
    this.options.onChange(record);
    await this.journal.flush();
    const started = Date.now();
    let outcome;
    try {
      outcome = await this.sender.send({
        messageId: record.messageId,
        attempt: record.attempt,
        to: record.to,
        body: record.body,
        attachmentPaths,
        ...(record.sendAs ? { service: record.sendAs } : {}),
      });
    } finally {
      if (cleanup) this.scheduleCleanup(cleanup);
    }
    log.debug({ ok: outcome.ok, ms: Date.now() - started }, 'handed to Messages');
    if (!outcome.ok) {
      // The tracker may already have found the row (it can appear before osascript exits); its view wins.
      if (record.phase === 'sending') this.fail(record, outcome.error);
      else log.warn({ error: outcome.error }, 'osascript failed after its row appeared');
      return;
    }
    record.handedAtMs ??= Date.now();
    if (record.phase === 'sending') this.journal.setPhase(record, 'handed');
    this.options.onChange(record);
    await this.journal.flush();
  }

  private fail(record: SendRecord, error: string): void {
    this.journal.addStep(record, { status: 'failed', at: new Date().toISOString(), error: error.slice(0, 2_000) });
    this.journal.setPhase(record, 'closed');
    this.options.onChange(record);
  }

  private scheduleCleanup(cleanup: () => Promise<void>): void {
    const run = () =>
      cleanup().catch((err: unknown) =>
        this.options.logger.warn({ err: (err as Error).message }, 'attachment cleanup failed'),
      );
    if (this.options.attachmentCleanupDelayMs <= 0) {
      void run();
      return;
    }
    const timer = setTimeout(() => {
      this.cleanups.delete(timer);
      void run();
    }, this.options.attachmentCleanupDelayMs);
    timer.unref();
    this.cleanups.set(timer, cleanup);
  }
}

import type { Logger } from './agent-logger.ts';
import type { SendOutcome } from './message-sender.ts';
import { formatDuration } from './operator-log.ts';

export interface MessagesWatchdogOptions {
  /** A send handed to Messages with no chat.db row after this long means Messages is stuck. */
  stuckAfterMs: number;
  /** Messages is restarted at most once per this interval. */
  restartIntervalMs: number;
  restart: () => Promise<SendOutcome | void>;
  logger: Logger;
}

/**
 * Notices a stuck Messages app: sends it took (osascript succeeded) that
 * produce no chat.db row within `stuckAfterMs`. The relay is then degraded: it
 * says so in its heartbeat and advertises no capacity, so the server gives its
 * work to other relays, and Messages is restarted at most once per
 * `restartIntervalMs`. It recovers when chat.db shows a new outgoing row, or
 * after a restart once no send is left waiting for its row.
 */
export class MessagesWatchdog {
  /** Why the relay is degraded; undefined when it is not. */
  reason: string | undefined;
  private cursorAtStuck = 0;
  private lastRestartMs: number | undefined;
  private restartedSinceStuck = false;

  constructor(private readonly options: MessagesWatchdogOptions) {}

  get degraded(): boolean {
    return this.reason !== undefined;
  }

  /**
   * `waitingSinceMs`: when each send still waiting for its row was handed to
   * Messages; `outgoingCursor`: the newest outgoing chat.db row seen. True when
   * the relay became degraded or recovered.
   */
  async check(waitingSinceMs: number[], outgoingCursor: number, nowMs = Date.now()): Promise<boolean> {
    const log = this.options.logger;
    if (!this.degraded) {
      const oldest = Math.min(...waitingSinceMs);
      if (!(nowMs - oldest > this.options.stuckAfterMs)) return false;
      this.reason = `Messages wrote no chat.db row for a send within ${formatDuration(this.options.stuckAfterMs)}; not taking new sends`;
      this.cursorAtStuck = outgoingCursor;
      this.restartedSinceStuck = false;
      log.warn({ event: 'messages.stuck', waiting: waitingSinceMs.length }, `degraded: ${this.reason}`);
      await this.maybeRestart(nowMs);
      return true;
    }
    if (outgoingCursor > this.cursorAtStuck || (this.restartedSinceStuck && waitingSinceMs.length === 0)) {
      this.reason = undefined;
      log.info({ event: 'messages.recovered' }, 'Messages writes rows again; taking sends again');
      return true;
    }
    await this.maybeRestart(nowMs);
    return false;
  }

  private async maybeRestart(nowMs: number): Promise<void> {
    if (this.lastRestartMs !== undefined && nowMs - this.lastRestartMs < this.options.restartIntervalMs) return;
    this.lastRestartMs = nowMs;
    this.restartedSinceStuck = true;
    const log = this.options.logger;
    log.warn(
      { event: 'messages.restart' },
      `restarting Messages (at most once per ${formatDuration(this.options.restartIntervalMs)})`,
    );
    try {
      const outcome = await this.options.restart();
      if (outcome && !outcome.ok)
        log.error({ event: 'messages.restart-failed', error: outcome.error }, 'restarting Messages failed');
    } catch (err) {
      log.error({ event: 'messages.restart-failed', error: (err as Error).message }, 'restarting Messages failed');
    }
  }
}

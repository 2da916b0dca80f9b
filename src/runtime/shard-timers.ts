import type { Logger } from '../log.ts';
import { timerAt, type DueTimer } from './due-timer.ts';
import type { ScriptedRedis } from './scripts.ts';
import type { Shard } from './stream-reader.ts';

/**
 * The delayed messages of the shards this worker owns, moved into their
 * streams when due: one wake-up, at the earliest time an owned shard's timer
 * is due (`Shard.dueAt`, from each move's answer and from wake-ups sent by
 * whoever adds an earlier timer); none while no timer is. Nothing polls.
 */
export class ShardTimers {
  private wake: DueTimer | undefined;
  private wakeAt = Infinity;
  private moving = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly cmd: ScriptedRedis,
    private readonly owned: ReadonlyMap<string, Shard>,
    private readonly log: Logger,
    /** Keeps a background round, so a stop can wait for it. */
    private readonly track: (round: Promise<void>) => void,
  ) {}

  /** A timer of `stream` is due at `dueAt`: the wake-up is moved closer if it is the shard's earliest. */
  due(stream: string, dueAt: number): void {
    const shard = this.owned.get(stream);
    if (!shard || !(dueAt < shard.dueAt)) return;
    shard.dueAt = dueAt;
    this.arm();
  }

  /** Every owned shard's timers looked at again (wake-ups may have been lost). */
  sweep(): void {
    for (const shard of this.owned.values()) shard.dueAt = 0;
    this.arm();
  }

  /** One wake-up, at the earliest time an owned shard's timer is due; none while no timer is. */
  arm(): void {
    if (this.stopped) return;
    let next = Infinity;
    for (const shard of this.owned.values()) if (shard.ready && !shard.draining) next = Math.min(next, shard.dueAt);
    if (next === this.wakeAt) return;
    this.wake?.cancel();
    this.wake = undefined;
    this.wakeAt = next;
    if (next === Infinity) return;
    this.wake = timerAt(next, () => {
      this.wake = undefined;
      this.wakeAt = Infinity;
      this.moveSoon();
    });
  }

  stop(): void {
    this.stopped = true;
    this.wake?.cancel();
  }

  private moveSoon(): void {
    if (this.moving) {
      this.again = true;
      return;
    }
    this.moving = true;
    const round = this.moveDue()
      .catch((err) => {
        this.log.warn({ err }, 'could not move due timers; trying again');
        for (const shard of this.owned.values()) shard.dueAt = Math.min(shard.dueAt, Date.now() + 500);
      })
      .finally(() => {
        this.moving = false;
        if (this.again) {
          this.again = false;
          this.moveSoon();
        } else this.arm();
      });
    this.track(round);
  }

  /** Moves the due timers of each owned shard whose wake-up time has come, and sets its next one. */
  private async moveDue(): Promise<void> {
    const now = Date.now();
    await Promise.all(
      [...this.owned.values()]
        .filter((shard) => shard.ready && !shard.draining && shard.dueAt <= now)
        .map(async (shard) => {
          // A wake-up that comes while the move runs lowers this again, and is kept.
          shard.dueAt = Infinity;
          try {
            const next = await this.cmd.moveDueTimers(shard.timers, shard.stream, now, 500);
            shard.dueAt = Math.min(shard.dueAt, next < 0 ? Infinity : next);
          } catch (err) {
            shard.dueAt = 0;
            throw err;
          }
        }),
    );
  }
}

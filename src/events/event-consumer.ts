import type { Logger } from '../log.ts';
import type { EventStream, ReadEvent } from './event-stream.ts';

/** How long a consumer waits before reading again after finding nothing new, on a stream whose reads do not wait for appends (bounds event-to-handling latency when idle). */
const idleReadMs = 20;
/** How long one read waits for an append on a stream whose reads can (an append ends it at once). */
const waitReadMs = 5_000;
/** After a failed batch, before the same events are read again. */
const failureBackoffMs = 1_000;
const batchSize = 256;

export interface EventConsumer {
  stop(): Promise<void>;
}

/**
 * Reads one consumer group of the event stream in a loop and acknowledges a
 * batch only after `handle` resolved for it: a crash or an error means the
 * batch is read again (at least once), so `handle` must be idempotent by
 * event id.
 */
export function consumeEvents(
  stream: EventStream,
  group: string,
  consumer: string,
  handle: (batch: ReadEvent[]) => Promise<void>,
  log: Logger,
): EventConsumer {
  let stopped = false;
  let wake: (() => void) | undefined;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  const loop = (async () => {
    while (!stopped) {
      try {
        const batch = await stream.read(group, consumer, batchSize, waitReadMs);
        if (batch.length === 0) {
          if (!stream.blocks) await pause(idleReadMs);
          continue;
        }
        await handle(batch);
        await stream.ack(
          group,
          batch.map((e) => e.position),
        );
      } catch (err) {
        if (stopped) break;
        log.warn({ err, group }, 'event batch failed; it will be read again');
        await pause(failureBackoffMs);
      }
    }
  })();
  return {
    async stop() {
      stopped = true;
      wake?.();
      stream.interrupt?.(group);
      await loop;
    },
  };
}

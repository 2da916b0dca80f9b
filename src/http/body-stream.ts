import type { HttpResponse } from '@trufflesuite/uws-js-unofficial';
import type { Responder } from './responder.ts';

/** Bytes a streamed body may hold in memory before the connection stops being read. */
const highWaterBytes = 1024 * 1024;

export class BodyAborted extends Error {
  constructor() {
    super('the client went away before the body was whole');
  }
}

/**
 * A request body read as it arrives (a route with `streamBody`): uWS hands
 * each chunk to `onData`, which is copied into a short queue; past
 * `highWaterBytes` not yet taken the connection is paused, and it is read
 * again once the consumer has taken the queue. Memory stays bounded by the
 * high-water mark and one read, whatever the body's size. A body nobody
 * reads stays paused until the answer (which closes the connection).
 */
export class BodyStream implements AsyncIterable<Buffer> {
  private readonly queue: Buffer[] = [];
  private queued = 0;
  private ended = false;
  private aborted = false;
  private wake: (() => void) | undefined;

  constructor(
    res: HttpResponse,
    private readonly responder: Responder,
  ) {
    responder.whenAborted(() => {
      this.aborted = true;
      this.notify();
    });
    res.onData((chunk, isLast) => {
      if (this.aborted) return;
      // uWS reuses the chunk's memory after this callback: copied.
      if (chunk.byteLength > 0) this.queue.push(Buffer.copyBytesFrom(new Uint8Array(chunk)));
      this.queued += chunk.byteLength;
      if (isLast) this.ended = true;
      if (isLast || this.queued >= highWaterBytes) responder.pauseReading();
      this.notify();
    });
    // Nothing is read until the handler asks.
    responder.pauseReading();
  }

  /** Whether the whole body was read: an answer given before closes the connection (the rest of it is never read). */
  get complete(): boolean {
    return this.ended && this.queue.length === 0;
  }

  /** Wakes the reader on the next turn of Node's loop: after a uWS callback Node runs no microtasks (responder.ts `writable`). */
  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    if (wake) setImmediate(wake);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Buffer> {
    for (;;) {
      const chunk = this.queue.shift();
      if (chunk) {
        this.queued -= chunk.length;
        yield chunk;
        continue;
      }
      if (this.aborted) throw new BodyAborted();
      if (this.ended) return;
      const waiting = new Promise<void>((resolve) => (this.wake = resolve));
      this.responder.resumeReading();
      await waiting;
    }
  }
}

import { STATUS_CODES } from 'node:http';
import type { HttpResponse } from '@trufflesuite/uws-js-unofficial';

/** Status lines made once each, not per answer. */
const statusLines = new Map<number, string>();
function statusLine(status: number): string {
  let line = statusLines.get(status);
  if (line === undefined) statusLines.set(status, (line = `${status} ${STATUS_CODES[status] ?? ''}`));
  return line;
}

/**
 * An answer's header fields as their sources hold them, written straight to
 * the connection in this order: the request id, the stages' (rate limit,
 * Allow), the reply's own, then the server's (Content-Type, Vary,
 * Content-Encoding). A field a later source names is written from that
 * source only, which is what merging them would give, without building the
 * merged set for every answer.
 */
export interface AnswerHead {
  reqId: string;
  stages?: Record<string, string> | undefined;
  reply?: Record<string, string> | undefined;
  server?: Record<string, string> | undefined;
}

function writeHead(res: HttpResponse, status: number, head: AnswerHead): void {
  const { stages, reply, server } = head;
  res.writeStatus(statusLine(status));
  const id = 'x-request-id';
  if (!named(stages, id) && !named(reply, id) && !named(server, id)) res.writeHeader(id, head.reqId);
  if (stages) for (const k in stages) if (!named(reply, k) && !named(server, k)) res.writeHeader(k, stages[k]!);
  if (reply) for (const k in reply) if (!named(server, k)) res.writeHeader(k, reply[k]!);
  if (server) for (const k in server) res.writeHeader(k, server[k]!);
}

const named = (fields: Record<string, string> | undefined, field: string): boolean =>
  fields !== undefined && Object.hasOwn(fields, field);

/** Wraps a uWS response so nothing is written after the client went away. */
export class Responder {
  aborted = false;
  done = false;
  private paused = false;
  /** What waits on the client (the rest of a body, room to write): woken when it goes away, so nothing started waits for ever. */
  private readonly onAbort: Array<() => void> = [];
  constructor(private readonly res: HttpResponse) {}

  /** The client went away (uWS's onAborted). */
  abort(): void {
    this.aborted = true;
    for (const wake of this.onAbort.splice(0)) wake();
  }

  /** Runs `wake` when the client goes away (at once if it has). */
  whenAborted(wake: () => void): void {
    if (this.aborted) wake();
    else this.onAbort.push(wake);
  }

  /**
   * Stops reading the connection once the request is complete, until it is
   * answered: uWS closes a connection on which a request arrives while the
   * previous answer is pending, so a pipelined request that comes in a later
   * read waits in the socket instead, and is answered in order.
   */
  pauseReading(): void {
    if (this.aborted || this.done || this.paused) return;
    this.paused = true;
    this.res.pause();
  }

  /** Reads the connection again (a streamed body the handler waits for); the answer resumes it too. */
  resumeReading(): void {
    if (this.paused) this.res.resume();
    this.paused = false;
  }

  send(status: number, head: AnswerHead, body: string | Buffer, closeConnection = false): void {
    if (this.aborted || this.done) return;
    this.done = true;
    this.res.cork(() => {
      this.resumeReading();
      writeHead(this.res, status, head);
      this.res.end(body, closeConnection);
    });
  }

  /**
   * Reading stays paused until the last chunk: uWS's resume() arms its 10 s
   * HTTP timeout, and a write that succeeds does not re-arm or clear it (only
   * a write that met backpressure does, through onWritable), so a stream that
   * outlasted it without meeting backpressure (a slow store's pages, or rows
   * compressed small enough for the socket buffers) was cut before its end.
   * Paused, the timeout stays off while chunks come, as for any pending
   * answer; a client that stops reading still meets the timeout through a
   * failed write.
   */
  async stream(status: number, head: AnswerHead, chunks: AsyncIterable<string | Buffer>): Promise<void> {
    if (this.aborted || this.done) return;
    this.done = true;
    this.res.cork(() => writeHead(this.res, status, head));
    try {
      for await (const chunk of chunks) {
        if (this.aborted) return;
        let ok = false;
        this.res.cork(() => {
          ok = this.res.write(chunk);
        });
        if (!ok) await this.writable();
      }
    } catch (err) {
      // The status line is out already: the only honest signal left is a connection cut before the end.
      if (!this.aborted) this.res.close();
      throw err;
    }
    if (this.aborted) return;
    this.res.cork(() => {
      this.resumeReading();
      this.res.end();
    });
  }
  /**
   * A streamed answer of a known length (a stored file): sent with
   * Content-Length through uWS's `tryEnd`, never compressed. A chunk the
   * socket does not take whole waits for `onWritable`, and its rest is
   * written from the offset the socket reached; the next chunk is read only
   * then, so memory holds one chunk whatever the length.
   */
  async streamSized(status: number, head: AnswerHead, chunks: AsyncIterable<Buffer>, length: number): Promise<void> {
    if (this.aborted || this.done) return;
    this.done = true;
    this.res.cork(() => writeHead(this.res, status, head));
    let finished = false;
    try {
      if (length === 0) finished = this.tryEnd(Buffer.alloc(0), 0);
      for await (const chunk of chunks) {
        let rest = chunk;
        while (!finished && !this.aborted) {
          const start = this.res.getWriteOffset();
          let ok = false;
          this.res.cork(() => {
            // As any answer: reading resumes as it ends (the last bytes), so the connection's next request is read.
            if (start + rest.length >= length) this.resumeReading();
            [ok, finished] = this.res.tryEnd(rest, length);
          });
          if (ok || finished) break;
          await this.writable();
          if (this.aborted) return;
          rest = rest.subarray(this.res.getWriteOffset() - start);
        }
        if (finished || this.aborted) break;
      }
      // Fewer bytes than announced: the client must not take a short file for a whole one.
      if (!finished && !this.aborted) this.res.close();
    } catch (err) {
      if (!this.aborted && !finished) this.res.close();
      throw err;
    }
  }

  /**
   * Until the socket takes more (or the client went away). uWS calls
   * `onWritable` from its own loop, after which Node runs no microtasks: a
   * promise settled there would wait for some other event to be noticed (a
   * stream whose next chunk is in memory, as GridFS's are, waited for ever).
   * Settled on the next turn of Node's loop instead.
   */
  private writable(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.res.onWritable(() => (setImmediate(resolve), true));
      this.whenAborted(resolve);
    });
  }

  private tryEnd(chunk: Buffer, length: number): boolean {
    let finished = false;
    this.res.cork(() => {
      this.resumeReading();
      [, finished] = this.res.tryEnd(chunk, length);
    });
    return finished;
  }
}

/** The request's body, up to `limit` bytes; reading pauses once it is whole, until the answer is written. */
export function readBody(
  res: HttpResponse,
  responder: Responder,
  limit: number,
): Promise<Buffer | 'too_large' | 'aborted'> {
  return new Promise((resolve) => {
    responder.whenAborted(() => resolve('aborted'));
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    res.onData((chunk, isLast) => {
      if (responder.aborted) return resolve('aborted');
      if (over) return;
      size += chunk.byteLength;
      if (size > limit) {
        over = true;
        return resolve('too_large');
      }
      // uWS reuses the chunk's memory after this callback: copy it (once; a body in one chunk, the usual, is not joined).
      chunks.push(Buffer.copyBytesFrom(new Uint8Array(chunk)));
      if (isLast) {
        responder.pauseReading();
        resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
      }
    });
  });
}

import http from 'node:http';
import net from 'node:net';

export interface RawExchange {
  /** Everything the server wrote, as latin1 text. */
  text: string;
  /** Status codes of the answers, in the order they came. */
  statuses: number[];
  /** The server closed the connection before `waitMs` ran out. */
  closed: boolean;
}

/**
 * Writes `data` in one go on a fresh connection (an array: one write per
 * part, `partGapMs` apart) and collects what comes back until the server
 * closes or `waitMs` passes: for requests a fetch client would refuse to send
 * (conflicting framing, pipelining, malformed heads).
 */
export function rawExchange(
  base: string,
  data: string | Buffer | (string | Buffer)[],
  waitMs = 1_500,
  partGapMs = 50,
): Promise<RawExchange> {
  const { hostname, port } = new URL(base);
  const parts = Array.isArray(data) ? data : [data];
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      parts.forEach((part, i) => setTimeout(() => socket.writable && socket.write(part), i * partGapMs));
    });
    const chunks: Buffer[] = [];
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      resolve({ text, statuses: statusesOf(text), closed });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('close', () => finish(true));
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' ? undefined : reject(err)));
  });
}

/** A request head and body as they go on the wire. */
export function httpRequest(method: string, path: string, headers: [string, string][], body = ''): string {
  return `${method} ${path} HTTP/1.1\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${body}`;
}

/** Walks the answers one after the other by their Content-Length (the server never chunks these). */
function statusesOf(text: string): number[] {
  const statuses: number[] = [];
  let at = 0;
  while (at < text.length) {
    const headEnd = text.indexOf('\r\n\r\n', at);
    const status = /^HTTP\/1\.1 (\d{3}) /.exec(text.slice(at, at + 20));
    if (headEnd < 0 || !status) break;
    statuses.push(Number(status[1]));
    const length = /\r\ncontent-length: *(\d+)/i.exec(text.slice(at, headEnd + 2));
    at = headEnd + 4 + Number(length?.[1] ?? 0);
  }
  return statuses;
}

export interface RawAnswer {
  status: number;
  /** The head as sent, header names as the server wrote them. */
  head: string;
  body: Buffer;
  /** The answer says the server closes the connection after it. */
  closes: boolean;
}

/**
 * One keep-alive connection on which requests go one at a time, each
 * written raw and read back by its framing (Content-Length or chunked): for
 * request shapes a fetch client would refuse to send, mixed with ordinary
 * ones on the same connection.
 */
export class RawConnection {
  private received = Buffer.alloc(0);
  private wake: (() => void) | undefined;
  /** The server closed the connection (or it failed). */
  ended = false;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (chunk) => {
      this.received = Buffer.concat([this.received, chunk]);
      this.wake?.();
    });
    const end = () => {
      this.ended = true;
      this.wake?.();
    };
    socket.on('close', end);
    socket.on('error', end);
  }

  static open(base: string): Promise<RawConnection> {
    const { hostname, port } = new URL(base);
    return new Promise((resolve, reject) => {
      const socket = net.connect(Number(port), hostname, () => {
        socket.off('error', reject);
        resolve(new RawConnection(socket));
      });
      socket.once('error', reject);
    });
  }

  /** Writes one request and reads its answer; undefined when the connection ends (or `waitMs` passes) before a whole answer came. */
  async exchange(data: string | Buffer, waitMs = 10_000): Promise<RawAnswer | undefined> {
    if (this.ended) return undefined;
    this.socket.write(data);
    const deadline = Date.now() + waitMs;
    for (;;) {
      const answer = this.takeAnswer();
      if (answer) return answer;
      if (this.ended || Date.now() >= deadline) return undefined;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deadline - Date.now());
        this.wake = () => (clearTimeout(timer), resolve());
      });
      this.wake = undefined;
    }
  }

  close(): void {
    this.socket.destroy();
  }

  private takeAnswer(): RawAnswer | undefined {
    const headEnd = this.received.indexOf('\r\n\r\n');
    if (headEnd < 0) return undefined;
    const head = this.received.subarray(0, headEnd).toString('latin1');
    const status = /^HTTP\/1\.1 (\d{3})/.exec(head);
    if (!status) throw new Error(`not an HTTP answer: ${JSON.stringify(head.slice(0, 80))}`);
    const bodyAt = headEnd + 4;
    let body: Buffer;
    let end: number;
    if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
      const chunks: Buffer[] = [];
      let at = bodyAt;
      for (;;) {
        const lineEnd = this.received.indexOf('\r\n', at);
        if (lineEnd < 0) return undefined;
        const size = parseInt(this.received.subarray(at, lineEnd).toString('latin1'), 16);
        if (this.received.length < lineEnd + 2 + size + 2) return undefined;
        chunks.push(this.received.subarray(lineEnd + 2, lineEnd + 2 + size));
        at = lineEnd + 2 + size + 2;
        if (size === 0) break;
      }
      body = Buffer.concat(chunks);
      end = at;
    } else {
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (this.received.length < bodyAt + length) return undefined;
      body = this.received.subarray(bodyAt, bodyAt + length);
      end = bodyAt + length;
    }
    this.received = this.received.subarray(end);
    return { status: Number(status[1]), head, body, closes: /\r\nconnection: *close/i.test(head) };
  }
}

/** A GET read to its end by node's http client, which does not decompress: the bytes on the wire; a connection cut before the end rejects. */
export function rawGet(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; raw: Buffer }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, raw: Buffer.concat(chunks) }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/**
 * One kept-alive connection that writes each request in one synchronous
 * write, one request at a time: a client whose request is on the wire the
 * moment it is made, as a remote client's is, where fetch in the same
 * process would first wait for turns of the event loop it shares with the
 * server.
 */
export async function keptConnection(base: string): Promise<{
  request(
    method: string,
    path: string,
    headers: [string, string][],
    body?: string,
  ): Promise<{ status: number; body: string }>;
  close(): void;
}> {
  const { hostname, port } = new URL(base);
  const socket = net.connect(Number(port), hostname);
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let buffered = Buffer.alloc(0);
  let waiting: ((answer: { status: number; body: string }) => void) | undefined;
  socket.on('data', (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    const headEnd = buffered.indexOf('\r\n\r\n');
    if (headEnd < 0 || !waiting) return;
    const head = buffered.subarray(0, headEnd).toString('latin1');
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    if (buffered.length < headEnd + 4 + length) return;
    const body = buffered.subarray(headEnd + 4, headEnd + 4 + length).toString('utf8');
    buffered = buffered.subarray(headEnd + 4 + length);
    const answer = waiting;
    waiting = undefined;
    answer({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), body });
  });
  return {
    request(method, path, headers, body = '') {
      if (waiting) throw new Error('one request at a time');
      const answered = new Promise<{ status: number; body: string }>((resolve) => (waiting = resolve));
      const all: [string, string][] = [
        ['Host', hostname],
        ['Content-Length', String(Buffer.byteLength(body))],
        ...headers,
      ];
      socket.write(httpRequest(method, path, all, body));
      return answered;
    },
    close: () => socket.destroy(),
  };
}

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
export function rawExchange(base: string, data: string | Buffer | (string | Buffer)[], waitMs = 1_500, partGapMs = 50): Promise<RawExchange> {
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

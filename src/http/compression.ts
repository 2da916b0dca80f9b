import { once } from 'node:events';
import { promisify } from 'node:util';
import zlib from 'node:zlib';

export type ContentEncoding = 'br' | 'gzip';

/**
 * Brotli at quality 4 compresses answers better than gzip's default in less
 * time; its default quality (11) is for static files: 58 ms for a 52 KB page
 * of messages and 3.7 s for a 720 KB export (npm run bench:compression).
 */
const brotliParams = { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4 } };
const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);

/** The encoding to answer in, from Accept-Encoding (RFC 9110 12.5.3): br before gzip at equal weight, never one with q=0. */
export function negotiateEncoding(acceptEncoding: string | undefined): ContentEncoding | undefined {
  if (!acceptEncoding) return undefined;
  const weights = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    if (!name) continue;
    const q = params.map((p) => /^\s*q=([0-9.]+)\s*$/.exec(p)).find(Boolean);
    weights.set(name, q ? Number(q[1]) : 1);
  }
  const weightOf = (name: ContentEncoding) =>
    weights.get(name) ?? (name === 'gzip' ? weights.get('x-gzip') : undefined) ?? weights.get('*') ?? 0;
  const best = (['br', 'gzip'] as const).filter((e) => weightOf(e) > 0).sort((a, b) => weightOf(b) - weightOf(a))[0];
  return best;
}

export function compressBody(body: string | Buffer, encoding: ContentEncoding): Promise<Buffer> {
  return encoding === 'br' ? brotli(body, brotliParams) : gzip(body);
}

/** A streamed answer compressed as it is written; each source chunk is flushed, so the client sees rows as they come. */
export async function* compressChunks(
  chunks: AsyncIterable<string | Buffer>,
  encoding: ContentEncoding,
): AsyncGenerator<Buffer> {
  const z = encoding === 'br' ? zlib.createBrotliCompress(brotliParams) : zlib.createGzip();
  const out: Buffer[] = [];
  z.on('data', (chunk: Buffer) => out.push(chunk));
  const flushed = () => new Promise<void>((resolve) => z.flush(() => resolve()));
  try {
    for await (const chunk of chunks) {
      if (!z.write(chunk)) await once(z, 'drain');
      await flushed();
      if (out.length > 0) yield Buffer.concat(out.splice(0));
    }
    z.end();
    await once(z, 'end');
    if (out.length > 0) yield Buffer.concat(out.splice(0));
  } finally {
    z.destroy();
  }
}

export interface EncodedAnswer {
  body?: string | Buffer;
  stream?: AsyncIterable<string | Buffer>;
}

/**
 * Compresses an answer when the client accepts it: a body of at least
 * `minBytes`, or any stream (its size is not known up front). Sets
 * Content-Encoding and Vary on `headers`.
 */
export async function encodeAnswer(
  acceptEncoding: string | undefined,
  headers: Record<string, string>,
  answer: EncodedAnswer,
  minBytes: number,
): Promise<EncodedAnswer> {
  headers.vary = headers.vary ? `${headers.vary}, Accept-Encoding` : 'Accept-Encoding';
  const encoding = negotiateEncoding(acceptEncoding);
  if (!encoding || headers['content-encoding']) return answer;
  if (answer.stream) {
    headers['content-encoding'] = encoding;
    return { stream: compressChunks(answer.stream, encoding) };
  }
  if (answer.body === undefined || Buffer.byteLength(answer.body) < minBytes) return answer;
  // A gzip file (the relay agent's tarball) is sent as it is: compressing it again gains nothing.
  if (headers['content-type'] === 'application/gzip') return answer;
  headers['content-encoding'] = encoding;
  return { body: await compressBody(answer.body, encoding) };
}

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

/**
 * The encoding an answer goes out in: one the client accepts, for any stream
 * (its size is not known up front) or a body of at least `minBytes`; none
 * when the reply encoded it itself. Negotiated only when it could matter.
 */
export function answerEncoding(
  acceptEncoding: string | undefined,
  replyFields: Record<string, string> | undefined,
  answer: { stream: AsyncIterable<string | Buffer> } | { body: string | Buffer },
  minBytes: number,
): ContentEncoding | undefined {
  if (!acceptEncoding || replyFields?.['content-encoding']) return undefined;
  // A gzip file (the relay agent's tarball) is sent as it is: compressing it again gains nothing.
  if (replyFields?.['content-type'] === 'application/gzip') return undefined;
  if ('body' in answer && Buffer.byteLength(answer.body) < minBytes) return undefined;
  return negotiateEncoding(acceptEncoding);
}

const jsonType = 'application/json; charset=utf-8';
const varyAccept = 'Accept-Encoding';

/**
 * The fields the server adds to an answer with content: Content-Type (JSON)
 * when the reply names none, Vary with Accept-Encoding added to the reply's
 * own, Content-Encoding when compressed. Every combination but a reply with a
 * Vary of its own is a set made once, so the usual answer builds none.
 */
export function contentFields(
  replyFields: Record<string, string> | undefined,
  encoding: ContentEncoding | undefined,
  defaultJsonType: boolean,
): Record<string, string> {
  const vary = replyFields?.vary;
  const typed = defaultJsonType && !replyFields?.['content-type'];
  if (vary) return contentFieldSet(typed, encoding, `${vary}, ${varyAccept}`);
  return staticContentFields[typed ? 1 : 0][encoding ?? 'identity'];
}

function contentFieldSet(typed: boolean, encoding: ContentEncoding | undefined, vary: string): Record<string, string> {
  const fields: Record<string, string> = {};
  if (typed) fields['content-type'] = jsonType;
  fields.vary = vary;
  if (encoding) fields['content-encoding'] = encoding;
  return fields;
}

const staticContentFields = [false, true].map((typed) => ({
  identity: Object.freeze(contentFieldSet(typed, undefined, varyAccept)),
  br: Object.freeze(contentFieldSet(typed, 'br', varyAccept)),
  gzip: Object.freeze(contentFieldSet(typed, 'gzip', varyAccept)),
})) as [
  Record<ContentEncoding | 'identity', Record<string, string>>,
  Record<ContentEncoding | 'identity', Record<string, string>>,
];

import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';

export const maxAttachmentBytes = 100 * 1024 * 1024;

export interface DownloadOptions {
  /** Directory the per-message temporary folders are made in. */
  dir: string;
  maxBytes?: number;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

export type DownloadResult = { ok: true; paths: string[]; cleanup: () => Promise<void> } | { ok: false; error: string };

/**
 * Downloads a send's attachment URLs into one fresh folder, so Messages gets a
 * local file path and the caller deletes everything with one `cleanup()`.
 * Only http and https; a file larger than `maxBytes` (by Content-Length or
 * while streaming) fails the whole send.
 */
export async function downloadAttachments(urls: string[], options: DownloadOptions): Promise<DownloadResult> {
  const maxBytes = options.maxBytes ?? maxAttachmentBytes;
  const doFetch = options.fetch ?? fetch;
  await mkdir(options.dir, { recursive: true, mode: 0o700 });
  const folder = await mkdtemp(join(options.dir, 'send-'));
  const cleanup = () => rm(folder, { recursive: true, force: true });
  const paths: string[] = [];
  try {
    for (const [index, raw] of urls.entries()) {
      let url: URL;
      try {
        url = new URL(raw);
      } catch {
        await cleanup();
        return { ok: false, error: `attachment ${index + 1} is not a URL` };
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        await cleanup();
        return { ok: false, error: `attachment ${index + 1}: only http and https URLs are fetched` };
      }
      const path = join(folder, `${index + 1}-${fileNameFor(url)}`);
      const error = await downloadOne(doFetch, url, path, maxBytes, options.timeoutMs ?? 120_000);
      if (error) {
        await cleanup();
        return { ok: false, error: `attachment ${index + 1}: ${error}` };
      }
      paths.push(path);
    }
  } catch (err) {
    await cleanup();
    throw err;
  }
  return { ok: true, paths, cleanup };
}

async function downloadOne(
  doFetch: typeof fetch,
  url: URL,
  path: string,
  maxBytes: number,
  timeoutMs: number,
): Promise<string | undefined> {
  let response: Response;
  try {
    response = await doFetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: 'follow' });
  } catch (err) {
    return `download failed: ${(err as Error).message}`;
  }
  if (!response.ok || !response.body) return `download failed with HTTP ${response.status}`;
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    await response.body.cancel().catch(() => undefined);
    return `larger than ${maxBytes} bytes`;
  }
  let seen = 0;
  const limit = new Transform({
    transform(chunk: Buffer, _enc, next) {
      seen += chunk.length;
      if (seen > maxBytes) next(new TooLarge());
      else next(null, chunk);
    },
  });
  try {
    await pipeline(
      Readable.fromWeb(response.body as import('node:stream/web').ReadableStream),
      limit,
      createWriteStream(path, { mode: 0o600 }),
    );
  } catch (err) {
    if (err instanceof TooLarge) return `larger than ${maxBytes} bytes`;
    return `download failed: ${(err as Error).message}`;
  }
  return undefined;
}

class TooLarge extends Error {}

/** The URL's last path segment, reduced to characters every file system takes; Messages shows it as the file name. */
function fileNameFor(url: URL): string {
  let path = url.pathname;
  try {
    path = decodeURIComponent(path);
  } catch {
    // a malformed escape keeps the raw segment
  }
  const last = basename(path)
    .replace(/[^A-Za-z0-9._-]/g, '_')
    .replace(/^\.+/, '');
  return (last || 'attachment').slice(-100);
}

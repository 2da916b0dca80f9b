import { open, readFile, rename, stat, writeFile as writeText } from 'node:fs/promises';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { attachmentUploadPath, type RelayCredential } from 'relaybox-relay-protocol/frames.ts';
import type { Logger } from './agent-logger.ts';
import { ReconnectBackoff } from './reconnect-backoff.ts';

/** A received attachment to upload: its chat.db guid and where Messages keeps it. */
export interface UploadJob {
  guid: string;
  path: string;
}

interface JournalEntry {
  path: string;
  /** Set once the server has it (or refused it for good): never uploaded again. */
  doneAt?: string;
  attempts: number;
}

/** Finished uploads remembered (so a row read again uploads nothing), newest kept. */
const doneRemembered = 2_000;
/** A server that does not know the attachment (404) is asked this many times, then the upload is dropped. */
const maxUnknownAttempts = 8;

export interface UploaderOptions {
  /** `<state-dir>/uploads.json`: what is still to upload, across restarts. */
  journalPath: string;
  /** The server's ws(s) URL: uploads go to the same host over http(s). */
  serverUrl: string;
  credential: () => RelayCredential | undefined;
  logger: Logger;
  retryBaseMs?: number;
  retryCapMs?: number;
}

/** Where Messages keeps a file: `~` is the home folder. */
export function localPath(path: string): string {
  return path.startsWith('~/') ? join(homedir(), path.slice(2)) : path;
}

/**
 * Uploads each received attachment's bytes once, after the server stored its
 * row (the row's `ack`): streamed from the file into one HTTP PUT with the
 * relay credential, one upload at a time, so memory holds a chunk whatever
 * the size. What is still to upload is kept in a journal file, so a restart
 * goes on where it stopped and never uploads a finished one again. A failed
 * upload (network, a 5xx) is tried again with exponential backoff; the
 * server's final answers (stored, too large, failed) end it.
 */
export class AttachmentUploader {
  private entries = new Map<string, JournalEntry>();
  private readonly backoff: ReconnectBackoff;
  private running: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private saving: Promise<void> = Promise.resolve();

  constructor(private readonly opts: UploaderOptions) {
    this.backoff = new ReconnectBackoff(opts.retryBaseMs ?? 1_000, opts.retryCapMs ?? 5 * 60_000);
  }

  async load(): Promise<void> {
    try {
      const stored = JSON.parse(await readFile(this.opts.journalPath, 'utf8')) as Record<string, JournalEntry>;
      this.entries = new Map(Object.entries(stored));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }

  get pending(): number {
    return [...this.entries.values()].filter((e) => !e.doneAt).length;
  }

  /** Adds the attachments of acknowledged rows (those known already are left as they are) and starts uploading. */
  async add(jobs: UploadJob[]): Promise<void> {
    let added = false;
    for (const job of jobs) {
      if (this.entries.has(job.guid)) continue;
      this.entries.set(job.guid, { path: job.path, attempts: 0 });
      added = true;
    }
    if (added) await this.save();
    this.wake();
  }

  /** Uploads what is pending now (a connection came up, a row was acked). */
  wake(): void {
    if (this.stopped || this.running) return;
    clearTimeout(this.timer);
    this.running = this.drain().finally(() => (this.running = undefined));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    await this.saving;
  }

  private async drain(): Promise<void> {
    for (const [guid, entry] of this.entries) {
      if (this.stopped) return;
      if (entry.doneAt) continue;
      const credential = this.opts.credential();
      if (!credential) return;
      entry.attempts += 1;
      const outcome = await this.uploadOne(guid, entry, credential).catch((err: Error): Outcome => ({
        retry: true,
        message: err.message,
      }));
      if (outcome.retry) {
        const delay = this.backoff.nextDelayMs();
        this.opts.logger.warn(
          { event: 'attachment.upload-retry', guid, attempt: entry.attempts, delayMs: delay, err: outcome.message },
          `uploading an attachment failed (${outcome.message}); trying again in ${delay} ms`,
        );
        await this.save();
        this.timer = setTimeout(() => this.wake(), delay);
        return;
      }
      this.backoff.reset();
      entry.doneAt = new Date().toISOString();
      this.opts.logger.info(
        {
          event: outcome.status === 200 ? 'attachment.uploaded' : 'attachment.refused',
          guid,
          status: outcome.status,
          attempts: entry.attempts,
        },
        outcome.message,
      );
      this.forgetOldest();
      await this.save();
    }
  }

  private async uploadOne(guid: string, entry: JournalEntry, credential: RelayCredential): Promise<Outcome> {
    const path = localPath(entry.path);
    const found = await stat(path).catch(() => undefined);
    const unavailable = found?.isFile() ? undefined : 'the file is not on the Mac (not downloaded, or deleted)';
    const answer = await this.put(guid, credential, unavailable ? undefined : { path, size: found!.size }, unavailable);
    const { status } = answer;
    if (status === 200) return { retry: false, status, message: 'attachment uploaded' };
    // Final: larger than the server keeps, or failed before (both recorded `failed` there).
    if (status === 413 || status === 409)
      return { retry: false, status, message: `the server refused the attachment: ${answer.detail}` };
    if (status === 404 && entry.attempts >= maxUnknownAttempts)
      return { retry: false, status, message: 'the server does not know the attachment; dropped' };
    return { retry: true, message: `HTTP ${status}: ${answer.detail}` };
  }

  /** One PUT: the file streamed as the body (its backpressure is the socket's), or none with the reason it cannot come. */
  private put(
    guid: string,
    credential: RelayCredential,
    file: { path: string; size: number } | undefined,
    unavailable: string | undefined,
  ): Promise<{ status: number; detail: string }> {
    const url = new URL(`${attachmentUploadPath}/${encodeURIComponent(guid)}`, uploadOrigin(this.opts.serverUrl));
    const headers: Record<string, string> = {
      authorization: `Bearer ${credential.relayId}:${credential.secret}`,
      'content-type': 'application/octet-stream',
      'content-length': String(file?.size ?? 0),
    };
    if (unavailable) headers['x-relaybox-unavailable'] = unavailable;
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const req = send(url, { method: 'PUT', headers, timeout: 120_000 });
      req.on('timeout', () => req.destroy(new Error('the upload timed out')));
      req.on('response', (res: IncomingMessage) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text = (text + c).slice(0, 4_000)));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, detail: detailOf(text) }));
        res.on('error', reject);
      });
      req.on('error', reject);
      if (!file) return void req.end();
      sendFile(file.path, req).catch((err: Error) => {
        // The server may answer (413) and close before the whole body went: its answer counts, not the cut write.
        if (!req.destroyed) req.destroy(err);
      });
    });
  }

  private forgetOldest(): void {
    const done = [...this.entries].filter(([, e]) => e.doneAt);
    for (const [guid] of done.slice(0, Math.max(0, done.length - doneRemembered))) this.entries.delete(guid);
  }

  /** Atomic, one write after another. */
  private save(): Promise<void> {
    const snapshot = JSON.stringify(Object.fromEntries(this.entries));
    const path = this.opts.journalPath;
    this.saving = this.saving.then(async () => {
      const tmp = `${path}.${process.pid}.tmp`;
      await writeText(tmp, snapshot, { mode: 0o600 });
      await rename(tmp, path);
    });
    return this.saving;
  }
}

/** Bytes of a file read at a time, into one of two buffers used over and over. */
const chunkBytes = 64 * 1024;

/**
 * Writes a file into a request through two buffers, each read into again
 * only once the socket has sent what it held: the agent's memory holds 128
 * KiB of the file at any time, and makes no garbage per chunk (a fresh
 * buffer per read piles up until the collector runs, tens of megabytes for
 * a large file).
 */
async function sendFile(path: string, req: ClientRequest): Promise<void> {
  const file = await open(path, 'r');
  const buffers = [Buffer.allocUnsafe(chunkBytes), Buffer.allocUnsafe(chunkBytes)];
  const sent: Array<Promise<void>> = [Promise.resolve(), Promise.resolve()];
  try {
    for (let turn = 0; ; turn = 1 - turn) {
      await sent[turn];
      if (req.destroyed) return;
      const { bytesRead } = await file.read(buffers[turn]!, 0, chunkBytes, null);
      if (bytesRead === 0) break;
      sent[turn] = new Promise<void>((done, fail) =>
        req.write(buffers[turn]!.subarray(0, bytesRead), (err) => (err ? fail(err) : done())),
      );
      // A failed write fails the request itself; the promise's rejection is read there.
      sent[turn]!.catch(() => undefined);
    }
    await Promise.all(sent);
    req.end();
  } finally {
    await file.close();
  }
}

type Outcome = { retry: true; message: string } | { retry: false; status: number; message: string };

/** The http(s) origin of a ws(s) server URL. */
export function uploadOrigin(serverUrl: string): string {
  const url = new URL(serverUrl);
  url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
  return url.origin;
}

function detailOf(text: string): string {
  try {
    const problem = JSON.parse(text) as { detail?: string; message?: string };
    return problem.detail ?? problem.message ?? text.slice(0, 200);
  } catch {
    return text.slice(0, 200);
  }
}

import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/**
 * Files too large for a document (the bytes of received attachments): the
 * embedded store keeps them in a directory of its data dir, MongoDB in a
 * GridFS bucket. A file is written once under a key the store makes, read
 * as a stream of chunks and never changed; memory stays bounded by a chunk
 * whatever the file's size.
 */
export interface FileStore {
  /**
   * Writes `source` as a new file. Over `maxBytes` it stops reading, keeps
   * nothing and throws `FileTooLarge`; a failed read keeps nothing either.
   */
  put(source: AsyncIterable<Buffer>, opts: { maxBytes: number; name: string }): Promise<StoredFile>;
  /** The file's bytes, or undefined when there is no file under `key`. */
  open(key: string): Promise<{ size: number; chunks: AsyncIterable<Buffer> } | undefined>;
  delete(key: string): Promise<void>;
}

export interface StoredFile {
  key: string;
  size: number;
  sha256: string;
}

export class FileTooLarge extends Error {
  constructor(readonly maxBytes: number) {
    super(`larger than ${maxBytes} bytes`);
  }
}

/** Counts and hashes what passes, and fails past `maxBytes`: every backend's writes go through one. */
export class Measured extends Transform {
  size = 0;
  private readonly hash = createHash('sha256');
  constructor(private readonly maxBytes: number) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, next: (err?: Error | null, data?: Buffer) => void): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) return next(new FileTooLarge(this.maxBytes));
    this.hash.update(chunk);
    next(null, chunk);
  }
  digest(): string {
    return this.hash.digest('hex');
  }
}

/** Pipes `source` through a `Measured` into `sink`; the measure comes back once the sink has it all. */
export async function measuredCopy(source: AsyncIterable<Buffer>, sink: Writable, maxBytes: number): Promise<Measured> {
  const measured = new Measured(maxBytes);
  await pipeline(Readable.from(source, { objectMode: false }), measured, sink);
  return measured;
}

const keyPattern = /^[a-f0-9]{32}$/;

/** The embedded default: one file per key in `dir`, written under a temporary name and renamed once whole. */
export class DirectoryFiles implements FileStore {
  constructor(private readonly dir: string) {}

  async put(source: AsyncIterable<Buffer>, opts: { maxBytes: number }): Promise<StoredFile> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const key = randomBytes(16).toString('hex');
    const partial = join(this.dir, `${key}.part`);
    try {
      const measured = await measuredCopy(source, createWriteStream(partial, { mode: 0o600 }), opts.maxBytes);
      await rename(partial, join(this.dir, key));
      return { key, size: measured.size, sha256: measured.digest() };
    } catch (err) {
      await rm(partial, { force: true });
      throw err;
    }
  }

  async open(key: string) {
    if (!keyPattern.test(key)) return undefined;
    const path = join(this.dir, key);
    const found = await stat(path).catch(() => undefined);
    if (!found?.isFile()) return undefined;
    return { size: found.size, chunks: createReadStream(path, { highWaterMark: 256 * 1024 }) };
  }

  async delete(key: string): Promise<void> {
    if (keyPattern.test(key)) await rm(join(this.dir, key), { force: true });
  }
}

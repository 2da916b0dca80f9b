import { GridFSBucket, ObjectId, type Binary, type Collection, type Db } from 'mongodb';
import { measuredCopy, type FileStore, type StoredFile } from './file-store.ts';

const chunkBytes = 255 * 1024;
/** Chunks read per round trip: about 1 MB in memory at a time. */
const chunksPerBatch = 4;

/**
 * Files in a GridFS bucket (`<bucket>.files`, `<bucket>.chunks`): on MongoDB
 * and on FerretDB alike, which store them as ordinary collections. Each put
 * is a new file id, so an upload cut short and tried again never meets the
 * chunks of the first; those are deleted when the put fails.
 */
export class GridFsFiles implements FileStore {
  private readonly bucket: GridFSBucket;
  private readonly chunks: Collection<{ files_id: ObjectId; n: number; data: Binary }>;

  constructor(db: Db, bucketName: string) {
    this.bucket = new GridFSBucket(db, { bucketName, chunkSizeBytes: chunkBytes });
    this.chunks = db.collection(`${bucketName}.chunks`);
  }

  async put(source: AsyncIterable<Buffer>, opts: { maxBytes: number; name: string }): Promise<StoredFile> {
    const upload = this.bucket.openUploadStream(opts.name);
    try {
      const measured = await measuredCopy(source, upload, opts.maxBytes);
      return { key: upload.id.toHexString(), size: measured.size, sha256: measured.digest() };
    } catch (err) {
      await this.bucket.delete(upload.id).catch(() => undefined);
      throw err;
    }
  }

  async open(key: string) {
    if (!ObjectId.isValid(key) || key.length !== 24) return undefined;
    const id = new ObjectId(key);
    const [file] = await this.bucket.find({ _id: id }, { limit: 1 }).toArray();
    if (!file) return undefined;
    return { size: file.length, chunks: this.read(id, file.length) };
  }

  /**
   * The file's chunks in order, a few per round trip: the driver's download
   * stream takes them in batches as large as the server sends (FerretDB
   * sends up to 16 MB at once), which would hold most of a file in memory.
   */
  private async *read(id: ObjectId, length: number): AsyncGenerator<Buffer> {
    const cursor = this.chunks.find({ files_id: id }, { batchSize: chunksPerBatch }).sort({ n: 1 });
    let expected = 0;
    let sent = 0;
    try {
      for await (const chunk of cursor) {
        if (chunk.n !== expected) throw new Error(`GridFS file ${id.toHexString()}: chunk ${expected} is missing`);
        expected += 1;
        const data = chunk.data.buffer;
        sent += data.length;
        yield Buffer.from(data.buffer, data.byteOffset, data.byteLength);
      }
    } finally {
      await cursor.close();
    }
    if (sent !== length) throw new Error(`GridFS file ${id.toHexString()}: ${sent} bytes of ${length}`);
  }

  async delete(key: string): Promise<void> {
    if (!ObjectId.isValid(key) || key.length !== 24) return;
    await this.bucket.delete(new ObjectId(key)).catch(() => undefined);
  }
}

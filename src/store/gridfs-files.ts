import { GridFSBucket, ObjectId, type Db } from 'mongodb';
import { measuredCopy, type FileStore, type StoredFile } from './file-store.ts';

/**
 * Files in a GridFS bucket (`<bucket>.files`, `<bucket>.chunks`): on MongoDB
 * and on FerretDB alike, which store them as ordinary collections. Each put
 * is a new file id, so an upload cut short and tried again never meets the
 * chunks of the first; those are deleted when the put fails.
 */
export class GridFsFiles implements FileStore {
  private readonly bucket: GridFSBucket;

  constructor(db: Db, bucketName: string) {
    this.bucket = new GridFSBucket(db, { bucketName, chunkSizeBytes: 255 * 1024 });
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
    return { size: file.length, chunks: this.bucket.openDownloadStream(id) };
  }

  async delete(key: string): Promise<void> {
    if (!ObjectId.isValid(key) || key.length !== 24) return;
    await this.bucket.delete(new ObjectId(key)).catch(() => undefined);
  }
}

// @ts-check
// Plain JavaScript, shared by the store and its checkpoint worker (a worker thread does not get the TypeScript loader under every way the service is started).
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { endianness } from 'node:os';

const walHeaderBytes = 32;
const frameHeaderBytes = 24;
const little = endianness() === 'LE';

/**
 * How much the write-ahead log holds, read from SQLite's WAL index (the
 * `-shm` file beside it): the header's `mxFrame`, the last valid frame
 * (https://www.sqlite.org/walformat.html, "The WAL-Index Header": a u32 at
 * byte 16, in the machine's byte order, after `isInit` at byte 12 and the
 * page size at byte 14). The log file itself is not cut back when SQLite
 * starts it over (so no commit pays for growing it again), which makes its
 * size the most it ever held, not what it holds. Before the index exists,
 * or should it not read as one, the file's size stands in (never less than
 * what the log holds).
 */
export class WalIndex {
  /** @param {string} databasePath */
  constructor(databasePath) {
    this.wal = `${databasePath}-wal`;
    this.shm = `${databasePath}-shm`;
    /** @type {number | undefined} */
    this.fd = undefined;
    this.header = Buffer.alloc(20);
  }

  /** Bytes of log not yet started over: header and frames up to the last valid one. */
  bytes() {
    const held = this.held();
    if (held) return held.frames === 0 ? 0 : walHeaderBytes + held.frames * (held.page + frameHeaderBytes);
    return statSync(this.wal, { throwIfNoEntry: false })?.size ?? 0;
  }

  /** Frames of log not yet started over (`mxFrame`); 0 when unknown. */
  frames() {
    return this.held()?.frames ?? 0;
  }

  /** The index header's page size and last valid frame; undefined before the index exists or should it not read as one. */
  held() {
    try {
      this.fd ??= openSync(this.shm, 'r');
      if (readSync(this.fd, this.header, 0, 20, 0) === 20 && this.header[12] === 1) {
        const pageField = little ? this.header.readUInt16LE(14) : this.header.readUInt16BE(14);
        const page = pageField === 1 ? 65_536 : pageField;
        const frames = little ? this.header.readUInt32LE(16) : this.header.readUInt32BE(16);
        if (page >= 512) return { page, frames };
      }
    } catch {
      // no index yet
    }
    return undefined;
  }

  /** Frames of the log folded back into the database so far (`nBackfill`, the u32 at byte 96 of the index, after both copies of its header); 0 when unknown. */
  backfilled() {
    try {
      this.fd ??= openSync(this.shm, 'r');
      if (readSync(this.fd, this.header, 0, 4, 96) === 4)
        return little ? this.header.readUInt32LE(0) : this.header.readUInt32BE(0);
    } catch {
      // no index yet
    }
    return 0;
  }

  close() {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

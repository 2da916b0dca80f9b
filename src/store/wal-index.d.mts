/** See wal-index.mjs. */
export declare class WalIndex {
  constructor(databasePath: string);
  /** Bytes of log not yet started over: header and frames up to the last valid one. */
  bytes(): number;
  /** Frames of the log folded back into the database so far; 0 when unknown. */
  backfilled(): number;
  close(): void;
}

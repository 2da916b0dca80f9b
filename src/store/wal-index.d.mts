/** See wal-index.mjs. */
export declare class WalIndex {
  constructor(databasePath: string);
  /** Bytes of log not yet started over: header and frames up to the last valid one. */
  bytes(): number;
  /** Frames of log not yet started over (`mxFrame`); 0 when unknown. */
  frames(): number;
  /** The index header's page size and last valid frame; undefined before the index exists. */
  held(): { page: number; frames: number } | undefined;
  /** Frames of the log folded back into the database so far; 0 when unknown. */
  backfilled(): number;
  close(): void;
}

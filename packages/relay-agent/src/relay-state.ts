import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** What a registered relay keeps between runs, in `<state-dir>/relay.json` (mode 0600). */
export interface RelayState {
  serverUrl: string;
  relayId: string;
  secret: string;
  registeredAt: string;
  /**
   * chat.db ROWID below which inbound rows are never forwarded: the newest row
   * at first registration (unless --sync-history), so history is not replayed
   * as new messages even while the server's cursor is still 0.
   */
  inboundFloor: number;
  /**
   * Epoch milliseconds of the latest edit or unsend of a received message the
   * server acknowledged: changes are read from there. Set to the time of
   * first registration (or of the first run of an agent that reads changes).
   */
  changesCursorMs?: number;
}

export class RelayStateStore {
  readonly path: string;

  constructor(readonly stateDir: string) {
    this.path = join(stateDir, 'relay.json');
  }

  async load(): Promise<RelayState | undefined> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    const value = JSON.parse(text) as Partial<RelayState>;
    if (typeof value.relayId !== 'string' || typeof value.secret !== 'string' || typeof value.serverUrl !== 'string') {
      throw new Error(`${this.path} is not a relay state file (delete it and register again with --token)`);
    }
    return {
      serverUrl: value.serverUrl,
      relayId: value.relayId,
      secret: value.secret,
      registeredAt: value.registeredAt ?? '',
      inboundFloor: typeof value.inboundFloor === 'number' ? value.inboundFloor : 0,
      ...(typeof value.changesCursorMs === 'number' ? { changesCursorMs: value.changesCursorMs } : {}),
    };
  }

  /** Atomic: a crash leaves the old file or the new one, never half of one; the secret is never world-readable. */
  async save(state: RelayState): Promise<void> {
    await ensurePrivateDir(this.stateDir);
    const tmp = `${this.path}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
    await chmod(tmp, 0o600); // the umask may have narrowed the mode, never widened it; set it exactly
    await rename(tmp, this.path);
  }
}

export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
}

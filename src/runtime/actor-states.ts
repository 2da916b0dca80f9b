/** One actor key's activated state, held by the host that runs the key. */
export interface StateEntry {
  readonly id: string;
  activated: boolean;
  state: unknown;
  /** Handlers running on it (at most one per key, but a dropped entry may still finish one). */
  busy: number;
  lastUsedAt: number;
}

/**
 * The activated states of the actor keys this process runs. An entry lives
 * from a key's first message until it has been idle `idleMs`, its shard
 * leaves this worker, or a handler on it fails; the map stays in order of
 * last use, so expiry looks only at the entries that expire.
 */
export class ActorStates {
  private readonly entries = new Map<string, StateEntry>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly idleMs: number,
    private readonly onSize: (size: number) => void = () => {},
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Marks the key in use and returns its entry, new and not yet activated on its first message. */
  begin(type: string, key: string): StateEntry {
    const id = `${type}\u0000${key}`;
    let entry = this.entries.get(id);
    if (entry) {
      this.entries.delete(id); // re-inserted last: the map stays in order of last use
    } else {
      entry = { id, activated: false, state: undefined, busy: 0, lastUsedAt: 0 };
    }
    entry.busy++;
    entry.lastUsedAt = Date.now();
    this.entries.set(id, entry);
    this.onSize(this.entries.size);
    return entry;
  }

  /** The key's entry, if this process holds one, without marking it in use (a query reads it). */
  peek(type: string, key: string): StateEntry | undefined {
    return this.entries.get(`${type}\u0000${key}`);
  }

  activate(entry: StateEntry, state: unknown): void {
    entry.state = state;
    entry.activated = true;
  }

  end(entry: StateEntry): void {
    entry.busy--;
    entry.lastUsedAt = Date.now();
  }

  drop(type: string, key: string): void {
    this.entries.delete(`${type}\u0000${key}`);
    this.onSize(this.entries.size);
  }

  /** The activated states of `type` (a scrape reads them; nothing may change them from outside their handlers). */
  *activated(type: string): Iterable<unknown> {
    const prefix = `${type}\u0000`;
    for (const [id, entry] of this.entries) if (entry.activated && id.startsWith(prefix)) yield entry.state;
  }

  /** Drops every state of `type` whose key `matches` (the keys of a shard that left this worker). */
  dropWhere(type: string, matches: (key: string) => boolean): number {
    const prefix = `${type}\u0000`;
    let dropped = 0;
    for (const id of [...this.entries.keys()]) {
      if (id.startsWith(prefix) && matches(id.slice(prefix.length))) {
        this.entries.delete(id);
        dropped++;
      }
    }
    this.onSize(this.entries.size);
    return dropped;
  }

  /** Drops the states idle for `idleMs`; the oldest come first, so the scan stops at the first one still fresh. */
  expire(now = Date.now()): void {
    for (const [id, entry] of this.entries) {
      if (now - entry.lastUsedAt < this.idleMs) break;
      if (entry.busy === 0) this.entries.delete(id);
    }
    this.onSize(this.entries.size);
  }

  /** Expires idle states every so often until `stop`. */
  start(): void {
    this.timer ??= setInterval(() => this.expire(), Math.max(10, Math.min(1_000, Math.floor(this.idleMs / 4))));
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.entries.clear();
    this.onSize(0);
  }
}

import { platformScope, type Collection, type Store } from '../store/collection.ts';
import { queuedEvent, type DomainEvent, type EventStream, type GroupLag, type ReadEvent } from './event-stream.ts';
import { foldEventLog } from './event-log-migration.ts';
import { CarriedEvents, carriedKey, carriedSet, type CarrierDoc } from './carried-events.ts';
import { eventCollection, loadEvents, storedEvent, type EventDoc, type Subjects } from './stored-events.ts';

interface CursorDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  seq: number;
}

/**
 * The event stream of the embedded default: events are documents with a
 * sequence number in the store, and each group keeps the last sequence it
 * acknowledged. One process appends, so the sequence is a counter, and the
 * order of the stored events is kept in memory (loaded on first use): a read
 * finds its cursor by binary search and fetches the events after it by id,
 * and trimming deletes the oldest ids. Appends are durable through the store.
 */
/** Old events are deleted this many at a time, so no single step holds the event loop long. */
const trimChunk = 1_000;
/** Events kept in memory after their append for the consumers, which read them moments later. */
const recentEvents = 10_000;
/** A retention sweep of the history at most this often. */
const expireEveryMs = 3600_000;
/** How an event a message's row carries is named among the stream's ids: its message's id, marked (no event id starts so). */
const carriedMark = '#';

export class StoreEventStream implements EventStream {
  private readonly events: Collection<EventDoc>;
  private readonly cursors: Collection<CursorDoc>;
  /** Sequences and ids of the stored events, ascending, from `head` on: a deque trimmed at the front. */
  private seqs: number[] = [];
  private ids: string[] = [];
  private head = 0;
  private seq = 0;
  /** The first sequence of each append not yet durable: a read stops before the oldest, so no cursor passes an event still on its way. */
  private readonly inFlight: number[] = [];
  private loading: Promise<void> | undefined;
  private loaded = false;
  private appendsSinceTrim = 0;
  /** When the history's retention was last applied; 0: at the first append. */
  private expiredAt = 0;

  /** Keeps about the newest `keep` events; older ones have been read by every consumer or never will be. */
  private trimming: Promise<void> | undefined;

  /**
   * The newest events appended by this process, in a ring indexed by
   * sequence (slot `seq % recentEvents`, which holds `recentSeqs[slot]`): the
   * consumers read them from here rather than from the store (each group
   * reads every event).
   */
  private readonly recent: Array<DomainEvent | undefined> = new Array(recentEvents);
  private readonly recentSeqs = new Float64Array(recentEvents).fill(-1);
  /** Each group's acknowledged sequence as stored (one process reads and acknowledges on the embedded default). */
  private readonly cursorOf = new Map<string, number>();

  /** On the embedded store, an append made in the same synchronous run as a document write commits with it (one transaction per turn). */
  readonly appendWithWrite?: (events: DomainEvent[]) => Promise<void>;
  /** On the embedded store with a history, accepted messages' rows carry their message.queued events (`CarriedEvents`). */
  private readonly carried?: CarriedEvents;
  readonly insertQueued?: <T extends CarrierDoc>(docs: T[], insert: (docs: T[]) => Promise<void>) => Promise<void>;
  readonly carryChanges?: EventStream['carryChanges'];

  /**
   * With `history`, the stored events are also each organization's history
   * (GET /api/v1/events): they are kept `retentionDays`, and `keep` bounds
   * only what is held in memory; a message event's `data` is read back from
   * `subjects`. Without it, the store keeps the newest `keep`.
   */
  constructor(
    private readonly store: Store,
    private readonly keep = 100_000,
    private readonly history?: { retentionDays: number; subjects: Subjects },
  ) {
    this.events = eventCollection(store);
    this.cursors = store.collection<CursorDoc>('event_cursors');
    if (store.kind === 'embedded') {
      this.appendWithWrite = (events) => {
        if (!this.loaded) throw new Error('the event stream is not loaded: await ready() first');
        return this.writeEvents(events);
      };
      this.carried = history ? CarriedEvents.of(store, history.subjects.name) : undefined;
      if (this.carried)
        this.insertQueued = (docs, insert) => {
          if (!this.loaded) throw new Error('the event stream is not loaded: await ready() first');
          return this.carry(docs, insert);
        };
      if (this.carried)
        this.carryChanges = (changes, write) => {
          if (!this.loaded) throw new Error('the event stream is not loaded: await ready() first');
          return this.carryStatus(changes, write);
        };
    }
  }

  /** The stored events as read events, each as appended. */
  private async readEvents(docs: EventDoc[]): Promise<ReadEvent[]> {
    const events = await loadEvents(docs, this.history?.subjects);
    return docs.map((d, i) => ({ position: String(d.seq), event: events[i]! }));
  }

  ready(): Promise<void> {
    this.loading ??= this.load().catch((err: unknown) => {
      this.loading = undefined;
      throw err;
    });
    return this.loading;
  }

  private async load(): Promise<void> {
    if (this.history) await foldEventLog(this.store, this.events, this.cursors);
    const seqs: number[] = [];
    const ids: string[] = [];
    // Only the newest `keep` are read from (older ones stay for the history, never read by a group again).
    const newestRow = await this.events.find(platformScope, {}, { sort: { seq: -1 }, limit: 1 });
    const from = Math.max(newestRow[0]?.seq ?? 0, this.carried?.newest() ?? 0) - this.keep;
    for await (const page of this.events.scan(platformScope, { seq: { $gt: from } }, { sort: { seq: 1 } })) {
      for (const doc of page) {
        seqs.push(doc.seq);
        ids.push(doc.id);
      }
    }
    const cursors = await this.cursors.find(platformScope, {});
    const carried = this.carried?.after(from) ?? [];
    this.seqs = seqs;
    this.ids = ids;
    this.head = 0;
    if (carried.length > 0) this.merge(carried);
    // A cursor can be ahead of every stored event (all trimmed); new events must still come after it.
    this.seq = Math.max(this.seqs.at(-1) ?? 0, ...cursors.map((c) => c.seq));
    this.loaded = true;
  }

  async append(all: DomainEvent[], opts: { once?: boolean } = {}): Promise<void> {
    if (!this.loaded) await this.ready();
    return this.writeEvents(opts.once ? await this.unseen(all) : all);
  }

  /** Writes the events with the next sequences; the write itself is made before the first await, in the caller's turn. */
  private async writeEvents(events: DomainEvent[]): Promise<void> {
    if (events.length === 0) return;
    const batch: ReadEvent[] = events.map((event) => ({ position: String(++this.seq), event }));
    const first = Number(batch[0]!.position);
    this.inFlight.push(first);
    try {
      const inserted = this.events.insertMany(
        platformScope,
        batch.map((r) => storedEvent(r.event, Number(r.position), this.history !== undefined)),
      );
      await inserted;
      this.remember(batch);
    } catch (err) {
      // insertMany stops at the first conflict: the events before it are stored.
      const stored = await Promise.all(batch.map((r) => this.events.findOne(platformScope, { id: r.event.id })));
      this.remember(batch.filter((r, i) => stored[i]?.seq === Number(r.position)));
      throw err;
    } finally {
      this.inFlight.splice(this.inFlight.indexOf(first), 1);
    }
    this.appendsSinceTrim += batch.length;
    const expiring = this.history && Date.now() - this.expiredAt >= expireEveryMs;
    if (this.appendsSinceTrim >= this.keep / 10 || expiring) {
      this.appendsSinceTrim = 0;
      // In the background: an append (and the request waiting on it) never waits for old events to go.
      if (!this.trimming) {
        const running: Promise<void> = this.trim()
          .then(() => (this.history && expiring ? this.expire(this.history.retentionDays) : undefined))
          .catch(() => undefined)
          .finally(() => {
            if (this.trimming === running) this.trimming = undefined;
          });
        this.trimming = running;
      }
    }
  }

  /**
   * Inserts accepted messages (`insert`, in the caller's turn) each with the
   * next position: the position of its message.queued event, which its row
   * carries (no event row is written). Like an append, readers stop before
   * the positions until the insert is durable.
   */
  private async carry<T extends CarrierDoc>(docs: T[], insert: (docs: T[]) => Promise<void>): Promise<void> {
    if (docs.length === 0) return;
    const first = this.seq + 1;
    for (const doc of docs) doc.queuedSeq = ++this.seq;
    this.inFlight.push(first);
    try {
      await insert(docs);
      this.rememberCarried(docs);
    } catch (err) {
      // insertMany stops at the first conflict: the messages before it are stored.
      const stored = new Set(this.carried!.byKey(docs.map((d) => d.id)).map((c) => c.seq));
      this.rememberCarried(docs.filter((d) => stored.has(d.queuedSeq!)));
      throw err;
    } finally {
      this.inFlight.splice(this.inFlight.indexOf(first), 1);
    }
  }

  /**
   * Writes status changes (`write`, in the caller's turn) with the
   * positions of the events that messages' rows carry (`carriedSet`; a
   * change whose events are not carried has none, and `write` appends them
   * as rows). Like `carry`, readers stop before the positions until the
   * write is durable; a failed write's events are remembered as far as they
   * were stored.
   */
  private async carryStatus(
    changes: Parameters<NonNullable<EventStream['carryChanges']>>[0],
    write: (sets: Array<Record<string, unknown> | undefined>) => Promise<boolean[]>,
  ): Promise<boolean[]> {
    const first = this.seq + 1;
    const sets = changes.map((c) => {
      const set = c && c.events.length > 0 ? carriedSet(c.subject, c.events, this.seq + 1) : undefined;
      if (set) this.seq += c!.events.length;
      return set;
    });
    if (this.seq < first) return write(sets);
    // Each carried event with its position and its key among the stream's ids.
    const reads = sets.flatMap((set, i) => {
      if (!set) return [];
      const { subject, events } = changes[i]!;
      const from = (set.statusSeq as number) - events.length + 1;
      return events.map((event, k) => ({
        change: i,
        key: carriedKey(subject.id, from + k),
        position: String(from + k),
        event,
      }));
    });
    const remember = (kept: typeof reads) => this.remember(kept, (r) => carriedMark + r.key);
    this.inFlight.push(first);
    try {
      const applied = await write(sets);
      remember(reads.filter((r) => applied[r.change]));
      return applied;
    } catch (err) {
      // Only what was stored (the turn's commit may have gone).
      const stored = new Set(this.carried!.byKey(reads.map((r) => r.key)).map((c) => String(c.seq)));
      remember(reads.filter((r) => stored.has(r.position)));
      throw err;
    } finally {
      this.inFlight.splice(this.inFlight.indexOf(first), 1);
    }
  }

  private rememberCarried(docs: CarrierDoc[]): void {
    this.remember(
      docs.map((d) => ({ position: String(d.queuedSeq), event: queuedEvent(d) })),
      (r) => carriedMark + r.event.data.id,
    );
  }

  /** Adds carried events (ascending, as loaded) among the event rows' (ascending): one ordered list. */
  private merge(carried: Array<{ seq: number; id: string }>): void {
    const seqs: number[] = [];
    const ids: string[] = [];
    for (let i = this.head, j = 0; i < this.seqs.length || j < carried.length;) {
      if (j === carried.length || (i < this.seqs.length && this.seqs[i]! < carried[j]!.seq)) {
        seqs.push(this.seqs[i]!);
        ids.push(this.ids[i++]!);
      } else {
        seqs.push(carried[j]!.seq);
        ids.push(carriedMark + carried[j++]!.id);
      }
    }
    this.seqs = seqs;
    this.ids = ids;
    this.head = 0;
  }

  /** The events named by `ids` (stored events' ids, carried ones' marked message ids), in stream order; one no longer stored is left out. */
  private async fetch(ids: string[]): Promise<ReadEvent[]> {
    const rows = ids.filter((id) => !id.startsWith(carriedMark));
    const messages = ids.filter((id) => id.startsWith(carriedMark)).map((id) => id.slice(carriedMark.length));
    const stored =
      rows.length === 0
        ? []
        : await this.readEvents(await this.events.find(platformScope, { id: { $in: rows } }, { sort: { seq: 1 } }));
    if (messages.length === 0) return stored;
    const carried = (this.carried?.byKey(messages) ?? []).map(({ seq, event }) => ({ position: String(seq), event }));
    return [...stored, ...carried].sort((a, b) => Number(a.position) - Number(b.position));
  }

  private async unseen(events: DomainEvent[]): Promise<DomainEvent[]> {
    // Sorted, so the embedded store answers by id lookups instead of a scan of the whole stream (any order would do).
    const stored = await this.events.find(
      platformScope,
      { id: { $in: events.map((e) => e.id) } },
      { sort: { seq: 1 } },
    );
    const seen = new Set(stored.map((d) => d.id));
    return events.filter((e) => !seen.has(e.id));
  }

  async read(group: string, _consumer: string, count: number): Promise<ReadEvent[]> {
    if (!this.loaded) await this.ready();
    let cursor = this.cursorOf.get(group);
    if (cursor === undefined) {
      cursor = (await this.cursors.findOne(platformScope, { id: group }))?.seq ?? 0;
      if (!this.cursorOf.has(group)) this.cursorOf.set(group, cursor);
    }
    const before = this.inFlight[0] ?? Infinity; // ascending: sequences are handed out in order
    const ids: string[] = [];
    const kept: ReadEvent[] = [];
    for (let i = this.firstAfter(cursor); i < this.seqs.length && ids.length < count && this.seqs[i]! < before; i++) {
      ids.push(this.ids[i]!);
      const seq = this.seqs[i]!;
      const event = this.recentSeqs[seq % recentEvents] === seq ? this.recent[seq % recentEvents] : undefined;
      if (event) kept.push({ position: String(this.seqs[i]), event });
    }
    if (ids.length === 0) return [];
    if (kept.length === ids.length) return kept;
    // An event trimmed meanwhile is simply not found.
    return this.fetch(ids);
  }

  async ack(group: string, positions: string[]): Promise<void> {
    const highest = Math.max(...positions.map(Number));
    if (!Number.isFinite(highest)) return;
    await this.moveCursor(group, highest);
  }

  async lag(): Promise<GroupLag[]> {
    if (!this.loaded) await this.ready();
    const groups = new Map(this.cursorOf);
    for (const cursor of await this.cursors.find(platformScope, {}))
      if (!groups.has(cursor.id)) groups.set(cursor.id, cursor.seq);
    const now = Date.now();
    return Promise.all(
      [...groups].map(async ([group, cursor]) => {
        const first = this.firstAfter(cursor);
        const events = this.seqs.length - first;
        if (events === 0) return { group, events, oldestAgeSeconds: 0 };
        const seq = this.seqs[first]!;
        const event =
          this.recentSeqs[seq % recentEvents] === seq
            ? this.recent[seq % recentEvents]
            : (await this.fetch([this.ids[first]!]))[0]?.event;
        return { group, events, oldestAgeSeconds: event ? Math.max(0, (now - Date.parse(event.timestamp)) / 1000) : 0 };
      }),
    );
  }

  /** The group's cursor, written in this turn's transaction. */
  private async moveCursor(group: string, seq: number): Promise<void> {
    await this.cursors.updateOne(platformScope, { id: group }, { $set: { seq } }, { upsert: true });
    this.cursorOf.set(group, seq);
  }

  /** Index of the first event after `seq`. */
  private firstAfter(seq: number): number {
    let lo = this.head;
    let hi = this.seqs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.seqs[mid]! <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Adds stored events in order; appends finish in order on the embedded store, so this is nearly always a push. */
  private remember<R extends ReadEvent>(batch: R[], idOf: (r: R) => string = (r) => r.event.id): void {
    for (const read of batch) {
      const { position, event } = read;
      const seq = Number(position);
      this.recent[seq % recentEvents] = event;
      this.recentSeqs[seq % recentEvents] = seq;
      if (this.seqs.length === this.head || seq > this.seqs[this.seqs.length - 1]!) {
        this.seqs.push(seq);
        this.ids.push(idOf(read));
        continue;
      }
      const at = this.firstAfter(seq);
      this.seqs.splice(at, 0, seq);
      this.ids.splice(at, 0, idOf(read));
    }
  }

  /** Deletes all but the newest `keep` events, oldest first, by id, until appends made meanwhile are covered too. */
  private async trim(): Promise<void> {
    for (;;) {
      const excess = this.seqs.length - this.head - this.keep;
      if (excess <= 0) {
        // Let the chain end before the next append looks at `trimming`, or an append between the two would be missed.
        this.trimming = undefined;
        return;
      }
      const oldest = this.ids.slice(this.head, this.head + excess);
      this.head += excess;
      if (this.head > 1_024 && this.head * 2 > this.seqs.length) {
        this.seqs = this.seqs.slice(this.head);
        this.ids = this.ids.slice(this.head);
        this.head = 0;
      }
      // As history the events stay their retention (`expire`); otherwise the store keeps no more than memory.
      if (this.history) continue;
      for (let i = 0; i < oldest.length; i += trimChunk) {
        await this.events.deleteMany(platformScope, { id: { $in: oldest.slice(i, i + trimChunk) } });
      }
    }
  }

  /** Deletes the events past their retention, oldest first (a history's reads hide them meanwhile). */
  private async expire(retentionDays: number): Promise<void> {
    this.expiredAt = Date.now();
    const cutoff = new Date(Date.now() - retentionDays * 86_400_000).toISOString();
    for (;;) {
      const page = await this.events.find(platformScope, {}, { sort: { seq: 1 }, limit: trimChunk });
      const expired = page.filter((d) => d.event.timestamp < cutoff).map((d) => d.id);
      if (expired.length > 0) await this.events.deleteMany(platformScope, { id: { $in: expired } });
      if (expired.length < trimChunk) return;
    }
  }

  /** Resolves once no trimming is under way (tests, shutdown). */
  async trimmed(): Promise<void> {
    while (this.trimming) await this.trimming;
  }
}

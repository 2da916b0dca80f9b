import { nowIso } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { Collection, Doc, Filter, Scope, Update, WriteOp } from '../store/collection.ts';
import { queuedEvent, type DomainEvent, type EventStream, type QueuedSubject } from './event-stream.ts';

/**
 * The transactional outbox, without transactions: the events a state change
 * causes are written into the changed document by the same write
 * (`outbox.<eventId>`), so they are durable exactly when the change is. Then
 * they are appended to the event stream (once per id) and removed from the
 * document. A writer that dies in between leaves them in the document, where
 * the owner's periodic sweep finds them by `outboxAt` and publishes them.
 * Event ids are fixed when written, so a publish repeated by a sweep is
 * recognised downstream as the same event.
 */
export interface OutboxFields {
  outbox?: Record<string, DomainEvent>;
  /** Set by every write that adds events: its time (so a sweep finds old ones) and a token unique to that write. */
  outboxAt?: string;
}

export interface Outboxed {
  docId: string;
  events: DomainEvent[];
  token: string;
  /** Nothing else was in the document's outbox after the write: its publisher may remove the marker too. */
  exclusive: boolean;
}

/** A document that stays in the outbox this long is published by the sweep (its writer died or its publish failed). */
export const outboxGraceMs = 5_000;

function newToken(events: DomainEvent[]): string {
  return `${nowIso()}|${events[0]?.id ?? ''}`;
}

/** `$set` fields that put `events` into a document's outbox with the same update as the state change. */
export function outboxSet(events: DomainEvent[]): { set: Record<string, unknown>; token: string } {
  const token = newToken(events);
  const set: Record<string, unknown> = { outboxAt: token };
  for (const e of events) set[`outbox.${e.id}`] = e;
  return { set, token };
}

/** What to publish after an update that used `outboxSet`, from the document the update returned. */
export function outboxed(doc: (Doc & OutboxFields) | null, events: DomainEvent[], token: string): Outboxed[] {
  if (!doc) return [];
  return [{ docId: doc.id, events, token, exclusive: Object.keys(doc.outbox ?? {}).length === events.length }];
}

/** Everything in a document's outbox as read: all of it under the token read, so its publisher may remove the marker if no write came since. */
export function pendingEvents(doc: Doc & OutboxFields): Outboxed[] {
  const events = Object.values(doc.outbox ?? {});
  return events.length === 0 || !doc.outboxAt ? [] : [{ docId: doc.id, events, token: doc.outboxAt, exclusive: true }];
}

/** A new document carrying its events in its outbox, for an insert. */
export function withOutbox<T extends Doc>(doc: T, events: DomainEvent[]): { doc: T & OutboxFields; entry: Outboxed } {
  const token = newToken(events);
  return {
    doc: { ...doc, outbox: Object.fromEntries(events.map((e) => [e.id, e])), outboxAt: token },
    entry: { docId: doc.id, events, token, exclusive: true },
  };
}

export class Outbox {
  constructor(
    private readonly stream: EventStream,
    private readonly log: Logger,
  ) {}

  /** The stream commits with the store (the embedded default): an insert and its events are one local transaction, with no round trip to wait on. */
  get commitsWithStore(): boolean {
    return this.stream.appendWithWrite !== undefined;
  }

  /**
   * A compare-and-set that carries `events` in the changed document's outbox
   * (one write: the events exist exactly when the change does), then
   * publishes them. Returns the document after the change, or null when the
   * filter matched nothing (no change, no events); and whether the events are
   * published: when not, they wait in the document for a sweep or for
   * `publishPending` on the next read of it.
   */
  async change<T extends Doc & OutboxFields>(
    collection: Collection<T>,
    scope: Scope,
    filter: Filter,
    update: Update,
    events: DomainEvent[],
  ): Promise<{ doc: T | null; published: boolean }> {
    const { set, token } = outboxSet(events);
    const doc = await collection.updateOne(scope, filter, { ...update, $set: { ...update.$set, ...set } });
    return { doc, published: await this.publish(collection, scope, outboxed(doc, events, token)) };
  }

  /**
   * Many `change`s in one bulk write, each a compare-and-set on its own
   * document carrying its events; then every applied change's events are
   * published together. Whether each applied is known from the write's count
   * when all did; otherwise the documents are read back (each still holds its
   * events unless the change did not apply). `exclusive`: the document's
   * outbox was empty when the caller read it. Returns, for each change,
   * whether it applied (stored, its events published or not yet).
   * `alongside` is given which applied as soon as that is known and writes
   * what goes with them (statistics): on the embedded store in the same
   * synchronous run, so in the changes' transaction; elsewhere beside the
   * publish.
   */
  async changeMany<T extends Doc & OutboxFields>(
    collection: Collection<T>,
    scope: Scope,
    changes: Array<{
      filter: Filter;
      update: Update;
      events: DomainEvent[];
      exclusive: boolean;
      /** The message as read, when the change is its status change: where the stream lets it, its row carries the events. */
      carrier?: { id: string; [field: string]: unknown };
    }>,
    alongside: (applied: boolean[]) => Promise<void> = async () => undefined,
  ): Promise<boolean[]> {
    if (changes.length === 0) return [];
    const appendWithWrite = this.stream.appendWithWrite;
    if (appendWithWrite) {
      // The embedded store: each applied change's events are appended in the same synchronous run, so the same transaction holds both.
      await this.stream.ready?.();
      const events: DomainEvent[] = [];
      const applied = changes.map(() => false);
      const write = async (sets: Array<Record<string, unknown> | undefined>): Promise<boolean[]> => {
        const written = collection.bulkWrite(
          scope,
          changes.map((c, i) => {
            const set = sets[i];
            return {
              updateOne: {
                filter: c.filter,
                update: set ? { ...c.update, $set: { ...c.update.$set, ...set } } : c.update,
                applied: () => ((applied[i] = true), set ? undefined : events.push(...c.events)),
              },
            };
          }),
        );
        const appended = appendWithWrite(events);
        // Failed or not, only once the write has settled (committed or not).
        const failed = (await Promise.allSettled([written, appended, alongside(applied)])).find(
          (r) => r.status === 'rejected',
        );
        if (failed) throw failed.reason;
        return applied;
      };
      // Or carried by the changed row itself (one row written): positions handed out in this run.
      const carry = this.stream.carryChanges;
      return carry && changes.some((c) => c.carrier)
        ? carry(
            changes.map((c) => (c.carrier ? { subject: c.carrier, events: c.events } : undefined)),
            write,
          )
        : write(changes.map(() => undefined));
    }
    const written = changes.map((c) => {
      const { set, token } = c.events.length > 0 ? outboxSet(c.events) : { set: {}, token: '' };
      return {
        ...c,
        token,
        op: { updateOne: { filter: c.filter, update: { ...c.update, $set: { ...c.update.$set, ...set } } } },
      };
    });
    const { matched } = await collection.bulkWrite(
      scope,
      written.map((w) => w.op),
    );
    let applied = changes.map(() => true);
    let entries: Outboxed[] = written
      .filter((w) => w.events.length > 0)
      .map((w) => ({ docId: String(w.filter.id), events: w.events, token: w.token, exclusive: w.exclusive }));
    if (matched < changes.length) {
      // Some did not apply: each document read back says which (it holds the change's fields, and its events unless published since).
      const docs = new Map(
        (await collection.find(scope, { id: { $in: written.map((w) => String(w.filter.id)) } })).map((d) => [d.id, d]),
      );
      applied = written.map((w) => {
        const doc = docs.get(String(w.filter.id));
        return (
          doc !== undefined &&
          Object.entries(w.update.$set ?? {}).every(([k, v]) => JSON.stringify(doc[k]) === JSON.stringify(v))
        );
      });
      entries = entries.flatMap((e) => {
        const doc = docs.get(e.docId);
        if (!doc || !e.events.every((ev) => doc.outbox?.[ev.id] !== undefined)) return [];
        return [{ ...e, exclusive: e.exclusive && doc.outboxAt === e.token }];
      });
    }
    await Promise.all([this.publish(collection, scope, entries), alongside(applied)]);
    return applied;
  }

  /**
   * Inserts new documents with their events (`eventsOf` each; new ids). Where
   * the stream commits with the store (the embedded default), the events are
   * appended in the same synchronous run as the insert, so the same
   * transaction holds both and nothing is left to publish. Elsewhere each
   * document carries its events in its outbox, and what is returned is for
   * `publish` (the caller's to call, when it suits it: the insert is durable
   * with its events either way, and the sweep publishes what is never published).
   */
  async insert<T extends Doc & OutboxFields>(
    collection: Collection<T>,
    scope: Scope,
    docs: T[],
    eventsOf: (doc: T) => DomainEvent[],
  ): Promise<Outboxed[]> {
    if (docs.length === 0) return [];
    const appendWithWrite = this.stream.appendWithWrite;
    if (appendWithWrite) {
      await this.stream.ready?.();
      // No await between the two: both are written in this turn's transaction.
      const inserted = collection.insertMany(scope, docs);
      const appended = appendWithWrite(docs.flatMap(eventsOf));
      await Promise.all([inserted, appended]);
      return [];
    }
    const written = docs.map((d) => withOutbox(d, eventsOf(d)));
    await collection.insertMany(
      scope,
      written.map((w) => w.doc),
    );
    return written.map((w) => w.entry);
  }

  /**
   * Inserts accepted messages with their message.queued events
   * (`queuedEvent`), as `insert` does; where the stream lets a message's row
   * carry its event (the embedded store), that one row is all that is written.
   */
  async insertQueued<T extends Doc & OutboxFields & QueuedSubject>(
    collection: Collection<T>,
    scope: Scope,
    docs: T[],
  ): Promise<Outboxed[]> {
    const carry = this.stream.insertQueued;
    if (!carry) return this.insert(collection, scope, docs, (d) => [queuedEvent(d)]);
    if (docs.length === 0) return [];
    await this.stream.ready?.();
    await carry(docs, (rows) => collection.insertMany(scope, rows));
    return [];
  }

  /** Publishes what a document read from the store still holds in its outbox (its writer died or could not publish). */
  publishPending<T extends Doc & OutboxFields>(
    collection: Collection<T>,
    scope: Scope,
    doc: T | null,
  ): Promise<boolean> {
    return doc ? this.publish(collection, scope, pendingEvents(doc)) : Promise.resolve(true);
  }

  /**
   * Appends the events and clears them from their documents. A failure
   * leaves them where the sweep finds them: the caller's change stands.
   * `appended` is called once the append has answered, failed or not, before
   * the clear.
   */
  async publish<T extends Doc & OutboxFields>(
    collection: Collection<T>,
    scope: Scope,
    entries: Outboxed[],
    appended?: () => void,
  ): Promise<boolean> {
    if (entries.length === 0) {
      appended?.();
      return true;
    }
    let told = false;
    const tell = () => {
      if (!told) appended?.();
      told = true;
    };
    try {
      await this.stream.append(
        entries.flatMap((e) => e.events),
        { once: true },
      );
      tell();
      await this.clear(collection, scope, entries);
      return true;
    } catch (err) {
      tell();
      this.log.warn({ err, events: entries.length }, 'events stay in the outbox until the next sweep');
      return false;
    }
  }

  /**
   * Removes published events. The `outboxAt` marker goes too only where this
   * write's events were all the outbox held and no later write added any (the
   * token is still ours); otherwise it stays for the sweep, so an event of a
   * writer that died is never left without the marker that finds it.
   */
  private async clear<T extends Doc & OutboxFields>(
    collection: Collection<T>,
    scope: Scope,
    entries: Outboxed[],
  ): Promise<void> {
    const own = (e: Outboxed): WriteOp => ({
      updateOne: {
        filter: { id: e.docId },
        update: { $unset: Object.fromEntries(e.events.map((ev) => [`outbox.${ev.id}`, ''])) },
      },
    });
    // A token names one write, so a document matches only under its own token.
    const whole = (e: Outboxed): WriteOp => ({
      updateOne: { filter: { id: e.docId, outboxAt: e.token }, update: { $unset: { outbox: '', outboxAt: '' } } },
    });
    const { matched } = await collection.bulkWrite(
      scope,
      entries.map((e) => (e.exclusive ? whole(e) : own(e))),
    );
    if (matched === entries.length) return;
    // Some exclusive write was followed by another: its own events go, the marker stays for the later write's publisher or the sweep.
    await collection.bulkWrite(scope, entries.filter((e) => e.exclusive).map(own));
  }

  /** Publishes what writers left behind in `scope` for longer than the grace period, and drops the markers of emptied outboxes. */
  async sweep<T extends Doc & OutboxFields>(collection: Collection<T>, scope: Scope, limit = 500): Promise<number> {
    const cutoff = new Date(Date.now() - outboxGraceMs).toISOString();
    const stale = await collection.find(scope, { outboxAt: { $lte: cutoff } }, { limit });
    const entries = stale.flatMap(pendingEvents);
    if (!(await this.publish(collection, scope, entries))) return 0;
    for (const d of stale) {
      // Left with a marker and no events (their publishers removed them one by one); only if no write came since.
      if (Object.keys(d.outbox ?? {}).length === 0)
        await collection.updateOne(scope, { id: d.id, outboxAt: d.outboxAt }, { $unset: { outbox: '', outboxAt: '' } });
    }
    return entries.length;
  }
}

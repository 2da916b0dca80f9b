import { changeEventId, domainEvent, type EventStream } from '../events/event-stream.ts';
import { newId, nowIso } from '../ids.ts';
import type { Broadcast } from '../runtime/broadcast.ts';
import { chunks } from '../chunks.ts';
import type { Logger } from '../log.ts';
import {
  suppressionIdOf,
  type SuppressionCollections,
  type SuppressionDoc,
  type SuppressionSource,
} from './suppression-store.ts';

/** The broadcast channel on which every process hears of a change to an organization's suppression list or opt-out settings. */
export const suppressionsChangedChannel = 'suppressions-changed';

/** What every process keeps of an organization, so a send is checked in memory. */
export interface TenantOptOuts {
  /** Each suppressed handle, with the id of the received message whose stop keyword put it there (null: the API or an import). */
  handles: Map<string, string | null>;
  stopKeywords: string[];
  helpText: string | null;
}

/** What a broadcast says changed: handles added or removed, or (`reload`) too much to name: the copy is read again. */
interface Change {
  tenantId: string;
  added?: Array<{ handle: string; messageId: string | null }>;
  removed?: string[];
  reload?: true;
}

/** A change naming more handles than this is broadcast as a reload (an import): a pub/sub message stays small. */
const maxNamedHandles = 1_000;

interface Entry {
  value: Promise<TenantOptOuts>;
  settled: boolean;
  result: TenantOptOuts | undefined;
  expiresAt: number;
}

export interface NewSuppression {
  handle: string;
  reason: string | null;
  source: SuppressionSource;
  /** The received message whose stop keyword this is: its event's id follows from it, so a replayed message makes it once. */
  messageId?: string;
}

/**
 * An organization's suppression list and opt-out settings, as every process
 * (frontends and workers) checks them: the whole list of an organization is
 * read once into memory and kept, so the send path's check is a set lookup,
 * never a store read per send. A change is made in the store, then
 * broadcast to every process before it answers (the same broadcast as a
 * revoked API key's, identity/credential-lookups.ts); `cacheMs` bounds how
 * long a process that missed a broadcast (a lost Redis connection) keeps a
 * stale copy.
 *
 * Every change that puts a handle on the list or takes it off makes one
 * event, `contact.opted_out` or `contact.opted_in`: a handle already on the
 * list (a second STOP) makes none.
 */
export class SuppressionList {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly deps: {
      db: SuppressionCollections;
      events: EventStream;
      cacheMs: number;
      broadcast?: Broadcast;
      log: Logger;
    },
  ) {}

  /** Every process applies the changes made on any of them. */
  async listen(): Promise<void> {
    await this.deps.broadcast?.subscribe(suppressionsChangedChannel, (payload) => this.apply(payload as Change));
  }

  /** The organization's list and settings: at once when this process holds them, else a promise of them. */
  optOuts(tenantId: string): TenantOptOuts | Promise<TenantOptOuts> {
    const now = Date.now();
    const hit = this.entries.get(tenantId);
    if (hit && hit.expiresAt > now) return hit.settled ? hit.result! : hit.value;
    if (this.entries.size >= 10_000) this.entries.clear();
    const entry: Entry = {
      value: this.load(tenantId),
      settled: false,
      result: undefined,
      expiresAt: now + this.deps.cacheMs,
    };
    this.entries.set(tenantId, entry);
    entry.value.then(
      (result) => {
        entry.result = result;
        entry.settled = true;
      },
      () => {
        if (this.entries.get(tenantId) === entry) this.entries.delete(tenantId);
      },
    );
    return entry.value;
  }

  /** Whether `handle` (a participant: E.164 or a lower-cased email) is suppressed: from memory once the list is held. */
  isSuppressed(tenantId: string, handle: string): boolean | Promise<boolean> {
    const optOuts = this.optOuts(tenantId);
    return optOuts instanceof Promise ? optOuts.then((o) => o.handles.has(handle)) : optOuts.handles.has(handle);
  }

  /**
   * The received message whose stop keyword put `handle` on the list: a reply
   * to that very message (the opt-out's confirmation) may still go. Undefined
   * when the handle is not on the list, null when it was put there otherwise.
   */
  stopMessageOf(tenantId: string, handle: string): string | null | undefined | Promise<string | null | undefined> {
    const optOuts = this.optOuts(tenantId);
    return optOuts instanceof Promise ? optOuts.then((o) => o.handles.get(handle)) : optOuts.handles.get(handle);
  }

  private async load(tenantId: string): Promise<TenantOptOuts> {
    const scope = { tenantId };
    const handles = new Map<string, string | null>();
    const [settings] = await Promise.all([
      this.deps.db.optOutSettings.findOne(scope, { id: tenantId }),
      (async () => {
        for await (const page of this.deps.db.suppressions.scan(scope, {}, { sort: { id: 1 } }))
          for (const doc of page) handles.set(doc.handle, doc.messageId ?? null);
      })(),
    ]);
    return { handles, stopKeywords: settings?.stopKeywords ?? [], helpText: settings?.helpText ?? null };
  }

  /**
   * Puts handles on the list; answers those that were not on it. Each new one
   * makes a `contact.opted_out` event; a handle already on the list is left
   * as it is, and makes none, unless the received message that put it there
   * is the one given again (a replay after a crash between the write and its
   * event: the event goes out then, under the same id).
   */
  async add(tenantId: string, entries: NewSuppression[]): Promise<SuppressionDoc[]> {
    const scope = { tenantId };
    const now = nowIso();
    const added: SuppressionDoc[] = [];
    const events = [];
    for (const piece of chunks(entries, 1_000)) {
      const docs = piece.map((e): SuppressionDoc => ({
        id: suppressionIdOf(tenantId, e.handle),
        tenantId,
        handle: e.handle,
        reason: e.reason,
        source: e.source,
        ...(e.messageId ? { messageId: e.messageId } : {}),
        createdAt: now,
        updatedAt: now,
      }));
      const found = await this.deps.db.suppressions.find(scope, { id: { $in: docs.map((d) => d.id) } });
      const known = new Map(found.map((d) => [d.id, d]));
      const fresh: SuppressionDoc[] = [];
      for (const doc of docs) {
        const stored = known.get(doc.id);
        if (!stored) {
          known.set(doc.id, doc);
          fresh.push(doc);
        } else if (doc.messageId !== undefined && stored.messageId === doc.messageId) events.push(optedOut(stored));
      }
      if (fresh.length === 0) continue;
      const result = await this.deps.db.suppressions.bulkWrite(
        scope,
        // The filter's id and the scope's tenant are the inserted document's: set once, not also by $setOnInsert.
        fresh.map(({ id, tenantId: _tenant, ...fields }) => ({
          updateOne: { filter: { id }, update: { $setOnInsert: fields }, upsert: true },
        })),
      );
      // A conflict is a concurrent add of the same handle: it is on the list, and its writer makes the event.
      const lost = new Set(result.conflicts.map((i) => fresh[i]!.id));
      for (const doc of fresh) {
        if (lost.has(doc.id)) continue;
        added.push(doc);
        events.push(optedOut(doc));
      }
    }
    if (events.length > 0) await this.appendEvents(events);
    if (added.length > 0)
      await this.changed({ tenantId, added: added.map((d) => ({ handle: d.handle, messageId: d.messageId ?? null })) });
    return added;
  }

  /** Takes a handle off the list (a start keyword, or a DELETE), with its `contact.opted_in` event; false when it was not on it. */
  async remove(tenantId: string, handle: string, source: SuppressionSource, messageId?: string): Promise<boolean> {
    const removed = await this.deps.db.suppressions.deleteOne({ tenantId }, { id: suppressionIdOf(tenantId, handle) });
    if (!removed) return false;
    const data = { handle, source, ...(messageId ? { messageId } : {}) };
    const id = messageId ? changeEventId('contact.opted_in', messageId) : newId('evt');
    await this.appendEvents([domainEvent('contact.opted_in', { tenantId }, data, id)]);
    await this.changed({ tenantId, removed: [handle] });
    return true;
  }

  /** The organization's settings changed: every process reads them again. */
  async settingsChanged(tenantId: string): Promise<void> {
    await this.changed({ tenantId, reload: true });
  }

  private async appendEvents(events: ReturnType<typeof optedOut>[]): Promise<void> {
    for (const piece of chunks(events, 1_000)) await this.deps.events.append(piece, { once: true });
  }

  /** Applied here first (the answer must not outrun this process's own check), then on every other process. */
  private async changed(change: Change): Promise<void> {
    const named = (change.added?.length ?? 0) + (change.removed?.length ?? 0);
    const sent: Change = named > maxNamedHandles ? { tenantId: change.tenantId, reload: true } : change;
    this.apply(sent);
    await this.deps.broadcast?.publish(suppressionsChangedChannel, sent).catch((err: unknown) => {
      // The change is stored and applied here; the others catch up at their copy's expiry.
      this.deps.log.warn({ err, tenantId: change.tenantId }, 'could not broadcast a suppression list change');
    });
  }

  private apply(change: Change): void {
    if (typeof change?.tenantId !== 'string') return;
    const entry = this.entries.get(change.tenantId);
    if (!entry) return;
    // A copy still loading may have been read before the change: it is dropped, and read again when next needed.
    if (change.reload || !entry.settled) {
      this.entries.delete(change.tenantId);
      return;
    }
    for (const added of change.added ?? [])
      if (typeof added?.handle === 'string') entry.result!.handles.set(added.handle, added.messageId ?? null);
    for (const handle of change.removed ?? []) if (typeof handle === 'string') entry.result!.handles.delete(handle);
  }
}

function optedOut(doc: SuppressionDoc) {
  const data = {
    handle: doc.handle,
    reason: doc.reason,
    source: doc.source,
    ...(doc.messageId ? { messageId: doc.messageId } : {}),
  };
  const id = doc.messageId ? changeEventId('contact.opted_out', doc.messageId) : newId('evt');
  return domainEvent('contact.opted_out', { tenantId: doc.tenantId }, data, id);
}

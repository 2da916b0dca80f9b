import { platformScope, type Collection, type Store } from '../store/collection.ts';
import type { Row } from '../store/embedded-schema.ts';
import { StoredForm } from '../store/stored-form.ts';
import { EmbeddedStore } from '../store/embedded-store.ts';
import type { EventDoc } from './stored-events.ts';

/** A row of the per-organization log that embedded stores kept beside the stream before the stream served as the history. */
interface LoggedEvent {
  id: string;
  event: EventDoc['event']['event'];
  timestamp: string;
  data: Record<string, unknown>;
  /** The stream position, padded (`sortableCursor`). */
  cursor: string;
}

/** Rows moved per write. */
const movePage = 1_000;

/**
 * Folds the `org_events` table of a store written before into the stream's
 * rows, then drops it: the events the stream had already let go (older
 * than its newest 100,000) come back at their positions, so each
 * organization's history and cursors read as before. A group's cursor below
 * them is moved past them, as before no group was handed an event the
 * stream had let go. Repeatable: a restart midway moves what is left.
 */
export async function foldEventLog(
  store: Store,
  events: Collection<EventDoc>,
  cursors: Collection<{ id: string; tenantId: string; seq: number }>,
): Promise<void> {
  if (!(store instanceof EmbeddedStore)) return;
  if (!store.first(`SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = 'org_events'`)) return;
  const oldest = (await events.find(platformScope, {}, { sort: { seq: 1 }, limit: 1 }))[0]?.seq ?? Infinity;
  const select = store.statement(
    'SELECT rid, id, tenant, doc FROM "org_events" WHERE rid > ? AND id NOT IN (SELECT id FROM "events") ORDER BY rid LIMIT ?',
  );
  let moved = 0;
  for (let last = -1; ;) {
    const rows = select.all([last, movePage]) as unknown as Row[];
    if (rows.length === 0) break;
    last = rows.at(-1)!.rid;
    const docs = rows.flatMap((row): EventDoc[] => {
      const logged = StoredForm.whole.decode<LoggedEvent>(row.doc, row.id, row.tenant);
      const seq = Number(logged.cursor);
      // Only positions of this stream, and none it still holds.
      if (!Number.isSafeInteger(seq) || seq >= oldest) return [];
      moved = Math.max(moved, seq);
      const { event, timestamp, data } = logged;
      return [
        {
          id: logged.id,
          tenantId: platformScope.tenantId,
          seq,
          event: { event, timestamp, tenantId: row.tenant, teamId: null, data },
        },
      ];
    });
    await events.insertMany(platformScope, docs);
  }
  if (moved > 0) {
    const past = Number.isFinite(oldest) ? oldest - 1 : moved;
    await cursors.updateMany(platformScope, { seq: { $lt: past } }, { $set: { seq: past } });
  }
  // The log's own consumer group is gone with it.
  await cursors.deleteOne(platformScope, { id: 'event-log' });
  store.write('org_events', () => {
    store.exec('DROP TABLE "org_events"');
    store.run('DELETE FROM relaybox_counts WHERE collection = ?', ['org_events']);
    store.run('DELETE FROM relaybox_multikey WHERE collection = ?', ['org_events']);
  });
  await store.committed();
}

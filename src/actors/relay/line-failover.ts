import { changeEventId, domainEvent, type DomainEvent } from '../../events/event-stream.ts';
import { nowIso } from '../../ids.ts';
import type { MessagingCollections, PhoneNumberDoc } from '../../messages/message-store.ts';
import type { RelayCollections, RelayDoc } from '../../relays/relay-store.ts';

type Db = Pick<MessagingCollections, 'phoneNumbers'> & RelayCollections;

/** A line's move the relay actor writes with its relay's own change: the events, and the lines' `failedOverTo` after it. */
export interface LineMoves {
  events: DomainEvent[];
  /** Applied once the relay's change is written (a crash before leaves them undone, and the next change makes them). */
  apply(): Promise<void>;
}

/** The organization's lines that have a relay chain (their phone numbers' `relays`); a few at most, read only when a relay comes or goes. */
async function chainedLines(db: Db, tenantId: string): Promise<PhoneNumberDoc[]> {
  const numbers = await db.phoneNumbers.find({ tenantId }, { relays: { $exists: true } }, { limit: 10_000 });
  return numbers.filter((n) => n.status === 'active' && (n.relays?.length ?? 0) > 1);
}

const moveData = (line: PhoneNumberDoc, from: string, to: string) => ({
  phoneNumberId: line.id,
  phoneNumber: line.number,
  from,
  to,
});

/**
 * The primary `relay` goes offline on `session`: each line it is the primary
 * of moves to the first of its standbys online (`relay.failover`, once per
 * line and session: its id comes from them). A line with no standby online
 * has no move: its messages wait for one of its relays (docs/relay-agent.md,
 * "Standby relays").
 */
export async function failovers(db: Db, relay: RelayDoc, session: number): Promise<LineMoves> {
  const lines = (await chainedLines(db, relay.tenantId)).filter((n) => n.relays![0] === relay.id);
  const standbyIds = [...new Set(lines.flatMap((n) => n.relays!.slice(1)))];
  const online =
    standbyIds.length === 0
      ? new Set<string>()
      : new Set(
          (
            await db.relays.find(
              { tenantId: relay.tenantId },
              { id: { $in: standbyIds }, status: 'online' },
              { limit: 100 },
            )
          ).map((r) => r.id),
        );
  const moves = lines.flatMap((line) => {
    const to = line.relays!.slice(1).find((id) => online.has(id));
    return to ? [{ line, to }] : [];
  });
  return {
    events: moves.map(({ line, to }) =>
      domainEvent(
        'relay.failover',
        relay,
        moveData(line, relay.id, to),
        changeEventId('relay.failover', `${line.id}\u0000${relay.id}\u0000${session}`),
      ),
    ),
    apply: async () => {
      for (const { line, to } of moves)
        await db.phoneNumbers.updateOne(
          { tenantId: relay.tenantId },
          { id: line.id },
          { $set: { failedOverTo: to, updatedAt: nowIso() } },
        );
    },
  };
}

/** The primary `relay` is back on `session`: each of its lines that had failed over comes back to it (`relay.failback`, once per line and session). */
export async function failbacks(db: Db, relay: RelayDoc, session: number): Promise<LineMoves> {
  const lines = (await chainedLines(db, relay.tenantId)).filter(
    (n) => n.relays![0] === relay.id && typeof n.failedOverTo === 'string',
  );
  return {
    events: lines.map((line) =>
      domainEvent(
        'relay.failback',
        relay,
        moveData(line, line.failedOverTo!, relay.id),
        changeEventId('relay.failback', `${line.id}\u0000${relay.id}\u0000${session}`),
      ),
    ),
    apply: async () => {
      for (const line of lines)
        await db.phoneNumbers.updateOne(
          { tenantId: relay.tenantId },
          { id: line.id },
          { $set: { failedOverTo: null, updatedAt: nowIso() } },
        );
    },
  };
}

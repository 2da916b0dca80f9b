import { changeEventId, domainEvent, type DomainEvent } from '../../events/event-stream.ts';
import { nowIso } from '../../ids.ts';
import type { MessagingCollections, PhoneNumberDoc } from '../../messages/message-store.ts';
import type { RelayCollections, RelayDoc } from '../../relays/relay-store.ts';

type Db = Pick<MessagingCollections, 'phoneNumbers'> & RelayCollections;

/** A line's moves the relay actor writes with its relay's own change: the events, and the lines' `failedOverTo` after them. */
export interface LineMoves {
  events: DomainEvent[];
  /** Applied once the relay's change is written (a crash before leaves them undone, and the next change makes them). */
  apply(): Promise<void>;
}

interface Move {
  line: PhoneNumberDoc;
  event: 'relay.failover' | 'relay.failback';
  from: string;
  to: string;
  /** What makes the event's id: the move happens once for it. */
  subject: string;
}

/** The organization's lines that have standbys (their phone numbers' `relays`); a few at most, read only when a relay comes or goes. */
async function chainedLines(db: Db, tenantId: string): Promise<PhoneNumberDoc[]> {
  const numbers = await db.phoneNumbers.find({ tenantId }, { relays: { $exists: true } }, { limit: 10_000 });
  return numbers.filter((n) => n.status === 'active' && (n.relays?.length ?? 0) > 1);
}

/** The relays of these lines, by id (their status and session as the store has them). */
async function relaysOf(db: Db, tenantId: string, lines: PhoneNumberDoc[]): Promise<Map<string, RelayDoc>> {
  const ids = [...new Set(lines.flatMap((n) => n.relays!))];
  if (ids.length === 0) return new Map();
  const docs = await db.relays.find({ tenantId }, { id: { $in: ids } }, { limit: 1_000 });
  return new Map(docs.map((r) => [r.id, r]));
}

/** Which relay sends for a line now: the standby it failed over to, else its primary. */
const sender = (line: PhoneNumberDoc) => line.failedOverTo ?? line.relays![0]!;

function written(db: Db, relay: RelayDoc, moves: Move[]): LineMoves {
  return {
    events: moves.map((m) =>
      domainEvent(
        m.event,
        relay,
        { phoneNumberId: m.line.id, phoneNumber: m.line.number, from: m.from, to: m.to },
        changeEventId(m.event, m.subject),
      ),
    ),
    apply: async () => {
      for (const m of moves)
        await db.phoneNumbers.updateOne(
          { tenantId: relay.tenantId },
          { id: m.line.id },
          { $set: { failedOverTo: m.event === 'relay.failback' ? null : m.to, updatedAt: nowIso() } },
        );
    },
  };
}

/**
 * `relay` goes offline on `session`: each line it sends for (as primary, or
 * as the standby the line failed over to) moves to the first other relay of
 * its chain online, `relay.failover` (once per line and session: its id
 * comes from them). A line with none online has no move: its messages wait
 * for one of its relays, and the first to come takes it (`onlineMoves`).
 * (docs/relay-agent.md, "Standby relays")
 */
export async function offlineMoves(db: Db, relay: RelayDoc, session: number): Promise<LineMoves> {
  const lines = (await chainedLines(db, relay.tenantId)).filter((n) => sender(n) === relay.id);
  const relays = await relaysOf(db, relay.tenantId, lines);
  const moves = lines.flatMap((line): Move[] => {
    const to = line.relays!.find((id) => id !== relay.id && relays.get(id)?.status === 'online');
    if (!to || to === line.relays![0]) return [];
    return [
      { line, event: 'relay.failover', from: relay.id, to, subject: `${line.id}\u0000${relay.id}\u0000${session}` },
    ];
  });
  return written(db, relay, moves);
}

/**
 * `relay` is online on `session`. A line it is the primary of that had
 * failed over comes back to it (`relay.failback`, once per line and
 * session). A line it is a standby of, whose sender (its primary, or the
 * standby it failed over to) is offline, is taken by it if it is the first
 * of the chain online (`relay.failover` from that sender, once per session
 * of it).
 */
export async function onlineMoves(db: Db, relay: RelayDoc, session: number): Promise<LineMoves> {
  const lines = (await chainedLines(db, relay.tenantId)).filter((n) => n.relays!.includes(relay.id));
  const relays = await relaysOf(db, relay.tenantId, lines);
  const moves = lines.flatMap((line): Move[] => {
    const primary = line.relays![0]!;
    if (primary === relay.id) {
      if (typeof line.failedOverTo !== 'string') return [];
      const from = line.failedOverTo;
      return [
        { line, event: 'relay.failback', from, to: relay.id, subject: `${line.id}\u0000${relay.id}\u0000${session}` },
      ];
    }
    const current = relays.get(sender(line));
    if (current?.status === 'online' && current.id !== relay.id) return [];
    const first = line.relays!.find((id) => id === relay.id || relays.get(id)?.status === 'online');
    if (first !== relay.id || current?.id === relay.id) return [];
    const from = sender(line);
    const since = relays.get(from)?.session ?? 0;
    return [{ line, event: 'relay.failover', from, to: relay.id, subject: `${line.id}\u0000${from}\u0000${since}` }];
  });
  return written(db, relay, moves);
}

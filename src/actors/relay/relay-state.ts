import type { RelayDoc } from '../../relays/relay-store.ts';
import type { RelayCredits } from './relay-credits.ts';

/** The relay actor's state: its document as last written (by this actor, the only writer), loaded on first need. */
export interface RelayState {
  doc: RelayDoc | null | undefined;
  /** Epoch ms of the current session's last heartbeat. */
  lastHeartbeatAt: number;
  /** Its sends in flight and the credits granted for them, read from the store with the document. */
  credits: RelayCredits;
  /** Sends of a bulk job, kept until their last report (or evicted, oldest first, past `bulkSendsKept`): their reports are bulk work. */
  bulkSends: Set<string>;
}

/** Bulk sends remembered at most per relay: a forgotten one's reports are only served as interactive work. */
export const bulkSendsKept = 10_000;

/** The relay's document says this session is the one online now. */
export function isLive(relayId: string, doc: RelayDoc | null | undefined, session: number): doc is RelayDoc {
  return !!doc && doc.status === 'online' && doc.session === session && relayId === doc.id;
}

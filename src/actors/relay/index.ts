import type { Outbox } from '../../events/outbox.ts';
import type { MessageRollups } from '../../messages/message-rollups.ts';
import type { MessagingCollections } from '../../messages/message-store.ts';
import type { RelayLink } from '../../relays/relay-link.ts';
import type { RelayCollections } from '../../relays/relay-store.ts';
import type { ActorDefinition } from '../../runtime/types.ts';
import { FailoverCheck } from './failover-check.ts';
import { InboundRecorder } from './inbound-recorder.ts';
import type { InboundKeywords } from '../../suppressions/opt-out-keywords.ts';
import { relayActor } from './relay.actor.ts';
import { RelaySends } from './relay-sends.ts';
import { RelaySessions } from './relay-sessions.ts';

/** The relay actor: its sessions, its sends in flight and its inbound recorder, over the stores and ports they use. */
export function createRelayActor(deps: {
  db: MessagingCollections & RelayCollections;
  /** Status changes written with their events (shared with the send path). */
  outbox: Outbox;
  /** Message statistics, counted with the inbound messages (shared with the send path). */
  rollups: MessageRollups;
  /** Frames to the frontend that holds a relay's socket. */
  link: RelayLink;
  sendTimeoutMs: number;
  heartbeatTimeoutMs: number;
  /** Reports that come together go on to the tenant actor as one message (`RELAY_REPORT_BATCHES`). */
  batchReports: boolean;
  /** Stop, start and help keywords in received messages (the organization's suppression list). */
  keywords?: InboundKeywords;
}): ActorDefinition {
  const { db, outbox, rollups, link } = deps;
  const check = new FailoverCheck({ db, link, sendTimeoutMs: deps.sendTimeoutMs });
  const sends = new RelaySends({ db, link, sendTimeoutMs: deps.sendTimeoutMs, batchReports: deps.batchReports, check });
  const sessions = new RelaySessions({ db, outbox, sends, heartbeatTimeoutMs: deps.heartbeatTimeoutMs });
  const inbound = new InboundRecorder({ db, outbox, rollups, link, keywords: deps.keywords });
  return relayActor(sessions, sends, inbound, deps.batchReports);
}

import type { OutboxFields } from '../events/outbox.ts';
import { agentHops, type AgentCheckpoint } from '../relay-protocol/frames.ts';
import type { waitingReasons } from '../actors/tenant/protocol.ts';

export type WaitingReason = (typeof waitingReasons)[number];
import type { Store, StoredFormSpec } from '../store/collection.ts';
import type { SmsFallback } from './sms-fallback.ts';
import { rollupCollection } from './message-rollups.ts';
import { attachmentCollection, fileNameOf } from './attachment-store.ts';

export const messageStatuses = ['queued', 'processing', 'sent', 'delivered', 'failed'] as const;
export type MessageStatus = (typeof messageStatuses)[number];
export type Direction = 'sent' | 'received';

export interface MessageDoc extends OutboxFields {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  teamId: string;
  direction: Direction;
  status: MessageStatus;
  to: string;
  from: string | null;
  /** The other side of the conversation: `to` of a sent message, `from` of a received one. */
  participant: string;
  conversationId: string;
  body: string;
  attachments: string[];
  priority: number;
  fromNumber: string | null;
  attempts: number;
  lastError: string | null;
  relayId: string | null;
  /** A group send is not sent itself: its members' messages are, each pointing back with parentId. */
  fanout?: boolean;
  parentId?: string;
  recipients?: number;
  /** Failed after every retry: counted in the queue's dead letters. */
  deadLettered?: boolean;
  /** A message of a bulk job, and its entry's position in the request. */
  jobId?: string;
  jobIndex?: number;
  /** Failed because its job was cancelled before a relay had it: not a dead letter. */
  cancelled?: boolean;
  /** A bulk job's entry to a recipient on the suppression list: stored failed (`recipient_opted_out`), never queued. */
  skipped?: boolean;
  /** Sent by an admin to a recipient on the suppression list, on purpose (one transactional send). */
  overrideOptOut?: boolean;
  /** The Messages GUID (received messages, and sent ones once the relay saw them). */
  guid?: string;
  queuedAt: string | null;
  processingAt?: string | null;
  /** The relay actor's claim that made it `processing` (unique to that hand-over): how the claim reads back what it got. */
  claim?: string;
  /**
   * Set when a relay that went offline handed it back (it may have sent it): another relay checks its own chat.db
   * for it first (actors/relay/failover-check.ts). `waitingSince`: the last check was inconclusive, and it waits.
   */
  failoverCheck?: { relayId: string; since: string; waitingSince?: string } | null;
  sentAt: string | null;
  deliveredAt: string | null;
  readAt: string | null;
  failedAt?: string | null;
  /** Why its last attempt failed, when Messages said (relay-protocol `failureReason`): `not_registered`, `network`, `unknown_<code>`. */
  failureReason?: string | null;
  /** The service Messages sent it over (`iMessage`, `SMS`), once its relay saw the row. */
  service?: string;
  /** Send as SMS when iMessage cannot reach the recipient, or (`if_undelivered`) does not in time (the send's `fallback`). */
  fallback?: SmsFallback;
  /**
   * Set once an attempt failed as not registered with iMessage and `fallback` asked for SMS, or an `if_undelivered`
   * iMessage was not delivered in its window: its next attempts go as SMS. False again when the iMessage was
   * delivered before its SMS went.
   */
  viaSms?: boolean;
  /** When the send was given up on iMessage and queued again as SMS (its `sms_fallback` checkpoint); null once that SMS was cancelled. */
  smsFallbackAt?: string | null;
  /** Sent and not delivered within its organization's window: when that was noticed. A later delivery still applies. */
  undeliveredAt?: string;
  nextAttemptAt?: string | null;
  /** The hops of its current attempt its relay agent reported (relay-protocol/frames.ts `agentHops`). */
  agentCheckpoints?: AgentCheckpoint[];
  /** The W3C trace context of the request that sent it (src/tracing): its relay sends and its events continue that trace. */
  traceparent?: string;
  tracestate?: string;
  /** Tapbacks on it, one per sender, by a hash of the sender (inbound-recorder.ts); the API lists them. */
  reactions?: Record<string, MessageReaction>;
  /** A received reply: the message it answers. */
  replyTo?: string;
  /** A received message its sender edited (its body is the edited text) or unsent (its body is empty). */
  edited?: boolean;
  editedAt?: string;
  unsent?: boolean;
  unsentAt?: string;
  /** On the embedded store, the position of its message.queued event in the event stream, which its row carries (events/carried-events.ts). */
  queuedSeq?: number;
  /** On the embedded store, its status events as its row carries them (`ev1` … `ev4`), the newest at `statusSeq` (events/carried-events.ts). */
  ev1?: unknown;
  ev2?: unknown;
  ev3?: unknown;
  ev4?: unknown;
  statusSeq?: number;
  createdAt: string;
  updatedAt: string;
}

export interface ConversationDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  teamId: string;
  participant: string;
  isGroup: boolean;
  lastMessage: string;
  /** When the participant last wrote (a received message's time; in a group chat, anyone's); absent until they do. */
  lastInboundAt?: string;
  /** Messages sent to the participant (accepted) since they last wrote; absent before any was sent. */
  sentSinceReply?: number;
  lastMessageAt: string;
  unreadCount: number;
  /** A group chat's name and members, from its relay's group events (inbound-recorder.ts). */
  name?: string;
  participants?: string[];
  createdAt: string;
  updatedAt: string;
}

export interface PhoneNumberDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  number: string;
  label: string | null;
  metadata: Record<string, string>;
  status: 'active' | 'deactivated';
  deactivatedAt: string | null;
  /** This number's own pace, over its organization's (actors/tenant/line-pacing.ts). */
  pacing?: PaceSetting | null;
  /** The relays that send from this number, primary first, then its standbys in order (docs/relay-agent.md, "Standby relays"); absent or empty: any relay that says it owns it. */
  relays?: string[];
  /** The standby the line failed over to while its primary is offline (its `relay.failover`); null or absent when on the primary. */
  failedOverTo?: string | null;
  createdAt: string;
  updatedAt: string;
}

/** A pace as an organization or a number sets it: what it leaves out comes from the level above. */
export interface PaceSetting {
  perSecond?: number;
  burst?: number;
  newContactsPerDay?: number;
  unansweredCap?: number;
  followUpsPerDay?: number;
  jitterMs?: number;
  /** `false` turns quiet hours off. */
  quietHours?: { start: string; end: string } | false;
  timeZone?: string;
}

/** The organization's sending settings (one document per organization, `id` its id): the pace of its sender lines, its delivery window. */
export interface OrgPacingDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  /** Absent until the organization's admins set a pace. */
  pacing?: PaceSetting;
  /** Absent until its admins set it (PUT /api/v1/organization/delivery). */
  delivery?: DeliverySetting;
  /** When the recipients of the messages it sent before line contacts were kept were recorded as line contacts (once). */
  contactsFromHistoryAt?: string;
  updatedAt?: string;
}

/** How long a sent message may go undelivered before it is marked so. */
export interface DeliverySetting {
  undeliveredAfterSeconds: number;
}

/** A recipient a sender line wrote to first, and when: how the new-contact cap of the line survives a restart. */
export interface LineContactDoc {
  [field: string]: unknown;
  /** `<line> <to>`: one document per line and recipient. */
  id: string;
  tenantId: string;
  line: string;
  to: string;
  firstAt: string;
}

export interface IdempotencyDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  requestHash: string;
  /** Absent while the first request is still being answered. */
  response?: { status: number; body: unknown };
  expiresAt: string;
  createdAt: string;
}

/**
 * What a message's stored JSON leaves out on the embedded store: the fields
 * a new message has until a relay takes it, at those values, and those that
 * repeat another field (a sent message's participant is its recipient; a
 * message queued when accepted was queued and last updated at its creation),
 * and those its key columns hold (its team, status, conversation, time...).
 * Every message has each of them (`sentMessage`, the inbound recorder).
 */
export const messageForm: StoredFormSpec = {
  defaults: {
    direction: 'sent',
    from: null,
    attachments: [],
    priority: 0,
    fromNumber: null,
    attempts: 0,
    lastError: null,
    relayId: null,
    sentAt: null,
    deliveredAt: null,
    readAt: null,
  },
  copies: { participant: 'to', queuedAt: 'createdAt', updatedAt: 'createdAt' },
  keyColumns: true,
};

export function messagingCollections(store: Store) {
  return {
    messages: store.collection<MessageDoc>(
      'messages',
      [
        // A team's history, newest first with id breaking ties (the keyset of its cursor); fanout last: its count (which
        // leaves group sends out) is read from the index alone.
        { keys: { tenantId: 1, teamId: 1, createdAt: -1, id: -1, fanout: 1 }, newestFirst: true },
        { keys: { tenantId: 1, teamId: 1, conversationId: 1, createdAt: -1 }, newestFirst: true },
        // The send queue's pages: each sender line's messages of one priority, oldest first (actors/tenant/queue-pages.ts);
        // its grouped count; a status's messages by line, priority and age.
        { keys: { tenantId: 1, status: 1, fromNumber: 1, priority: -1, createdAt: 1, id: 1 } },
        // A retry's backoff: the queue counts only the messages that are due, in SQL on the embedded store.
        { keys: { tenantId: 1, nextAttemptAt: 1 }, sparse: true },
        { keys: { tenantId: 1, jobId: 1, jobIndex: 1, id: 1 }, sparse: true },
        { keys: { tenantId: 1, parentId: 1, createdAt: 1, id: 1 }, sparse: true },
        { keys: { tenantId: 1, outboxAt: 1 }, sparse: true },
      ],
      messageForm,
    ),
    conversations: store.collection<ConversationDoc>('conversations', [
      { keys: { tenantId: 1, teamId: 1, lastMessageAt: -1, id: -1 }, newestFirst: true },
      { keys: { tenantId: 1, teamId: 1, participant: 1 } },
    ]),
    phoneNumbers: store.collection<PhoneNumberDoc>('phone_numbers', [
      { keys: { tenantId: 1, number: 1 }, unique: true },
    ]),
    orgPacing: store.collection<OrgPacingDoc>('org_pacing'),
    lineContacts: store.collection<LineContactDoc>('line_contacts', [
      { keys: { tenantId: 1, line: 1, to: 1 }, unique: true },
    ]),
    idempotency: store.collection<IdempotencyDoc>('idempotency_keys', [{ keys: { tenantId: 1, expiresAt: 1 } }]),
    /** Message statistics (message-rollups.ts). */
    rollups: rollupCollection(store),
    /** Received messages' attachments (attachment-store.ts). */
    attachments: attachmentCollection(store),
  };
}

export type MessagingCollections = ReturnType<typeof messagingCollections>;

/** A tapback on a message, as the API shows it. */
export interface MessageReaction {
  reaction: string;
  emoji?: string;
  from: string;
  at: string;
}

/** What the API shows of a message: everything but the storage fields; its reactions as a list, oldest first. */
export function publicMessage(doc: MessageDoc) {
  const {
    tenantId: _tenant,
    participant: _participant,
    fanout: _fanout,
    nextAttemptAt: _next,
    processingAt: _processing,
    agentCheckpoints: _hops,
    claim: _claim,
    jobIndex: _jobIndex,
    cancelled: _cancelled,
    skipped: _skipped,
    traceparent: _traceparent,
    tracestate: _tracestate,
    queuedSeq: _queuedSeq,
    ev1: _ev1,
    ev2: _ev2,
    ev3: _ev3,
    ev4: _ev4,
    statusSeq: _statusSeq,
    viaSms: _viaSms,
    smsFallbackAt: _smsFallbackAt,
    reactions,
    ...shown
  } = doc;
  // A received message's attachments are file names: a path on the Mac (stored before they were) is never shown.
  const rest = doc.direction === 'received' ? { ...shown, attachments: doc.attachments.map(fileNameOf) } : shown;
  if (!reactions || Object.keys(reactions).length === 0) return rest;
  return { ...rest, reactions: Object.values(reactions).sort((a, b) => a.at.localeCompare(b.at)) };
}

/** Why a queued message waits, and until when (ISO time), as the dispatch answers it; null when it is not waiting. */
export interface Waiting {
  waitingFor: WaitingReason | null;
  notBefore: string | null;
}

/** Every hop of a send a message's record shows, in the order they happen. */
export const hops = [
  'accepted',
  'sms_fallback',
  'handed_to_relay',
  ...agentHops,
  'sent',
  'undelivered',
  'delivered',
  'failed',
] as const;
export type Hop = (typeof hops)[number];

/**
 * When the message passed each hop, in hop order: accepted (stored), given
 * up on iMessage and queued again as SMS (its fallback), handed to a relay (claimed for it; the latest attempt), the hops its agent
 * reported, sent, undelivered (its organization's window passed without a
 * delivery), delivered, and failed. A hop not reached, or not reported (an
 * agent that does not report hops), is left out.
 */
export function checkpointsOf(doc: MessageDoc): Array<{ hop: Hop; at: string }> {
  const at: Partial<Record<Hop, string | null | undefined>> = {
    accepted: doc.createdAt,
    sms_fallback: doc.smsFallbackAt,
    handed_to_relay: doc.processingAt,
    sent: doc.sentAt,
    undelivered: doc.undeliveredAt,
    delivered: doc.deliveredAt,
    failed: doc.failedAt,
  };
  for (const c of doc.agentCheckpoints ?? []) at[c.hop] = c.at;
  return hops.filter((hop) => at[hop]).map((hop) => ({ hop, at: at[hop]! }));
}

export function statusRecord(doc: MessageDoc, waiting: Waiting = { waitingFor: null, notBefore: null }) {
  return {
    id: doc.id,
    status: doc.status,
    ...waiting,
    checkpoints: checkpointsOf(doc),
    jobId: doc.jobId ?? null,
    attempts: doc.attempts,
    lastError: doc.lastError,
    failureReason: doc.failureReason ?? null,
    service: doc.service ?? null,
    undeliveredAt: doc.undeliveredAt ?? null,
    queuedAt: doc.queuedAt,
    sentAt: doc.sentAt,
    deliveredAt: doc.deliveredAt,
    readAt: doc.readAt,
  };
}

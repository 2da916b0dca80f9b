import { Type, type Static } from '@sinclair/typebox';
import { agentHops, deliveryStatus, failureReason, frameLimits, sendService } from '../../relay-protocol/frames.ts';
import { defineProtocol, type MessageOfKind } from '../../runtime/actor.ts';

const id = Type.String({ minLength: 1, maxLength: frameLimits.idLength });
const text = (maxLength: number) => Type.String({ maxLength });
const session = Type.Integer({ minimum: 0 });
const relayReport = { relayId: id, session };

/** A message waiting in the send queue, as the queue knows it. */
export const queueItem = Type.Object(
  {
    id,
    priority: Type.Integer({ minimum: 0, maximum: 100 }),
    fromNumber: Type.Union([text(32), Type.Null()]),
    /** Its recipient, for its line's new-contact cap; absent, it counts as a contact the line knows. */
    to: Type.Optional(text(320)),
    /** Its bulk job or group send; absent for a single send. Sources take turns within a priority. */
    source: Type.Optional(text(64)),
    /** Epoch ms since it has waited to be sent (its acceptance); absent, the queue counts from when it took it. */
    queuedAt: Type.Optional(Type.Integer({ minimum: 0 })),
    /** Its `createdAt` (epoch ms): its place among its line's messages in the store, which the queue pages in that order. */
    acceptedAt: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: false },
);

/** A queued message, wherever it travels: the send committer's and a job's release (`enqueue`), a relay's hand-back (`returned`) and the send queue. */
export type QueueItem = Static<typeof queueItem>;

/** The fields of a stored message (messages/message-store.ts `MessageDoc`) its queue item is made of. */
interface Queueable {
  id: string;
  priority: number;
  fromNumber: string | null;
  to: string;
  jobId?: string;
  parentId?: string;
  createdAt: string;
}

/**
 * A stored message as the queue knows it. Its source is its bulk job or its
 * group send. Read back from the store (`since: 'accepted'`) it has waited
 * since it was accepted; handed over as it is queued (`'taken'`), the queue
 * counts from when it takes it.
 */
export function queueItemOf(m: Queueable, since: 'accepted' | 'taken'): QueueItem {
  const source = m.jobId ?? m.parentId;
  const acceptedAt = Date.parse(m.createdAt);
  const queuedAt = since === 'accepted' ? acceptedAt : NaN;
  return {
    id: m.id,
    priority: m.priority,
    fromNumber: m.fromNumber,
    to: m.to,
    ...(source ? { source } : {}),
    ...(Number.isFinite(queuedAt) ? { queuedAt } : {}),
    ...(Number.isFinite(acceptedAt) ? { acceptedAt } : {}),
  };
}

/** The hops of a send attempt its relay agent reported (relay-protocol/frames.ts `agentCheckpoint`, its time as text like every time here). */
export const agentCheckpoints = Type.Array(
  Type.Object(
    { hop: Type.Union(agentHops.map((h) => Type.Literal(h))), at: text(40) },
    { additionalProperties: false },
  ),
  { maxItems: agentHops.length },
);

/** Credits a relay actor grants one join (`epoch`) of this actor to one of its sessions (actors/relay/relay-credits.ts). */
const creditGrantFields = {
  session,
  /** The tenant actor's join of this session the credits are for (new at every join): another join ignores them. */
  epoch: text(64),
  /** Added to the credits held; negative when the relay's capacity shrank. */
  credits: Type.Integer({ minimum: -frameLimits.maxCapacity, maximum: frameLimits.maxCapacity }),
  capacity: Type.Integer({ minimum: 0, maximum: frameLimits.maxCapacity }),
};
const creditGrant = Type.Object(creditGrantFields, { additionalProperties: false });
export type CreditGrant = Static<typeof creditGrant>;

/** A relay's report on a send attempt. */
const sendReport = {
  messageId: id,
  status: deliveryStatus,
  at: text(40),
  error: Type.Optional(text(frameLimits.errorLength)),
  guid: Type.Optional(text(frameLimits.guidLength)),
  reason: Type.Optional(failureReason),
  service: Type.Optional(sendService),
  /** The send attempt the report is about: a report on an earlier attempt changes nothing. */
  attempt: Type.Integer({ minimum: 1 }),
  /** The hops of the attempt the agent saw, when it reports them. */
  checkpoints: Type.Optional(agentCheckpoints),
};
/** Reports one `statuses` message carries at most. */
export const statusBatch = 256;

/** Messages of the tenant actor (`tenant:<tenantId>`): the organization's send queue and dispatch. */
export const tenantProtocol = defineProtocol(
  'tenant',
  {
    enqueue: { items: Type.Array(queueItem, { maxItems: 10_000 }) },
    /** The periodic reconciliation with the store; `chain` names the one live chain of sweep timers. */
    sweep: { chain: text(128) },
    /** A relay's session is online, or its relay actor lost count of the credits granted: credits are asked for again. */
    'relay-online': relayReport,
    'relay-offline': { ...relayReport, reason: text(200) },
    grant: { relayId: id, ...creditGrantFields },
    /** Messages the relay actor did not send, or took back from a relay that left: queued again in the store, first in line here. */
    returned: { relayId: id, items: Type.Array(queueItem, { maxItems: frameLimits.maxCapacity }) },
    /** A relay's report on a send, through its relay actor, with the credit its end frees when it has one. */
    status: { ...relayReport, ...sendReport, grant: Type.Optional(creditGrant) },
    /** Reports the relay actor passes on together, in order (each as a `status`), with the credits they free between them. */
    statuses: {
      relayId: id,
      reports: Type.Array(Type.Object({ session, ...sendReport }, { additionalProperties: false }), {
        minItems: 1,
        maxItems: statusBatch,
      }),
      grant: Type.Optional(creditGrant),
    },
    /** The relay actor's timer: the relay has not reported on an attempt in time. */
    'send-timeout': { messageId: id, relayId: id, attempt: Type.Integer({ minimum: 0 }) },
    /**
     * A timer: a message's backoff after attempt `attempts` is over. The sweep may have queued it again first, once
     * due; a timer that comes after a later attempt changes nothing. (Timers written without `attempts` act as before.)
     */
    retry: { messageId: id, attempts: Type.Optional(Type.Integer({ minimum: 1 })) },
    /** A bulk job was cancelled: none of its messages is handed out any more. Asked, so the canceller knows the dispatch has heard. */
    'close-source': { source: text(64) },
    /** A timer: a paced line has a free slot again. */
    pace: {},
    /** Sender pacing settings changed in the store: read again. */
    'pacing-changed': {},
    /**
     * Asked: why a queued message is still waiting (a `Hold`), or null when the queue does not hold it. Its line and
     * recipient, when given, answer for a message the queue counts in the store and does not hold in memory.
     */
    waiting: {
      messageId: id,
      fromNumber: Type.Optional(Type.Union([text(32), Type.Null()])),
      to: Type.Optional(text(320)),
    },
    /** Asked: when a bulk job's queued messages should all be sent, from its lines' pace (epoch ms), or null. */
    estimate: { source: text(64) },
    /**
     * Asked: when `count` messages queued at `startAt` (a scheduled job's)
     * would all be sent, from the lines' pace and a sample of their recipients
     * (epoch ms), or null.
     */
    forecast: {
      startAt: Type.Integer({ minimum: 0 }),
      count: Type.Integer({ minimum: 0, maximum: 10_000 }),
      sample: Type.Array(
        Type.Object(
          { to: text(320), fromNumber: Type.Union([text(32), Type.Null()]) },
          { additionalProperties: false },
        ),
        { maxItems: 500 },
      ),
    },
    /** A recipient wrote to one of the organization's relays (`from`, as conversations key it; `at` epoch ms): the caps on messages they did not answer lift. */
    inbound: { from: text(320), at: Type.Integer({ minimum: 0 }) },
    /** Asked: a sender line's usage (`LinePacing.usage`). */
    usage: { line: text(64) },
  },
  // What the API shows of the queue and the lines is read from the activated state, not behind a bulk job's messages.
  { queries: ['waiting', 'estimate', 'forecast', 'usage'] },
);

/** What a queued message can wait for, as its status record says (`waiting`). */
export const waitingReasons = [
  'line_rate',
  'new_contact_cap',
  'unanswered_cap',
  'follow_up_cap',
  'quiet_hours',
  'relay_offline',
  'relay_busy',
  'retry_backoff',
  'relay_failover_check',
  'queue',
] as const;

/** Which relay session a report comes from. */
export type RelayReport = { relayId: string; session: number };
/** A relay's report on one attempt of a send, as the tenant actor handles it. */
export type StatusReport = Omit<MessageOfKind<typeof tenantProtocol, 'status'>, 'kind'>;

/** Reports passed on together (`statuses`), each as its own `status` would be, the credits they free with the last. */
export function reportsOf(m: MessageOfKind<typeof tenantProtocol, 'statuses'>): StatusReport[] {
  const last = m.reports.length - 1;
  return m.reports.map((r, i) => ({ relayId: m.relayId, ...r, ...(i === last && m.grant ? { grant: m.grant } : {}) }));
}

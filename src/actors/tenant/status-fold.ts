import { changeEventId, domainEvent, messageEventData, type DomainEvent } from '../../events/event-stream.ts';
import type { MessageDoc } from '../../messages/message-store.ts';
import type { Filter } from '../../store/collection.ts';
import type { AgentCheckpoint } from '../../relay-protocol/frames.ts';
import type { StatusReport } from './protocol.ts';

/** One message's status change, as one compare-and-set on the message as it was read, with the events it causes. */
export interface StatusChange {
  filter: Filter;
  set: Record<string, unknown>;
  events: DomainEvent[];
  /** The message's outbox was empty when read: once published, the events may take the outbox marker with them. */
  exclusive: boolean;
  /** The statuses this change makes the message reach, in order (a folded sent and delivered reach both; read is not a status). */
  reached: Array<'sent' | 'delivered'>;
}

/** The steps a send is reported through, in the order they happen; a report of a later one says the earlier ones happened. */
const steps = ['sent', 'delivered', 'read'] as const;
type Step = (typeof steps)[number];

/** The event of each step, and the field of its time that its `data` adds to the spec's message fields (message.sent adds none). */
const stepEvents = {
  sent: ['message.sent', null],
  delivered: ['message.delivered', 'deliveredAt'],
  read: ['message.read', 'readAt'],
} as const;

/**
 * How many steps the message is through (processing: none); null when no report moves it (queued, failed). An
 * iMessage queued again to go as SMS (`if_undelivered`) was sent: its delivery, reported before the SMS is
 * claimed, still applies, and the SMS is not sent.
 */
function stepsDone(m: MessageDoc): number | null {
  if (m.status === 'processing') return 0;
  if (m.status === 'queued' && m.viaSms === true && m.smsFallbackAt) return 1;
  if (m.status === 'sent') return 1;
  if (m.status === 'delivered') return m.readAt === null ? 2 : 3;
  return null;
}

/**
 * A message's one event of a step, built before the write that records it
 * (with the status that write sets), under an id derived from the message,
 * so every writer of the step makes the same event.
 */
function stepEvent(m: MessageDoc, step: Step, status: 'sent' | 'delivered', at: string): DomainEvent {
  const [event, timeField] = stepEvents[step];
  const data = { ...messageEventData({ ...m, status }), ...(timeField ? { [timeField]: at } : {}) };
  // The SMS sent once its iMessage was given up on is a second send: its own message.sent.
  const subject = step === 'sent' && m.smsFallbackAt && m.viaSms === true ? `${m.id}:sms` : m.id;
  return domainEvent(event, m, data, changeEventId(event, subject));
}

/**
 * What a report of a send changes on the message as it stands, as the
 * one-by-one path writes it: only the message's current attempt on the
 * reporting relay counts, and no report moves a message backwards. A report
 * takes the message through every step up to its own that was not reported
 * yet (a `read` first is sent, delivered and read at its time), one event
 * per step, in order; a step already recorded is never emitted again. Null
 * when it changes nothing. `failed` is not folded (it schedules a retry).
 */
export function reportChange(
  m: MessageDoc,
  r: StatusReport,
  now: string,
): { set: Record<string, unknown>; events: DomainEvent[]; reached: StatusChange['reached'] } | null {
  if (m.relayId !== r.relayId || m.attempts !== r.attempt || r.status === 'failed') return null;
  const done = stepsDone(m);
  const reported = steps.indexOf(r.status) + 1;
  if (done === null || reported <= done) return null;
  const status = r.status === 'sent' ? 'sent' : 'delivered';
  const set: Record<string, unknown> = {
    status,
    updatedAt: now,
    // A delivered iMessage whose SMS was queued: the SMS is not sent (its claim finds the message no longer queued).
    // Its checkpoints then are the iMessage's: no sms_fallback among them (its event stays in the history).
    ...(m.status === 'queued' ? { viaSms: false, smsFallbackAt: null } : {}),
    ...(r.guid ? { guid: r.guid } : {}),
    ...(r.service && r.service !== m.service ? { service: r.service } : {}),
  };
  const hops = agentCheckpointsOf(m, r);
  if (hops) set.agentCheckpoints = hops;
  const events = checkpointEvents(m, done === 0, hops?.slice(m.agentCheckpoints?.length ?? 0) ?? []);
  const reached: StatusChange['reached'] = [];
  for (const step of steps.slice(done, reported)) {
    // A retry that is sent clears why the attempt before failed (the reason only when there is one: no bytes for others).
    if (step === 'sent')
      Object.assign(set, { sentAt: r.at, lastError: null, ...(m.failureReason ? { failureReason: null } : {}) });
    else set[stepEvents[step][1]] = r.at;
    if (step !== 'read') reached.push(step);
    events.push(stepEvent(m, step, status, r.at));
  }
  return { set, events, reached };
}

/**
 * A `message.checkpoint` per hop of the attempt that this change records
 * first: handed to the relay (with the attempt's first report) and each
 * agent hop the report adds, in the order the agent reported them, under ids derived from the
 * message, its attempt and the hop. Accepted, sent and delivered have
 * events of their own.
 */
function checkpointEvents(m: MessageDoc, firstReport: boolean, added: AgentCheckpoint[]): DomainEvent[] {
  const passed = [...(firstReport && m.processingAt ? [{ hop: 'handed_to_relay', at: m.processingAt }] : []), ...added];
  // Each hop is passed on the way to sent: the message was processing.
  const data = messageEventData({ ...m, status: 'processing' });
  return passed.map((c) =>
    domainEvent(
      'message.checkpoint',
      m,
      { ...data, hop: c.hop, at: c.at, attempt: m.attempts },
      changeEventId('message.checkpoint', `${m.id}:${m.attempts}:${c.hop}`),
    ),
  );
}

/** The agent's hops of the current attempt with those the report adds, each hop once (the first report of it wins); undefined when it adds none. */
function agentCheckpointsOf(m: MessageDoc, r: StatusReport): AgentCheckpoint[] | undefined {
  if (!r.checkpoints?.length) return undefined;
  const known = m.agentCheckpoints ?? [];
  const added = r.checkpoints.filter(
    (c, i) => !known.some((k) => k.hop === c.hop) && r.checkpoints!.findIndex((o) => o.hop === c.hop) === i,
  );
  return added.length > 0 ? [...known, ...added] : undefined;
}

/**
 * Reports, in the order they came, folded over the messages as read: one
 * change per message carrying what all its reports did (a `sent` and its
 * `delivered` in one batch are one write with both events), guarded by the
 * status, relay, attempt and read time it was read with.
 */
export function foldReports(read: Map<string, MessageDoc>, reports: StatusReport[], now: string): StatusChange[] {
  const changes = new Map<string, StatusChange>();
  const current = new Map<string, MessageDoc>();
  for (const r of reports) {
    const m = current.get(r.messageId) ?? read.get(r.messageId);
    if (!m) continue;
    const change = reportChange(m, r, now);
    if (!change) continue;
    const first = read.get(r.messageId)!;
    const folded = changes.get(r.messageId) ?? {
      filter: {
        id: first.id,
        relayId: first.relayId,
        attempts: first.attempts,
        status: first.status,
        readAt: first.readAt,
      },
      set: {},
      events: [],
      exclusive: Object.keys((first as { outbox?: object }).outbox ?? {}).length === 0,
      reached: [],
    };
    Object.assign(folded.set, change.set);
    folded.events.push(...change.events);
    folded.reached.push(...change.reached);
    changes.set(r.messageId, folded);
    current.set(r.messageId, { ...m, ...change.set } as MessageDoc);
  }
  return [...changes.values()];
}

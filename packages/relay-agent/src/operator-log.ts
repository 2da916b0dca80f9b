import type { Logger } from './agent-logger.ts';
import type { ChangeFrame, InboundFrame } from 'relaybox-relay-protocol/frames.ts';
import type { SendRecord, StatusStep } from './send-journal.ts';

/** What the periodic summary line counts, per interval. */
interface Tally {
  accepted: number;
  sent: number;
  delivered: number;
  read: number;
  failed: number;
  inbound: number;
}

const emptyTally = (): Tally => ({ accepted: 0, sent: 0, delivered: 0, read: 0, failed: 0, inbound: 0 });

/** What the agent holds right now, for the summary line. */
export interface AgentSnapshot {
  relayId: string | undefined;
  connected: boolean;
  /** Accepted, not yet handed to Messages. */
  queued: number;
  /** Handed to Messages, no sent/failed yet. */
  unfinished: number;
  inboundUnacked: number;
}

/**
 * The lines an operator reads: connection changes, every send attempt and its
 * outcome, inbound messages forwarded, and a one-line summary per interval.
 * Each line is a sentence that stands alone in the human format, and carries
 * an `event` field (and the ids in their own fields) for the JSON format.
 * Message bodies are never part of a line.
 */
export class OperatorLog {
  private tally = emptyTally();
  private tallySinceMs = Date.now();
  private connectedSinceMs: number | undefined;
  private disconnectedSinceMs: number | undefined = Date.now();

  constructor(private readonly log: Logger) {}

  connected(server: string, auth: 'credential' | 'registration token'): void {
    this.log.info({ event: 'connected', server, auth }, `connected to ${server}, authenticating with the ${auth}`);
  }

  online(relayId: string, registered: boolean, inboundFrom: number): void {
    this.connectedSinceMs = Date.now();
    this.disconnectedSinceMs = undefined;
    const how = registered ? 'registered and online' : 'online';
    this.log.info(
      { event: 'online', relayId, registered, inboundFrom },
      `${how} as relay ${relayId}; forwarding received messages after chat.db row ${inboundFrom}`,
    );
  }

  disconnected(code: number, reason: string, wasOnline: boolean): void {
    const upMs = this.connectedSinceMs === undefined ? undefined : Date.now() - this.connectedSinceMs;
    this.connectedSinceMs = undefined;
    this.disconnectedSinceMs ??= Date.now();
    const why = reason || closeCodeMeaning(code);
    const after = upMs === undefined ? '' : ` after ${formatDuration(upMs)} online`;
    this.log.warn(
      { event: 'disconnected', code, reason: why, wasOnline, upMs },
      `disconnected (${code}: ${why})${after}`,
    );
  }

  reconnecting(delayMs: number, attempt: number): void {
    this.log.info(
      { event: 'reconnecting', delayMs, attempt },
      `reconnecting in ${formatDuration(delayMs)} (try ${attempt})`,
    );
  }

  /** `message` says who refused what, e.g. "the server refused the registration token: ...". */
  refused(message: string): void {
    this.log.error({ event: 'refused', reason: message }, message);
  }

  /** `traceparent`: the send frame's, so the line can be found from the server's trace. */
  sendAccepted(record: SendRecord, queued: number, traceparent?: string): void {
    this.tally.accepted += 1;
    this.log.info(
      {
        event: 'send.accepted',
        messageId: record.messageId,
        attempt: record.attempt,
        to: record.to,
        attachments: record.attachmentUrls.length,
        queued,
        ...(traceparent ? { traceparent } : {}),
      },
      `send ${record.messageId} attempt ${record.attempt} to ${record.to} accepted (${queued} waiting)`,
    );
  }

  sendRepeated(record: SendRecord): void {
    this.log.info(
      { event: 'send.repeated', messageId: record.messageId, attempt: record.attempt, phase: record.phase },
      `send ${record.messageId} attempt ${record.attempt} was already accepted (${record.phase}); not sent again, its statuses are reported again`,
    );
  }

  step(record: SendRecord, step: StatusStep): void {
    this.tally[step.status] += 1;
    const fields = {
      event: `send.${step.status}`,
      messageId: record.messageId,
      attempt: record.attempt,
      status: step.status,
      ...(step.error ? { error: step.error } : {}),
      ...(step.reason ? { reason: step.reason } : {}),
    };
    const text = `send ${record.messageId} attempt ${record.attempt} ${step.status}${step.error ? `: ${step.error}` : ''}`;
    if (step.status === 'failed') this.log.warn(fields, text);
    else this.log.info(fields, text);
  }

  inboundForwarded(frame: InboundFrame): void {
    this.tally.inbound += 1;
    const where = frame.isGroup && frame.chatGuid ? ` in ${frame.chatGuid}` : '';
    this.log.info(
      {
        event: 'inbound.forwarded',
        rowId: frame.rowId,
        guid: frame.guid,
        from: frame.from,
        isGroup: frame.isGroup,
        attachments: frame.files?.length ?? 0,
        ...(frame.reaction ? { reaction: frame.reaction.kind, removed: frame.reaction.removed } : {}),
        ...(frame.group ? { group: frame.group.change } : {}),
      },
      `${whatOf(frame)} from ${frame.from}${where} forwarded (chat.db row ${frame.rowId})`,
    );
  }

  /** Logs a change frame sent: an edit or unsend of a received message. */
  changeForwarded(frame: ChangeFrame): void {
    this.log.info(
      { event: 'change.forwarded', rowId: frame.rowId, guid: frame.guid, change: frame.change, at: frame.at },
      `${frame.change} message (chat.db row ${frame.rowId}) forwarded`,
    );
  }

  /** Logs the interval's one-line summary and starts a new interval. */
  summary(now: AgentSnapshot): void {
    const t = this.tally;
    const periodMs = Date.now() - this.tallySinceMs;
    this.tally = emptyTally();
    this.tallySinceMs = Date.now();
    const state = now.connected
      ? `online as ${now.relayId ?? 'a new relay'}`
      : `offline for ${formatDuration(Date.now() - (this.disconnectedSinceMs ?? Date.now()))}`;
    this.log.info(
      {
        event: 'summary',
        connected: now.connected,
        relayId: now.relayId,
        periodMs,
        ...t,
        queued: now.queued,
        unfinished: now.unfinished,
        inboundUnacked: now.inboundUnacked,
      },
      `${state}; last ${formatDuration(periodMs)}: ${t.accepted} accepted, ${t.sent} sent, ${t.delivered} delivered, ${t.failed} failed, ${t.inbound} received; ` +
        `now ${now.queued} waiting, ${now.unfinished} with Messages`,
    );
  }
}

export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** The WebSocket close codes an operator actually meets, said in words when the server gave no reason. */
function closeCodeMeaning(code: number): string {
  switch (code) {
    case 1000:
      return 'closed normally';
    case 1001:
      return 'the server is shutting down';
    case 1006:
      return 'the connection was lost';
    case 1008:
      return 'the server closed it for a protocol violation';
    case 1011:
      return 'server error';
    default:
      return 'closed';
  }
}

/** What an inbound frame forwards, in words: a message, a tapback (or its removal), a group event. */
function whatOf(frame: InboundFrame): string {
  if (frame.reaction) return `${frame.reaction.kind} tapback${frame.reaction.removed ? ' removal' : ''}`;
  if (frame.group) return `group event (${frame.group.change.replace('_', ' ')})`;
  return 'received message';
}

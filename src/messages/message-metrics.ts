import { Counter, register } from 'prom-client';

/** What happened to a message, counted where the change is stored. */
export type MessageOutcome = 'accepted' | 'sent' | 'delivered' | 'failed' | 'dead_lettered';

const messages = (register.getSingleMetric('relaybox_messages_total') as Counter | undefined) ?? new Counter({
  name: 'relaybox_messages_total',
  help: 'Messages by outcome, counted where the change is stored: accepted (a single send or a bulk job\'s), sent, delivered, failed (after its last attempt) and dead_lettered (every failed one is also dead-lettered)',
  labelNames: ['outcome'],
});

const children = new Map<MessageOutcome, Counter.Internal>();

export function countMessages(outcome: MessageOutcome, n = 1): void {
  if (n <= 0) return;
  let child = children.get(outcome);
  if (!child) children.set(outcome, (child = messages.labels(outcome)));
  child.inc(n);
}

/** The outcome a stored status event stands for, if any (`message.read` is none). */
export function outcomeOfEvent(event: string): MessageOutcome | undefined {
  return event === 'message.sent' ? 'sent' : event === 'message.delivered' ? 'delivered' : undefined;
}

import { Counter, Histogram, register } from 'prom-client';

/** What happened to a message, counted where the change is stored. */
export type MessageOutcome = 'accepted' | 'sent' | 'delivered' | 'failed' | 'dead_lettered';

const messages =
  (register.getSingleMetric('relaybox_messages_total') as Counter | undefined) ??
  new Counter({
    name: 'relaybox_messages_total',
    help: "Messages by outcome, counted where the change is stored: accepted (a single send or a bulk job's), sent, delivered, failed (after its last attempt) and dead_lettered (every failed one is also dead-lettered)",
    labelNames: ['outcome'],
  });

const children = new Map<MessageOutcome, Counter.Internal>();

export function countMessages(outcome: MessageOutcome, n = 1): void {
  if (n <= 0) return;
  let child = children.get(outcome);
  if (!child) children.set(outcome, (child = messages.labels(outcome)));
  child.inc(n);
}

const latency =
  (register.getSingleMetric('relaybox_message_latency_seconds') as Histogram | undefined) ??
  new Histogram({
    name: 'relaybox_message_latency_seconds',
    help: "From a message's acceptance to its status sent, and to delivered, observed when the status is stored",
    labelNames: ['to'],
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
  });

export function observeLatency(to: 'sent' | 'delivered', seconds: number): void {
  if (Number.isFinite(seconds) && seconds >= 0) latency.labels(to).observe(seconds);
}

const hopLatency =
  (register.getSingleMetric('relaybox_message_hop_seconds') as Histogram | undefined) ??
  new Histogram({
    name: 'relaybox_message_hop_seconds',
    help: "From a message's acceptance to each hop of its send (handed_to_relay, the agent's relay_received, handed_to_app and seen_in_database, sent, delivered), observed when the hop is stored",
    labelNames: ['hop'],
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
  });

/** Accept → `hop`, from the message's acceptance time (ISO) to the hop's. */
export function observeHop(hop: string, acceptedAt: string, at: string): void {
  const seconds = (Date.parse(at) - Date.parse(acceptedAt)) / 1000;
  if (Number.isFinite(seconds)) hopLatency.labels(hop).observe(Math.max(0, seconds));
}

const sendWait =
  (register.getSingleMetric('relaybox_message_send_wait_seconds') as Histogram | undefined) ??
  new Histogram({
    name: 'relaybox_message_send_wait_seconds',
    help: "From a message's acceptance, or from when a relay of its organization came online if that is later, to its status sent: the delivery SLO's clock, which does not run while no relay is online",
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600],
  });

export function observeSendWait(seconds: number): void {
  if (Number.isFinite(seconds)) sendWait.observe(Math.max(0, seconds));
}

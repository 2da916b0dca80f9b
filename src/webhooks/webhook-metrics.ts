import { Counter, Gauge, Histogram, register } from 'prom-client';

function singleton<T>(name: string, make: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? make();
}

/** Attempts by outcome: succeeded, retrying (failed, another attempt is scheduled), failed (given up, or 410). No per-webhook label. */
export const deliveryAttempts = singleton(
  'relaybox_webhook_deliveries_total',
  () =>
    new Counter({
      name: 'relaybox_webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome (succeeded, retrying, failed)',
      labelNames: ['outcome'],
    }),
);

export const deliveryDuration = singleton(
  'relaybox_webhook_delivery_duration_seconds',
  () =>
    new Histogram({
      name: 'relaybox_webhook_delivery_duration_seconds',
      help: 'Time from the start of a webhook delivery attempt to its answer',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    }),
);

/** The webhook delivery SLO's clock: from the event to the start of its first attempt, whatever the endpoint then answers. */
const firstAttemptDelay = singleton(
  'relaybox_webhook_first_attempt_delay_seconds',
  () =>
    new Histogram({
      name: 'relaybox_webhook_first_attempt_delay_seconds',
      help: "Time from an event to the start of the first attempt to deliver it to a webhook (the endpoint's answer does not count)",
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900],
    }),
);

/** A first attempt starts now, for an event of time `timestamp` (an ISO time; anything else is not observed). */
export function observeFirstAttempt(timestamp: unknown, now = Date.now()): void {
  const at = typeof timestamp === 'string' ? Date.parse(timestamp) : NaN;
  if (Number.isFinite(at)) firstAttemptDelay.observe(Math.max(0, (now - at) / 1000));
}

/** Deliveries this process holds waiting for a slot or in flight. */
let pendingNow = () => 0;
export function exposePendingDeliveries(read: () => number): void {
  pendingNow = read;
  singleton(
    'relaybox_webhook_pending_deliveries',
    () =>
      new Gauge({
        name: 'relaybox_webhook_pending_deliveries',
        help: 'Webhook deliveries waiting for an attempt or in flight in this process',
        collect() {
          this.set(pendingNow());
        },
      }),
  );
}

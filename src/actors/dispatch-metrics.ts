import { Gauge, register } from 'prom-client';
import type { Transport } from '../runtime/types.ts';
import { relayProtocol } from './relay/protocol.ts';
import type { RelayState } from './relay/relay-state.ts';
import { tenantProtocol } from './tenant/protocol.ts';
import { priorityBands } from './tenant/send-queue.ts';
import type { TenantState } from './tenant/tenant-state.ts';

/**
 * The send queues and relays this worker runs, read from the actors' states
 * when Prometheus scrapes: a tenant actor counts its whole due queue (each
 * line's head held, the rest counted in the store) and holds its online
 * relays while it has work, a relay actor its sends in flight. Each
 * worker reports what it holds: sum the counts and take the max of the ages
 * across workers.
 */
export function exposeDispatchMetrics(runtime: Pick<Transport, 'statesOf'>): void {
  const tenants = () => runtime.statesOf(tenantProtocol.type) as Iterable<TenantState>;
  const relays = () => runtime.statesOf(relayProtocol.type) as Iterable<RelayState>;
  gauge({
    name: 'relaybox_queue_oldest_message_age_seconds',
    help: 'How long the oldest message waiting in a send queue has waited since it was accepted, by priority band (0 when none waits)',
    labelNames: ['band'],
    collect(set) {
      const oldest = priorityBands.map((): number | undefined => undefined);
      for (const state of tenants()) {
        state.queue.oldestByBand().forEach((at, i) => {
          if (at !== undefined && (oldest[i] === undefined || at < oldest[i]!)) oldest[i] = at;
        });
      }
      const now = Date.now();
      priorityBands.forEach(({ band }, i) =>
        set({ band }, oldest[i] === undefined ? 0 : Math.max(0, (now - oldest[i]!) / 1000)),
      );
    },
  });
  total(
    'relaybox_queue_messages',
    'Messages waiting in the send queues, due and not yet handed to a relay',
    tenants,
    (state) => state.queue.size,
  );
  total(
    'relaybox_tenants_waiting_for_relay',
    'Organizations with messages waiting in their send queue and no relay online',
    tenants,
    (state) => (state.queue.size > 0 && state.relays.size === 0 ? 1 : 0),
  );
  total(
    'relaybox_relay_send_capacity',
    'Sends the online relays take at once, as each declared (its capacity): the credits they grant',
    relays,
    (state) => (state.doc?.status === 'online' ? state.credits.capacity : 0),
  );
  total(
    'relaybox_relay_sends_in_flight',
    'Sends handed to relays and not yet reported on: the capacity in use',
    relays,
    (state) => state.credits.size,
  );
}

/** A gauge with no labels: the sum of `of` over the states. */
function total<S>(name: string, help: string, states: () => Iterable<S>, of: (state: S) => number): void {
  gauge({
    name,
    help,
    collect(set) {
      let n = 0;
      for (const state of states()) n += of(state);
      set({}, n);
    },
  });
}

function gauge(opts: {
  name: string;
  help: string;
  labelNames?: string[];
  collect: (set: (labels: Record<string, string>, value: number) => void) => void;
}): void {
  register.removeSingleMetric(opts.name);
  new Gauge<string>({
    name: opts.name,
    help: opts.help,
    labelNames: opts.labelNames ?? [],
    collect() {
      opts.collect((labels, value) => this.set(labels, value));
    },
  });
}

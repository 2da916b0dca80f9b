import { Counter, Histogram, register } from 'prom-client';
import type { Logger } from '../log.ts';
import type { ActorDefinition, ActorMessage, Envelope, SendOptions } from './types.ts';

export type DeliveryOutcome =
  | { ok: true; value: unknown }
  | { ok: false; error: string; deliveries: number };

export interface ActorHostOptions {
  defaultShards: number;
  maxDeliveries: number;
  redeliveryDelayMs: number;
}

type SendFn = (type: string, key: string, msg: ActorMessage, opts?: SendOptions) => Promise<string>;

const handled = singleton('relaybox_runtime_messages_handled_total', () => new Counter({
  name: 'relaybox_runtime_messages_handled_total',
  help: 'Actor messages handled, by actor type and outcome (ok, retried, dead_letter)',
  labelNames: ['type', 'outcome'],
}));

const handlerSeconds = singleton('relaybox_runtime_handler_duration_seconds', () => new Histogram({
  name: 'relaybox_runtime_handler_duration_seconds',
  help: 'Time an actor handler took, by actor type',
  labelNames: ['type'],
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
}));

/** Metrics live on the process-wide registry; tests create several runtimes in one process. */
function singleton<T>(name: string, make: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? make();
}

class TerminalDeliveryError extends Error {}

/**
 * Runs an envelope's handler, both transports alike: a handler that throws is
 * run again after `redeliveryDelayMs`, up to `maxDeliveries` deliveries in all;
 * a message no actor can handle fails at once.
 */
export class ActorHost {
  private readonly actors = new Map<string, ActorDefinition>();

  constructor(
    defs: ActorDefinition[],
    private readonly opts: ActorHostOptions,
    private readonly log: Logger,
    private readonly send: SendFn,
  ) {
    for (const def of defs) this.actors.set(def.type, def);
  }

  get types(): string[] {
    return [...this.actors.keys()];
  }

  shardsOf(type: string): number {
    return this.actors.get(type)?.shards ?? this.opts.defaultShards;
  }

  has(type: string): boolean {
    return this.actors.has(type);
  }

  /** `previousDeliveries` counts deliveries already made elsewhere (a reclaimed entry). */
  async deliver(env: Envelope, previousDeliveries = 0): Promise<DeliveryOutcome> {
    let delivery = previousDeliveries;
    let lastError = '';
    while (delivery < this.opts.maxDeliveries) {
      delivery++;
      const started = performance.now();
      try {
        const value = await this.runOnce(env, delivery);
        handlerSeconds.observe({ type: env.type }, (performance.now() - started) / 1000);
        handled.inc({ type: env.type, outcome: 'ok' });
        return { ok: true, value };
      } catch (err) {
        lastError = err instanceof Error ? err.message : String(err);
        if (err instanceof TerminalDeliveryError) break;
        this.log.warn({ actor: `${env.type}:${env.key}`, msgId: env.id, delivery, err }, 'actor handler failed');
        if (delivery < this.opts.maxDeliveries) {
          handled.inc({ type: env.type, outcome: 'retried' });
          await sleep(this.opts.redeliveryDelayMs);
        }
      }
    }
    handled.inc({ type: env.type, outcome: 'dead_letter' });
    return { ok: false, error: lastError, deliveries: delivery };
  }

  private async runOnce(env: Envelope, delivery: number): Promise<unknown> {
    const def = this.actors.get(env.type);
    if (!def) throw new TerminalDeliveryError(`no actor type "${env.type}"`);
    const handler = def.handlers[env.msg.kind];
    if (!handler) throw new TerminalDeliveryError(`actor type "${env.type}" has no handler for "${env.msg.kind}"`);
    const log = this.log.child({ actor: `${env.type}:${env.key}`, msgId: env.id });
    return handler({ type: env.type, key: env.key, msgId: env.id, delivery, log, send: this.send }, env.msg);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

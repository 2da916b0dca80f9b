import { randomUUID } from 'node:crypto';
import { AppError, errorCodes, type ErrorCode } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { RuntimeConfig } from './types.ts';
import { ActorHost, type DeliveryOutcome } from './actor-host.ts';
import { Mailboxes } from './mailboxes.ts';
import { RecentIds } from './recent-ids.ts';
import { newEnvelope, tenantOfEnvelope } from './envelope.ts';
import { timerAfter, type DueTimer } from './due-timer.ts';
import type { WorkClass } from './work-lane.ts';
import type { TraceCarrier } from '../tracing/trace-context.ts';
import type {
  ActorDefinition,
  ActorMessage,
  ActorTypeStats,
  AskFailure,
  DeadLetter,
  Envelope,
  SendOptions,
  Transport,
} from './types.ts';

interface Delivery {
  env: Envelope;
  reply: ((outcome: DeliveryOutcome) => void) | undefined;
  /** When it entered its mailbox (a delayed message: when it fell due). */
  postedAt: number;
  /** Bulk and maintenance work waits for a slice of the mailboxes' lane (work-lane.ts). */
  workClass: WorkClass;
}

/**
 * The embedded default: every actor runs in this process. Timers are
 * in-process, so they do not survive a restart; durable work is recovered
 * from the store by the actors that own it.
 */
export class LocalTransport implements Transport {
  readonly name = 'local' as const;
  private host: ActorHost | undefined;
  private readonly serial = new Mailboxes<Delivery>(
    (items) => this.handle(items),
    (a, b) => this.requireHost().together(a.env, b.env),
    undefined,
    (d) => d.workClass,
    (d) => tenantOfEnvelope(d.env),
  );
  /** Timers not yet due, with the actor type each is for. */
  private readonly timers = new Map<DueTimer, string>();
  private readonly dead = new Map<string, DeadLetter[]>();
  private readonly pending = new Map<string, number>();
  private stopping = false;
  private nodeHandler: ((payload: unknown) => void) | undefined;
  private readonly sentOnce: RecentIds;
  /** One process owns every key until it stops. */
  private readonly ownership = new AbortController();
  readonly nodeId = 'local';

  constructor(
    private readonly config: RuntimeConfig,
    private readonly log: Logger,
  ) {
    this.sentOnce = new RecentIds(config.dedupeTtlMs);
  }

  async publishToNode(_node: string, payload: unknown): Promise<void> {
    // One process is every node; a copy keeps sender and receiver from sharing objects, as on the wire.
    const copy = structuredClone(payload);
    queueMicrotask(() => this.nodeHandler?.(copy));
  }

  onNodeMessage(handler: (payload: unknown) => void): void {
    this.nodeHandler = handler;
  }

  async start(actors: ActorDefinition[], _opts?: { consume: boolean }): Promise<void> {
    this.host = new ActorHost(actors, this.config, this.log, (t, k, m, o) => this.send(t, k, m, o));
    this.host.states.start();
  }

  statesOf(type: string): Iterable<unknown> {
    return this.host?.states.activated(type) ?? [];
  }

  liveStates(): number {
    return this.host?.states.size ?? 0;
  }

  async send(type: string, key: string, msg: ActorMessage, opts: SendOptions = {}): Promise<string> {
    const env = this.envelope(type, key, msg, opts.onceId, opts.trace);
    if (opts.onceId && !this.sentOnce.add(opts.onceId)) return env.id;
    if (opts.delayMs && opts.delayMs > 0) {
      const timer = timerAfter(opts.delayMs, () => {
        this.timers.delete(timer);
        this.dispatch(env, undefined, opts.workClass);
      });
      this.timers.set(timer, type);
    } else {
      this.dispatch(env, undefined, opts.workClass);
    }
    return env.id;
  }

  ask<T = unknown>(type: string, key: string, msg: ActorMessage, timeoutMs = this.config.askTimeoutMs): Promise<T> {
    const env = this.envelope(type, key, msg);
    env.replyTo = { node: this.nodeId, askId: env.id };
    return new Promise<T>((resolve, reject) => {
      const timer = timerAfter(timeoutMs, () => reject(askTimeout(type, timeoutMs)));
      const reply = (outcome: DeliveryOutcome) => {
        timer.cancel();
        if (outcome.ok) resolve(outcome.value as T);
        else reject(askError(type, outcome.error, outcome.answer));
      };
      // A query is answered from the key's activated state at once; else it waits its turn (and activates the key).
      const host = this.requireHost();
      if (!host.isQuery(env)) return this.dispatch(env, reply);
      void host.query(env).then((outcome) => (outcome ? reply(outcome) : this.dispatch(env, reply)));
    });
  }

  async deadLetters(type: string, limit = 100): Promise<DeadLetter[]> {
    return (this.dead.get(type) ?? []).slice(-limit);
  }

  async stats(): Promise<ActorTypeStats[]> {
    const host = this.requireHost();
    const timers = new Map<string, number>();
    for (const type of this.timers.values()) timers.set(type, (timers.get(type) ?? 0) + 1);
    const oldest = new Map<string, number>();
    for (const { env, postedAt } of this.serial.heads())
      oldest.set(env.type, Math.min(oldest.get(env.type) ?? Infinity, postedAt));
    const now = Date.now();
    return host.types.map((type) => ({
      type,
      pending: this.pending.get(type) ?? 0,
      oldestAgeSeconds: oldest.has(type) ? Math.max(0, (now - oldest.get(type)!) / 1000) : 0,
      deadLetters: this.dead.get(type)?.length ?? 0,
      timers: timers.get(type) ?? 0,
    }));
  }

  async ping(): Promise<void> {}

  async stop(): Promise<void> {
    this.stopping = true;
    this.ownership.abort();
    for (const timer of this.timers.keys()) timer.cancel();
    this.timers.clear();
    await this.serial.idle();
    this.host?.states.stop();
  }

  /** `id` is set for what a handler sends: those still go out while a stop lets in-flight handlers finish. */
  private envelope(type: string, key: string, msg: ActorMessage, id?: string, trace?: TraceCarrier): Envelope {
    if (this.stopping && id === undefined) throw new AppError('service_unavailable', 'runtime is shutting down');
    const host = this.requireHost();
    if (!host.has(type)) throw new Error(`unknown actor type "${type}"`);
    return newEnvelope(id ?? randomUUID(), type, key, msg, trace);
  }

  private dispatch(env: Envelope, reply?: (outcome: DeliveryOutcome) => void, workClass: WorkClass = 1): void {
    this.requireHost();
    this.pending.set(env.type, (this.pending.get(env.type) ?? 0) + 1);
    this.serial.post(`${env.type}\u0000${env.key}`, { env, reply, postedAt: Date.now(), workClass });
  }

  private async handle(items: Delivery[]): Promise<void> {
    const host = this.requireHost();
    const outcomes = await host.deliverBatch(
      items.map((d) => ({ env: d.env, previousDeliveries: 0 })),
      this.ownership.signal,
    );
    for (const [i, { env, reply }] of items.entries()) {
      const outcome = outcomes[i]!;
      this.pending.set(env.type, (this.pending.get(env.type) ?? 1) - 1);
      if (!outcome.ok && outcome.deadLetter) this.deadLetter(env, outcome.error, outcome.deliveries);
      reply?.(outcome);
    }
  }

  private deadLetter(envelope: Envelope, error: string, deliveries: number): void {
    const list = this.dead.get(envelope.type) ?? [];
    list.push({ envelope, raw: JSON.stringify(envelope), error, deliveries, failedAt: new Date().toISOString() });
    this.dead.set(envelope.type, list);
    this.log.error(
      { actor: envelope.type, actorKey: envelope.key, actorMessageId: envelope.id, error },
      'actor message dead-lettered',
    );
  }

  private requireHost(): ActorHost {
    if (!this.host) throw new Error('runtime not started');
    return this.host;
  }
}

export function askTimeout(type: string, timeoutMs: number): AppError {
  return new AppError('service_unavailable', `actor ${type} did not answer within ${timeoutMs} ms`, {
    retryAfterSeconds: 1,
  });
}

/** What an `ask` caller gets for a failed handler: the handler's own AppError, or 503 when it had none. */
export function askError(type: string, error: string, answer: AskFailure | undefined): AppError {
  if (answer && answer.code in errorCodes) return new AppError(answer.code as ErrorCode, answer.message);
  return new AppError('service_unavailable', `actor ${type} failed: ${error}`);
}

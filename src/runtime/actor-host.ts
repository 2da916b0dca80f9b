import { timerAfter } from './due-timer.ts';
import { Counter, Gauge, Histogram, register } from 'prom-client';
import { AppError, failurePolicy } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { ActorContext, ActorDefinition, ActorProtocol, EmitOptions, MessageOf } from './actor.ts';
import { derivedId, MessageValidators, type Envelope } from './envelope.ts';
import { ActorStates } from './actor-states.ts';
import type { ActorMessage, AskFailure, SendOptions } from './types.ts';
import { SpanKind, startSpan, traceOfSpan, tracingOn, withSpan, type Span } from '../tracing/spans.ts';
import type { TraceCarrier } from '../tracing/trace-context.ts';

export type DeliveryOutcome =
  | { ok: true; value: unknown }
  | {
      ok: false;
      error: string;
      deliveries: number;
      /** What an `ask` caller is told: the AppError the handler threw, if it threw one. */
      answer: AskFailure | undefined;
      /** False when the failure is an answer to an `ask` (a non-retryable AppError): the caller has it, so it is no dead letter. */
      deadLetter: boolean;
    };

export interface ActorHostOptions {
  defaultShards: number;
  maxDeliveries: number;
  redeliveryDelayMs: number;
  actorIdleMs: number;
}

type SendFn = (type: string, key: string, msg: ActorMessage, opts?: SendOptions) => Promise<string>;

const handled = singleton(
  'relaybox_runtime_messages_handled_total',
  () =>
    new Counter({
      name: 'relaybox_runtime_messages_handled_total',
      help: "Actor messages handled, by actor type and outcome (ok, retried, dead_letter, answered_error, query: answered out of the mailbox's order)",
      labelNames: ['type', 'outcome'],
    }),
);

const handlerSeconds = singleton(
  'relaybox_runtime_handler_duration_seconds',
  () =>
    new Histogram({
      name: 'relaybox_runtime_handler_duration_seconds',
      help: 'Time an actor handler took, by actor type',
      labelNames: ['type'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    }),
);

const batchSizes = singleton(
  'relaybox_runtime_batch_size',
  () =>
    new Histogram({
      name: 'relaybox_runtime_batch_size',
      help: 'Actor messages one batch handler run handled together, by actor type',
      labelNames: ['type'],
      buckets: [2, 4, 8, 16, 32, 64, 128, 256],
    }),
);

const liveStatesGauge = singleton(
  'relaybox_runtime_live_actor_states',
  () =>
    new Gauge({
      name: 'relaybox_runtime_live_actor_states',
      help: 'Actor keys whose activated state this process holds',
    }),
);

/** The ownership a query's context carries: it starts nothing in the background. */
const neverAborted = new AbortController().signal;

/** Metrics live on the process-wide registry; tests create several runtimes in one process. */
function singleton<T>(name: string, make: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? make();
}

/**
 * Runs an envelope's handler, both transports alike. The envelope's message
 * is validated against its actor type's schema first (a malformed one fails
 * at once). The key's state is activated before the handler and kept for the
 * next message; a failure drops it. Whether a failure is tried again is the
 * error's to say (`failurePolicy`), within `maxDeliveries` deliveries in all.
 */
export class ActorHost {
  private readonly actors = new Map<string, ActorDefinition>();
  private readonly validators = new MessageValidators();
  readonly states: ActorStates;

  constructor(
    defs: ActorDefinition[],
    private readonly opts: ActorHostOptions,
    private readonly log: Logger,
    private readonly send: SendFn,
  ) {
    for (const def of defs) {
      this.actors.set(def.protocol.type, def);
      this.validators.add(def.protocol);
    }
    this.states = new ActorStates(opts.actorIdleMs, (n) => liveStatesGauge.set(n));
  }

  get types(): string[] {
    return [...this.actors.keys()];
  }

  shardsOf(type: string): number {
    return this.actors.get(type)?.protocol.shards ?? this.opts.defaultShards;
  }

  has(type: string): boolean {
    return this.actors.has(type);
  }

  /**
   * `previousDeliveries` counts deliveries already made elsewhere (a reclaimed
   * entry); `owned` is aborted when this process stops owning the key (`ctx.owned`).
   */
  async deliver(env: Envelope, previousDeliveries: number, owned: AbortSignal): Promise<DeliveryOutcome> {
    const problem = this.validators.problem(env);
    if (problem) return this.failed(env, problem, Math.max(1, previousDeliveries), undefined, true);
    let delivery = previousDeliveries;
    for (;;) {
      delivery++;
      const started = performance.now();
      try {
        const value = await this.runOnce(env, delivery, owned);
        handlerSeconds.observe({ type: env.type }, (performance.now() - started) / 1000);
        handled.inc({ type: env.type, outcome: 'ok' });
        return { ok: true, value };
      } catch (err) {
        const error = err instanceof Error ? err.message : String(err);
        const policy = failurePolicy(err);
        const answer = err instanceof AppError ? { code: err.code, message: err.message } : undefined;
        if (!policy.retry) {
          // A caller who asked has the error as its answer; nobody else needs a record of it.
          const asked = env.replyTo !== undefined && err instanceof AppError;
          return this.failed(env, error, delivery, answer, !asked);
        }
        this.log.warn(
          { actor: env.type, actorKey: env.key, actorMessageId: env.id, delivery, err },
          'actor handler failed',
        );
        if (delivery >= this.opts.maxDeliveries) return this.failed(env, error, delivery, answer, true);
        handled.inc({ type: env.type, outcome: 'retried' });
        await new Promise((again) => timerAfter(policy.afterMs ?? this.opts.redeliveryDelayMs, () => again(undefined)));
      }
    }
  }

  /** Whether `env` is of a query kind of its actor type (`ActorProtocol.queries`). */
  isQuery(env: Envelope): boolean {
    return this.actors.get(env.type)?.protocol.queries.has(env.msg.kind) === true;
  }

  /**
   * Answers a query from the key's activated state at once, out of the
   * mailbox's order (beside a handler running on the key, which may be
   * waiting for the store); undefined when `env` is no query or this process
   * holds no activated state for the key: it then waits its turn like any
   * message (and activates the key). A failure is answered to the asker and
   * leaves the state alone: a query changes nothing.
   */
  async query(env: Envelope): Promise<DeliveryOutcome | undefined> {
    if (!this.isQuery(env)) return undefined;
    const entry = this.states.peek(env.type, env.key);
    if (!entry?.activated) return undefined;
    const problem = this.validators.problem(env);
    if (problem) return this.failed(env, problem, 1, undefined, false);
    const handler = this.actors.get(env.type)!.handlers[env.msg.kind]!;
    const ctx = this.context(env, 1, neverAborted, env, () => {});
    ctx.state = entry.state;
    ctx.readOnly = true;
    const started = performance.now();
    try {
      const value = await handler(ctx, env.msg);
      handlerSeconds.observe({ type: env.type }, (performance.now() - started) / 1000);
      handled.inc({ type: env.type, outcome: 'query' });
      return { ok: true, value };
    } catch (err) {
      const answer = err instanceof AppError ? { code: err.code, message: err.message } : undefined;
      return this.failed(env, err instanceof Error ? err.message : String(err), 1, answer, false);
    }
  }

  /** Whether waiting messages like `a` and `b` may go to one batch handler: the same kind of a kind that has one, neither asked. */
  together(a: Envelope, b: Envelope): boolean {
    return (
      a.type === b.type &&
      a.key === b.key &&
      a.msg.kind === b.msg.kind &&
      a.replyTo === undefined &&
      b.replyTo === undefined &&
      this.actors.get(a.type)?.batches[a.msg.kind] !== undefined
    );
  }

  /**
   * Messages of one key and kind (as `together` pairs them), in order: one
   * run of the kind's batch handler when it has one and there are several,
   * else (and after the batch handler failed) each alone through `deliver`.
   * One outcome per envelope, in order.
   */
  async deliverBatch(
    envs: Array<{ env: Envelope; previousDeliveries: number }>,
    owned: AbortSignal,
  ): Promise<DeliveryOutcome[]> {
    if (envs.length === 1) return [await this.deliver(envs[0]!.env, envs[0]!.previousDeliveries, owned)];
    const outcomes: Array<DeliveryOutcome | undefined> = envs.map(({ env, previousDeliveries }) => {
      const problem = this.validators.problem(env);
      return problem ? this.failed(env, problem, Math.max(1, previousDeliveries), undefined, true) : undefined;
    });
    const valid = envs.filter((_, i) => outcomes[i] === undefined);
    if (
      valid.length > 1 &&
      (await this.runBatch(
        valid.map((v) => v.env),
        Math.max(...valid.map((v) => v.previousDeliveries)) + 1,
        owned,
      ))
    ) {
      return outcomes.map((o) => o ?? { ok: true, value: undefined });
    }
    for (const [i, { env, previousDeliveries }] of envs.entries()) {
      outcomes[i] ??= await this.deliver(env, previousDeliveries, owned);
    }
    return outcomes as DeliveryOutcome[];
  }

  /** One run of a batch handler; false when it failed (its messages are then handled one by one). */
  private async runBatch(envs: Envelope[], delivery: number, owned: AbortSignal): Promise<boolean> {
    const first = envs[0]!;
    const batch = this.actors.get(first.type)!.batches[first.msg.kind]!;
    const started = performance.now();
    // The batch's own id: derived from its messages, so the same batch delivered again sends the same ids.
    const id = derivedId(first.id, `batch\u0000${envs.map((e) => e.id).join('\u0000')}`);
    const span = this.spanFor(first, delivery, envs);
    try {
      await withSpan(span, () =>
        this.withState({ ...first, id }, delivery, owned, span ? traceOfSpan(span) : first, (ctx) =>
          batch(
            ctx,
            envs.map((e) => e.msg),
          ),
        ),
      );
    } catch (err) {
      this.log.warn(
        { actor: first.type, actorKey: first.key, messages: envs.length, err },
        'actor batch handler failed; its messages are handled one by one',
      );
      return false;
    }
    handlerSeconds.observe({ type: first.type }, (performance.now() - started) / 1000);
    handled.inc({ type: first.type, outcome: 'ok' }, envs.length);
    batchSizes.observe({ type: first.type }, envs.length);
    return true;
  }

  private failed(
    env: Envelope,
    error: string,
    deliveries: number,
    answer: AskFailure | undefined,
    deadLetter: boolean,
  ): DeliveryOutcome {
    handled.inc({ type: env.type, outcome: deadLetter ? 'dead_letter' : 'answered_error' });
    return { ok: false, error, deliveries, answer, deadLetter };
  }

  private runOnce(env: Envelope, delivery: number, owned: AbortSignal): Promise<unknown> {
    const handler = this.actors.get(env.type)!.handlers[env.msg.kind]!;
    const span = this.spanFor(env, delivery);
    if (!span) return this.withState(env, delivery, owned, env, (ctx) => handler(ctx, env.msg));
    return withSpan(span, () =>
      this.withState(env, delivery, owned, traceOfSpan(span), (ctx) => handler(ctx, env.msg)),
    );
  }

  /**
   * While tracing is on, a span for each handling of a message that carries
   * a trace (a batch's: its first message's, linked to the others). A
   * message without one (a relay's heartbeat, a sweep) starts none: periodic
   * work would otherwise make a trace every few seconds.
   */
  private spanFor(env: Envelope, delivery: number, batch?: Envelope[]): Span | undefined {
    if (!tracingOn() || env.traceparent === undefined) return undefined;
    return startSpan(
      `${env.type} ${env.msg.kind}`,
      SpanKind.CONSUMER,
      env,
      {
        'relaybox.actor.type': env.type,
        'relaybox.actor.key': env.key,
        'relaybox.actor.message_id': env.id,
        'relaybox.actor.delivery': delivery,
        ...(batch ? { 'relaybox.actor.batch_size': batch.length } : {}),
      },
      batch?.slice(1),
    );
  }

  /**
   * Runs `work` with the key's state, activating it first if needed; a
   * failure, or the work's `deactivate`, drops it. What the work sends
   * carries `trace`.
   */
  private async withState<R>(
    env: Envelope,
    delivery: number,
    owned: AbortSignal,
    trace: TraceCarrier,
    work: (ctx: ActorContext<unknown>) => R | Promise<R>,
  ): Promise<R> {
    const def = this.actors.get(env.type)!;
    let deactivate = false;
    const ctx = this.context(env, delivery, owned, trace, () => (deactivate = true));
    const entry = this.states.begin(env.type, env.key);
    try {
      if (!entry.activated) {
        const state = def.activate ? await def.activate(ctx as ActorContext<undefined>) : undefined;
        this.states.activate(entry, state);
      }
      ctx.state = entry.state;
      const value = await work(ctx);
      if (deactivate) this.states.drop(env.type, env.key);
      return value;
    } catch (err) {
      // The state may be half-changed: the next message builds it again from the store.
      this.states.drop(env.type, env.key);
      throw err;
    } finally {
      this.states.end(entry);
    }
  }

  private context(
    env: Envelope,
    delivery: number,
    owned: AbortSignal,
    trace: TraceCarrier,
    deactivate: () => void,
  ): ActorContext<unknown> {
    const sent = new Map<string, number>();
    const send = this.send;
    return {
      type: env.type,
      key: env.key,
      id: env.id,
      delivery,
      log: this.log.child({ actor: env.type, actorKey: env.key, actorMessageId: env.id }),
      state: undefined,
      derivedId: (label) => derivedId(env.id, label),
      deactivate,
      owned,
      send<P extends ActorProtocol>(to: P, key: string, msg: MessageOf<P>, opts: EmitOptions = {}) {
        // The nth send of this very message to this actor: a redelivery that sends it again gets the same id,
        // while a different message (another send-timeout, say) never takes the id of one sent before.
        const label = `send\u0000${to.type}\u0000${key}\u0000${JSON.stringify(msg)}`;
        const n = (sent.get(label) ?? 0) + 1;
        sent.set(label, n);
        // A timer continues no trace: a sweep that sends the next sweep would otherwise make one trace without end.
        return send(to.type, key, msg, {
          ...opts,
          onceId: derivedId(env.id, `${label}\u0000${n}`),
          trace: opts.trace ?? (opts.delayMs ? undefined : trace),
        });
      },
    };
  }
}

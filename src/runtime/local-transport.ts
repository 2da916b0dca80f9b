import { randomUUID } from 'node:crypto';
import { AppError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { RuntimeConfig } from '../config.ts';
import { ActorHost } from './actor-host.ts';
import { KeyedSerial } from './keyed-serial.ts';
import type { ActorDefinition, ActorMessage, ActorTypeStats, DeadLetter, Envelope, SendOptions, Transport } from './types.ts';

/**
 * The embedded default: every actor runs in this process. Timers are
 * in-process, so they do not survive a restart; durable work is recovered
 * from the store by the actors that own it.
 */
export class LocalTransport implements Transport {
  readonly name = 'local' as const;
  private host: ActorHost | undefined;
  private readonly serial = new KeyedSerial();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly dead = new Map<string, DeadLetter[]>();
  private readonly pending = new Map<string, number>();
  private stopping = false;
  private nodeHandler: ((payload: unknown) => void) | undefined;
  readonly nodeId = 'local';

  constructor(private readonly config: RuntimeConfig, private readonly log: Logger) {}

  async publishToNode(_node: string, payload: unknown): Promise<void> {
    // One process is every node; a copy keeps sender and receiver from sharing objects, as on the wire.
    const copy = structuredClone(payload);
    queueMicrotask(() => this.nodeHandler?.(copy));
  }

  onNodeMessage(handler: (payload: unknown) => void): void {
    this.nodeHandler = handler;
  }

  async start(actors: ActorDefinition[]): Promise<void> {
    this.host = new ActorHost(actors, this.config, this.log, (t, k, m, o) => this.send(t, k, m, o));
  }

  async send(type: string, key: string, msg: ActorMessage, opts: SendOptions = {}): Promise<string> {
    const env = this.envelope(type, key, msg, opts.id);
    if (opts.delayMs && opts.delayMs > 0) {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        void this.dispatch(env);
      }, opts.delayMs);
      this.timers.add(timer);
    } else {
      void this.dispatch(env);
    }
    return env.id;
  }

  ask<T = unknown>(type: string, key: string, msg: ActorMessage, timeoutMs = this.config.askTimeoutMs): Promise<T> {
    const env = this.envelope(type, key, msg);
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(askTimeout(type, timeoutMs)), timeoutMs);
      void this.dispatch(env, (outcome) => {
        clearTimeout(timer);
        if (outcome.ok) resolve(outcome.value as T);
        else reject(new AppError('service_unavailable', `actor ${type} failed: ${outcome.error}`));
      });
    });
  }

  async deadLetters(type: string, limit = 100): Promise<DeadLetter[]> {
    return (this.dead.get(type) ?? []).slice(-limit);
  }

  async stats(): Promise<ActorTypeStats[]> {
    const host = this.requireHost();
    return host.types.map((type) => ({
      type,
      pending: this.pending.get(type) ?? 0,
      deadLetters: this.dead.get(type)?.length ?? 0,
      timers: this.timers.size,
    }));
  }

  async ping(): Promise<void> {}

  async stop(): Promise<void> {
    this.stopping = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    await this.serial.idle();
  }

  private envelope(type: string, key: string, msg: ActorMessage, id?: string): Envelope {
    if (this.stopping) throw new AppError('service_unavailable', 'runtime is shutting down');
    const host = this.requireHost();
    if (!host.has(type)) throw new Error(`unknown actor type "${type}"`);
    return { id: id ?? randomUUID(), type, key, msg, sentAt: Date.now() };
  }

  private dispatch(env: Envelope, reply?: (outcome: Awaited<ReturnType<ActorHost['deliver']>>) => void): Promise<void> {
    const host = this.requireHost();
    this.pending.set(env.type, (this.pending.get(env.type) ?? 0) + 1);
    return this.serial.run(`${env.type}\u0000${env.key}`, async () => {
      const outcome = await host.deliver(env);
      this.pending.set(env.type, (this.pending.get(env.type) ?? 1) - 1);
      if (!outcome.ok) this.deadLetter(env, outcome.error, outcome.deliveries);
      reply?.(outcome);
    });
  }

  private deadLetter(envelope: Envelope, error: string, deliveries: number): void {
    const list = this.dead.get(envelope.type) ?? [];
    list.push({ envelope, error, deliveries, failedAt: new Date().toISOString() });
    this.dead.set(envelope.type, list);
    this.log.error({ actor: `${envelope.type}:${envelope.key}`, msgId: envelope.id, error }, 'actor message dead-lettered');
  }

  private requireHost(): ActorHost {
    if (!this.host) throw new Error('runtime not started');
    return this.host;
  }
}

export function askTimeout(type: string, timeoutMs: number): AppError {
  return new AppError('service_unavailable', `actor ${type} did not answer within ${timeoutMs} ms`, { retryAfterSeconds: 1 });
}

import { randomUUID } from 'node:crypto';
import type { Cluster } from 'ioredis';
import type { RuntimeConfig } from './types.ts';
import { AppError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { ActorHost } from './actor-host.ts';
import { askError, askTimeout } from './local-transport.ts';
import { newEnvelope } from './envelope.ts';
import { timerAfter, type DueTimer } from './due-timer.ts';
import type { TraceCarrier } from '../tracing/trace-context.ts';
import type { WorkClass } from './work-lane.ts';
import { readDeadLetters, readTypeStats } from './redis-inspection.ts';
import { redisClient, requireTargetKind, type RedisClient, type RedisTarget } from './redis-client.ts';
import type { RedisKeys } from './redis-keys.ts';
import { redisConnection, type RedisConnection } from './redis-connection.ts';
import { writeReplicated } from './replicated-write.ts';
import type { ScriptedRedis } from './scripts.ts';
import { shardOf } from './shard.ts';
import { ShardLeases } from './shard-leases.ts';
import { ShardTimers } from './shard-timers.ts';
import { queryAsk, ShardQueries, type AskReply } from './shard-queries.ts';
import { StreamReader, type Shard } from './stream-reader.ts';
import { ShardConnections } from './shard-connections.ts';
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

/**
 * Actors on Redis Streams: one stream per actor type and shard, one consumer
 * group, one worker per shard at a time through a lease (`shard-leases.ts`). Delivery is
 * at-least-once; due timers are moved by `shard-timers.ts`; see docs/architecture.md, "Delivery guarantees". On a Redis
 * Cluster (docs/operations.md, "Redis Cluster") each shard's keys share one
 * hash slot, addressed messages go over sharded pub/sub, and a send resolves
 * once a replica holds it too.
 */
/**
 * How long an entry of an owned shard waits in another worker's pending list
 * before this worker claims it (`StreamReader.claimOrphans`, every
 * `leaseCheckMs`): well past any read that was under way as the shard moved.
 */
const orphanIdleMs = 10_000;
/** What a node channel message starts with when it is a timer's wake-up (`<prefix><due at> <stream>`), not a payload. */
const timerWake = '~timer ';

export class RedisTransport implements Transport {
  readonly name = 'redis' as const;
  private readonly cmd: ScriptedRedis;
  private reader: RedisClient | undefined;
  private sub: RedisClient | undefined;
  private readonly target: RedisTarget;
  readonly keys: RedisKeys;
  private readonly ownsConnection: boolean;
  private host: ActorHost | undefined;
  private readonly leases: ShardLeases<Shard>;
  /** The shards this worker holds the lease of, by stream: the leases' own map, changed by them only. */
  private readonly owned: ReadonlyMap<string, Shard>;
  private readonly streams: StreamReader;
  private readonly asks = new Map<string, { resolve(v: unknown): void; reject(e: unknown): void; timer: DueTimer }>();
  private readonly loops: NodeJS.Timeout[] = [];
  /** Background rounds (lease renewal, rebalance, due timers) under way: a stop waits for them before it closes the connections. */
  private readonly rounds = new Set<Promise<void>>();
  private readLoopDone: Promise<void> = Promise.resolve();
  private consuming = false;
  private stopping = false;
  private nodeHandler: ((payload: unknown) => void) | undefined;
  /** The one wake-up for due timers, and when it fires (Infinity: none set). */
  private readonly timers: ShardTimers;
  private readonly queries: ShardQueries;

  /**
   * `target` is a REDIS_URL, a cluster's seed nodes (the transport then makes
   * and closes its own command connection), or the process's shared
   * connection (its maker closes it).
   */
  constructor(
    target: RedisTarget | string | RedisConnection,
    private readonly config: RuntimeConfig,
    readonly nodeId: string,
    private readonly log: Logger,
  ) {
    const shared = typeof target === 'object' && 'client' in target;
    const connection = shared ? target : redisConnection(target, config);
    this.ownsConnection = !shared;
    this.target = connection.target;
    this.keys = connection.keys;
    this.cmd = connection.client;
    this.leases = new ShardLeases(this.cmd, this.keys, nodeId, config, log, {
      shards: () => this.allShards(),
      stopping: () => this.stopping,
      // A shard just taken has its timers looked at once: that sets its wake-up.
      open: (leased, keys) => ({
        ...leased,
        timers: keys.timers,
        keys,
        ready: false,
        dueAt: 0,
      }),
      taken: async (shard) => {
        await this.streams.taken(shard);
        this.timers.arm();
      },
      dropped: (shard) => this.dropStates(shard),
    });
    this.owned = this.leases.owned;
    this.timers = new ShardTimers(this.cmd, this.owned, this.log, (round) => this.track(round));
    this.queries = new ShardQueries({
      nodeId,
      keys: this.keys,
      cmd: this.cmd,
      log,
      owned: this.owned,
      host: () => this.requireHost(),
      enqueue: (env) => this.enqueue(env),
      publish: (channel, message) => this.publishOn(channel, message),
      nodeChannel: (node) => this.nodeChannel(node),
      settle: (reply) => this.settleAsk(reply),
    });
    this.streams = new StreamReader(this.cmd, this.keys, nodeId, config, log, {
      owned: this.owned,
      stopping: () => this.stopping,
      host: () => this.requireHost(),
      dropStates: (shard) => this.dropStates(shard),
      publish: async (channel, message) => void (await this.publishOn(channel, message)),
    });
  }

  private streamOf(type: string, shard: number): string {
    return this.keys.shard(type, shard).stream;
  }

  private get replyChannel(): string {
    return this.keys.replyChannel(this.nodeId);
  }

  async start(actors: ActorDefinition[], opts: { consume: boolean }): Promise<void> {
    this.host = new ActorHost(actors, this.config, this.log, (t, k, m, o) => this.send(t, k, m, o));
    this.host.states.start();
    await this.cmd.connect();
    await requireTargetKind(this.cmd, this.target);
    // On a cluster the node's two channels are sharded channels of one slot: a message goes to that slot's master only.
    this.sub = redisClient(this.target, { lazyConnect: true, shardedSubscribers: this.keys.cluster });
    await this.sub.connect();
    this.sub.on(this.keys.cluster ? 'smessage' : 'message', (channel: string, message: string) => {
      if (channel === this.replyChannel) this.onReply(message);
      else if (message.startsWith(timerWake)) this.onTimerWake(message);
      else if (message.startsWith(queryAsk)) this.queries.received(message);
      else this.onNodePayload(message);
    });
    // Wake-ups sent while the subscription was down are lost: every timer is looked at again once it is back.
    this.sub.on('ready', () => {
      if (this.consuming) this.timers.sweep();
    });
    if (this.keys.cluster) await this.sub.ssubscribe(this.replyChannel, this.nodeChannel(this.nodeId));
    else await this.sub.subscribe(this.replyChannel, this.nodeChannel(this.nodeId));
    if (!opts.consume) return;
    this.consuming = true;
    if (!this.keys.cluster) {
      this.reader = redisClient(this.target, { maxRetriesPerRequest: null, lazyConnect: true });
      await this.reader.connect();
    }
    await this.leases.heartbeat();
    await this.leases.rebalance();
    this.every(this.config.leaseRenewMs, () => this.leases.heartbeat());
    this.every(this.config.leaseCheckMs, () => this.leases.renew());
    this.every(this.config.leaseCheckMs, () =>
      this.streams.claimOrphans(Math.min(orphanIdleMs, this.config.leaseCheckMs)),
    );
    this.every(this.config.rebalanceMs, () => this.leases.rebalance());
    this.every(this.config.timerPollMs, async () => this.timers.sweep());
    this.readLoopDone = this.keys.cluster
      ? this.streams.clusterLoop(new ShardConnections(this.cmd as Cluster))
      : this.streams.readLoop(this.reader!);
  }

  private every(ms: number, work: () => Promise<void>): void {
    let running = false;
    const timer = setInterval(() => {
      if (running || this.stopping) return;
      running = true;
      const round = work()
        .catch((err) => {
          this.log.warn({ err }, 'runtime background task failed');
        })
        .finally(() => (running = false));
      this.track(round);
    }, ms);
    this.loops.push(timer);
  }

  /** A background round under way: a stop waits for it before it closes the connections. */
  private track(round: Promise<void>): void {
    const kept = round.finally(() => this.rounds.delete(kept));
    this.rounds.add(kept);
  }

  statesOf(type: string): Iterable<unknown> {
    return this.host?.states.activated(type) ?? [];
  }

  liveStates(): number {
    return this.host?.states.size ?? 0;
  }

  async send(type: string, key: string, msg: ActorMessage, opts: SendOptions = {}): Promise<string> {
    const env = this.envelope(type, key, msg, opts.onceId, opts.trace, opts.workClass);
    await this.enqueue(env, opts.delayMs, opts.onceId !== undefined);
    return env.id;
  }

  ask<T = unknown>(type: string, key: string, msg: ActorMessage, timeoutMs = this.config.askTimeoutMs): Promise<T> {
    const env = this.envelope(type, key, msg);
    const askId = randomUUID();
    env.replyTo = { node: this.nodeId, askId };
    return new Promise<T>((resolve, reject) => {
      const timer = timerAfter(timeoutMs, () => {
        this.asks.delete(askId);
        reject(askTimeout(type, timeoutMs));
      });
      this.asks.set(askId, { resolve: resolve as (v: unknown) => void, reject, timer });
      (this.requireHost().isQuery(env) ? this.queries.send(env) : this.enqueue(env)).catch((err) => {
        timer.cancel();
        this.asks.delete(askId);
        reject(err);
      });
    });
  }

  /** `id` is set for what a handler sends: those still go out while a stop lets in-flight handlers finish. */
  private envelope(
    type: string,
    key: string,
    msg: ActorMessage,
    id?: string,
    trace?: TraceCarrier,
    cls?: WorkClass,
  ): Envelope {
    if (this.stopping && id === undefined) throw new AppError('service_unavailable', 'runtime is shutting down');
    if (!this.requireHost().has(type)) throw new Error(`unknown actor type "${type}"`);
    return newEnvelope(id ?? randomUUID(), type, key, msg, trace, cls);
  }

  private async enqueue(env: Envelope, delayMs?: number, once = false): Promise<void> {
    const keys = this.keys.shard(env.type, shardOf(env.key, this.requireHost().shardsOf(env.type)));
    const dueAt = delayMs && delayMs > 0 ? Date.now() + delayMs : 0;
    let reply: unknown;
    // On a cluster the write and a WAIT for its replica go to the shard's master together.
    if (this.keys.cluster) {
      [reply] = await writeReplicated(this.cmd, keys.stream, this.config.replicaWaitMs, (p) => {
        if (once)
          p.enqueueOnce(
            keys.sent(env.id),
            keys.stream,
            keys.timers,
            keys.lease,
            this.config.dedupeTtlMs,
            JSON.stringify(env),
            dueAt,
          );
        else if (dueAt > 0) p.schedule(keys.timers, keys.lease, dueAt, JSON.stringify(env));
        else p.xadd(keys.stream, '*', 'e', JSON.stringify(env));
      });
    } else if (once) {
      reply = await this.cmd.enqueueOnce(
        keys.sent(env.id),
        keys.stream,
        keys.timers,
        keys.lease,
        this.config.dedupeTtlMs,
        JSON.stringify(env),
        dueAt,
      );
    } else if (dueAt > 0) {
      reply = await this.cmd.schedule(keys.timers, keys.lease, dueAt, JSON.stringify(env));
    } else {
      await this.cmd.xadd(keys.stream, '*', 'e', JSON.stringify(env));
    }
    // A timer that is now its shard's earliest: the shard's owner moves its wake-up closer.
    if (typeof reply === 'string' && dueAt > 0) this.wakeTimers(reply, keys.stream, dueAt);
  }

  private wakeTimers(owner: string, stream: string, dueAt: number): void {
    if (owner === this.nodeId) {
      this.timers.due(stream, dueAt);
      return;
    }
    this.publishOn(this.nodeChannel(owner), `${timerWake}${dueAt} ${stream}`).catch((err) =>
      this.log.warn({ err, stream }, 'could not wake the owner of a timer; its sweep moves it'),
    );
  }

  private onTimerWake(message: string): void {
    const space = message.indexOf(' ', timerWake.length);
    this.timers.due(message.slice(space + 1), Number(message.slice(timerWake.length, space)));
  }

  private nodeChannel(node: string): string {
    return this.keys.nodeChannel(node);
  }

  /** Publishes on a node's channel: sharded (SPUBLISH) on a cluster. Answers how many subscribers it reached. */
  private async publishOn(channel: string, message: string): Promise<number> {
    if (this.keys.cluster) return Number(await this.cmd.spublish(channel, message));
    return Number(await this.cmd.publish(channel, message));
  }

  async publishToNode(node: string, payload: unknown): Promise<void> {
    await this.publishOn(this.nodeChannel(node), JSON.stringify(payload));
  }

  onNodeMessage(handler: (payload: unknown) => void): void {
    this.nodeHandler = handler;
  }

  private onNodePayload(message: string): void {
    try {
      this.nodeHandler?.(JSON.parse(message));
    } catch (err) {
      this.log.warn({ err }, 'could not handle an addressed message');
    }
  }

  /** The command connection it sends with (a cluster client on a cluster). */
  get connection(): ScriptedRedis {
    return this.cmd;
  }

  private onReply(message: string): void {
    let reply: AskReply;
    try {
      reply = JSON.parse(message);
    } catch {
      return;
    }
    this.settleAsk(reply);
  }

  private settleAsk(reply: AskReply): void {
    const waiting = this.asks.get(reply.askId);
    if (!waiting) return; // timed out already
    this.asks.delete(reply.askId);
    waiting.timer.cancel();
    if (reply.ok) waiting.resolve(reply.value);
    else waiting.reject(askError('actor', reply.error ?? 'failed', reply.answer));
  }

  // ---- consumption ----

  private allShards(): Array<{ type: string; index: number }> {
    const host = this.requireHost();
    return host.types.flatMap((type) => Array.from({ length: host.shardsOf(type) }, (_, index) => ({ type, index })));
  }

  /** The activated states of a shard's keys go when the shard leaves this worker (or comes back to it). */
  private dropStates(shard: Shard): void {
    const shards = this.requireHost().shardsOf(shard.type);
    this.requireHost().states.dropWhere(shard.type, (key) => shardOf(key, shards) === shard.index);
  }

  /** Every owned shard's timers are looked at on the next move (the backstop sweep). */
  // ---- inspection and lifecycle ----

  deadLetters(type: string, limit = 100): Promise<DeadLetter[]> {
    return readDeadLetters(this.cmd, this.keys.deadLetterStreams(type, this.requireHost().shardsOf(type)), limit);
  }

  stats(): Promise<ActorTypeStats[]> {
    const host = this.requireHost();
    return Promise.all(
      host.types.map((type) =>
        readTypeStats(
          this.cmd,
          type,
          Array.from({ length: host.shardsOf(type) }, (_, i) => this.streamOf(type, i)),
          this.keys.deadLetterStreams(type, host.shardsOf(type)),
        ),
      ),
    );
  }

  async ping(): Promise<void> {
    await Promise.race([
      this.cmd.ping(),
      sleep(this.config.pingTimeoutMs).then(() => {
        throw new Error(`redis did not answer within ${this.config.pingTimeoutMs} ms`);
      }),
    ]);
  }

  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    for (const timer of this.loops) clearInterval(timer);
    this.timers.stop();
    await Promise.all(this.rounds);
    if (this.consuming) {
      await this.readLoopDone;
      // Leave time to release leases inside the overall shutdown budget.
      const budget = Math.max(1_000, this.config.shutdownGraceMs - 2_000);
      await Promise.race([this.streams.idle(), sleep(budget)]);
      // Acknowledgements gathered in this tick go out while the connection is open; one that fails leaves its entries pending, delivered again.
      await this.streams.flushAcks();
      await this.leases.leave();
    }
    for (const [, waiting] of this.asks) {
      waiting.timer.cancel();
      waiting.reject(new AppError('service_unavailable', 'runtime is shutting down'));
    }
    this.asks.clear();
    this.host?.states.stop();
    this.reader?.disconnect();
    this.sub?.disconnect();
    if (this.ownsConnection) await this.cmd.quit().catch(() => undefined);
  }

  private requireHost(): ActorHost {
    if (!this.host) throw new Error('runtime not started');
    return this.host;
  }
}

import type { ActorDefinition } from './actor.ts';
import type { Envelope } from './envelope.ts';
import type { TraceCarrier } from '../tracing/trace-context.ts';
import type { WorkClass } from './work-lane.ts';

export type { ActorContext, ActorDefinition, ActorProtocol, ActorClient, MessageOf } from './actor.ts';
export type { Envelope } from './envelope.ts';

/** The runtime's own settings (the app's config holds them under `runtime`). */
export interface RuntimeConfig {
  /** Prefix of every Redis key the runtime owns; tests use a random one. */
  keyPrefix: string;
  /** Streams per actor type unless the actor type says otherwise. */
  defaultShards: number;
  /** A handler that throws this many times sends the message to the dead-letter stream. */
  maxDeliveries: number;
  /** Pause between two deliveries of a message whose handler threw. */
  redeliveryDelayMs: number;
  /** A worker that stops heartbeating loses its shards after this long (its membership lapses). */
  leaseTtlMs: number;
  /** How often a worker heartbeats (renews its membership, and with it every lease it holds). */
  leaseRenewMs: number;
  /** How often a worker checks that each lease key still names it, and renews the keys' own (long) time to live. */
  leaseCheckMs: number;
  /** How often a worker looks for free shards and its fair share of them. */
  rebalanceMs: number;
  /** How long a read on a shard stream blocks waiting for entries (an append ends it at once). */
  readBlockMs: number;
  readBatch: number;
  /**
   * How often the shard owner looks at every shard's timers anyway. A timer is
   * moved into its stream when due by a wake-up set at the earliest timer's
   * time (and moved closer by the sender of an earlier one): this sweep is
   * only a backstop for a wake-up lost with a dropped connection.
   */
  timerPollMs: number;
  /** How long SIGTERM waits for in-flight handlers before leaving anyway. */
  shutdownGraceMs: number;
  askTimeoutMs: number;
  /** How long a Redis ping (readiness) may take. */
  pingTimeoutMs: number;
  /** An actor key's activated state is dropped after this long without messages. */
  actorIdleMs: number;
  /** How long a message or event id emitted by a handler is remembered, so a redelivery does not emit it again. */
  dedupeTtlMs: number;
  /** How long a broadcast (a revoked API key) waits for every process to confirm it. */
  broadcastConfirmMs: number;
  /** On a Redis Cluster: how long a send waits for a replica to hold it before it fails (WAIT). */
  replicaWaitMs: number;
}

/** A message to an actor at the transport level; senders use a typed `ActorClient` instead. */
export interface ActorMessage {
  kind: string;
  [field: string]: unknown;
}

export interface SendOptions {
  /** Deliver no earlier than this many ms from now (a durable timer on the redis transport). */
  delayMs?: number;
  /**
   * The message's id, derived by `ctx.send` from the actor message that sends
   * it: a second send with the same id within `RUNTIME_DEDUPE_TTL_MS` is dropped.
   */
  onceId?: string;
  /** The trace context the message carries (`ctx.send` passes on its handler's). */
  trace?: TraceCarrier;
  /** What the work is for (work-lane.ts): the in-process transport serves bulk and maintenance work after the rest. */
  workClass?: WorkClass;
}

export interface DeadLetter {
  /** Null when what was read was no valid envelope; `raw` holds it as it was. */
  envelope: Envelope | null;
  raw: string;
  error: string;
  deliveries: number;
  failedAt: string;
}

export interface ActorTypeStats {
  type: string;
  /** Entries sent but not yet handled (stream backlog plus entries being handled). */
  pending: number;
  /** How long the oldest of those has waited, in seconds (0 when there is none). */
  oldestAgeSeconds: number;
  deadLetters: number;
  timers: number;
}

/** An error answered to an `ask` caller: rebuilt as the same AppError on the asking side. */
export interface AskFailure {
  code: string;
  message: string;
}

/**
 * How actors are reached. Delivery is at-least-once: a message whose handler
 * has not finished when its worker dies is delivered again, with the same id;
 * what its handler emits derives its ids from it, so nothing is emitted twice.
 * Per actor, messages are handled one at a time in the order they were sent.
 */
export interface Transport {
  readonly name: 'local' | 'redis';
  /** Registers the actor types; with `consume`, this process also runs them (the worker role). */
  start(actors: ActorDefinition[], opts: { consume: boolean }): Promise<void>;
  /** Resolves once the message is durably accepted, with its id. Use a typed `actorClient` rather than this. */
  send(type: string, key: string, msg: ActorMessage, opts?: SendOptions): Promise<string>;
  /**
   * Sends and waits for the handler's return value. An AppError the handler
   * throws rejects here with its own code; a timeout is `service_unavailable`.
   */
  ask<T = unknown>(type: string, key: string, msg: ActorMessage, timeoutMs?: number): Promise<T>;
  deadLetters(type: string, limit?: number): Promise<DeadLetter[]>;
  stats(): Promise<ActorTypeStats[]>;
  /** Actor keys whose state is held in this process right now. */
  liveStates(): number;
  /** The activated states of actor type `type` this process holds, for figures read when Prometheus scrapes. */
  statesOf(type: string): Iterable<unknown>;
  /** This process's name: where addressed messages for it go. */
  readonly nodeId: string;
  /**
   * Delivers a payload to one process (the frontend holding a relay's socket),
   * not to every process. Best effort: a process that is gone misses it, and
   * the sender's timers recover.
   */
  publishToNode(node: string, payload: unknown): Promise<void>;
  /** Receives what other processes address to this one. */
  onNodeMessage(handler: (payload: unknown) => void): void;
  /** Throws when the backend is unreachable (readiness). */
  ping(): Promise<void>;
  /** Stops reading, finishes in-flight handlers, acknowledges them and releases shards. */
  stop(): Promise<void>;
}

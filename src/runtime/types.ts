import type { Logger } from '../log.ts';

/** A message to an actor; `kind` picks the handler in the actor's handler map. */
export interface ActorMessage {
  kind: string;
  [field: string]: unknown;
}

/** What travels on a transport: one message to one actor `(type, key)`. */
export interface Envelope {
  /** Unique per send; handlers deduplicate redeliveries by it. */
  id: string;
  type: string;
  key: string;
  msg: ActorMessage;
  /** Epoch ms when the message was sent (or its timer was set). */
  sentAt: number;
  /** Set by `ask`: where the handler's answer goes. */
  replyTo?: { node: string; askId: string };
}

export interface ActorContext {
  type: string;
  key: string;
  msgId: string;
  /** 1 on the first delivery; higher after a handler error or a reclaimed crash. */
  delivery: number;
  log: Logger;
  send(type: string, key: string, msg: ActorMessage, opts?: SendOptions): Promise<string>;
}

export type Handler<M extends ActorMessage = ActorMessage> = (ctx: ActorContext, msg: M) => unknown;

export interface ActorDefinition {
  type: string;
  /** Streams this actor type is spread over; defaults to config.runtime.defaultShards. */
  shards?: number;
  handlers: Record<string, Handler<any>>;
}

export interface SendOptions {
  /** Deliver no earlier than this many ms from now (a durable timer on the redis transport). */
  delayMs?: number;
  /** A caller-chosen message id, so a retried send is recognisable as the same message. */
  id?: string;
}

export interface DeadLetter {
  envelope: Envelope;
  error: string;
  deliveries: number;
  failedAt: string;
}

export interface ActorTypeStats {
  type: string;
  /** Entries sent but not yet handled (stream backlog plus entries being handled). */
  pending: number;
  deadLetters: number;
  timers: number;
}

/**
 * How actors are reached. Delivery is at-least-once: a message whose handler
 * has not finished when its worker dies is delivered again, so handlers are
 * idempotent by `ctx.msgId`. Per actor, messages are handled one at a time in
 * the order they were sent.
 */
export interface Transport {
  readonly name: 'local' | 'redis';
  /** Registers the actor types; with `consume`, this process also runs them (the worker role). */
  start(actors: ActorDefinition[], opts: { consume: boolean }): Promise<void>;
  /** Resolves once the message is durably accepted, with its id. */
  send(type: string, key: string, msg: ActorMessage, opts?: SendOptions): Promise<string>;
  /** Sends and waits for the handler's return value; rejects with `service_unavailable` after timeoutMs. */
  ask<T = unknown>(type: string, key: string, msg: ActorMessage, timeoutMs?: number): Promise<T>;
  deadLetters(type: string, limit?: number): Promise<DeadLetter[]>;
  stats(): Promise<ActorTypeStats[]>;
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

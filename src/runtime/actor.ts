import { Type, type Static, type TObject, type TProperties } from '@sinclair/typebox';
import type { Logger } from '../log.ts';
import type { TraceCarrier } from '../tracing/trace-context.ts';
import type { WorkClass } from './work-lane.ts';

/** The fields of each message kind of an actor type (without `kind`), as TypeBox properties. */
export type MessageShapes = Record<string, TProperties>;

/**
 * What senders need to know about an actor type: its name and the schema of
 * every message it accepts. It imports nothing of the actor's implementation,
 * so a frontend can hold a typed client without the actor's dependencies.
 */
export interface ActorProtocol<T extends string = string, M extends MessageShapes = MessageShapes> {
  readonly type: T;
  /** Streams this actor type is spread over; defaults to config.runtime.defaultShards. */
  readonly shards: number | undefined;
  readonly messages: M;
  /** One schema per kind, `kind` included, closed to other fields: what every envelope is validated against. */
  readonly schemas: { readonly [K in keyof M]: TObject };
  /**
   * Fields an earlier version of the protocol named otherwise (old name → new name): a message
   * written before an upgrade and still waiting in a stream or a timer is read under today's names,
   * never dead-lettered for its spelling.
   */
  readonly formerNames: Readonly<Record<string, string>>;
  /**
   * Kinds that only read the key's state (asked, never sent): when the
   * process that runs the key holds its activated state, such an ask is
   * answered from it at once, out of the mailbox's order, instead of waiting
   * behind the messages queued for the key. Their handlers must change
   * nothing and send nothing when `ctx.readOnly` is set.
   */
  readonly queries: ReadonlySet<string>;
}

type Kinds<P extends ActorProtocol> = keyof P['messages'] & string;

/** The message of one kind of `P`, e.g. `MessageOfKind<typeof relayProtocol, 'heartbeat'>`. */
export type MessageOfKind<P extends ActorProtocol, K extends Kinds<P>> = { kind: K } & Static<
  TObject<P['messages'][K]>
>;

/** Any message `P` accepts: a union discriminated by `kind`. */
export type MessageOf<P extends ActorProtocol> = { [K in Kinds<P>]: MessageOfKind<P, K> }[Kinds<P>];

export function defineProtocol<const T extends string, const M extends MessageShapes>(
  type: T,
  messages: M,
  opts: { shards?: number; formerNames?: Record<string, string>; queries?: ReadonlyArray<keyof M & string> } = {},
): ActorProtocol<T, M> {
  const schemas = Object.fromEntries(
    Object.entries(messages).map(([kind, fields]) => [
      kind,
      Type.Object({ kind: Type.Literal(kind), ...fields }, { additionalProperties: false, $id: `${type}.${kind}` }),
    ]),
  ) as unknown as { [K in keyof M]: TObject };
  return {
    type,
    shards: opts.shards,
    messages,
    schemas,
    formerNames: opts.formerNames ?? {},
    queries: new Set(opts.queries ?? []),
  };
}

export interface EmitOptions {
  /** Deliver no earlier than this many ms from now (a durable timer on the Redis transport). */
  delayMs?: number;
  /** The trace context the message carries; `ctx.send` passes on its handler's when this is not given. */
  trace?: TraceCarrier;
  /** What the work is for (work-lane.ts): the in-process transport serves bulk and maintenance work after the rest; 1 (interactive) unless given. */
  workClass?: WorkClass;
}

/** What a handler (and an activation) is given besides its message. */
export interface ActorContext<S = unknown> {
  type: string;
  key: string;
  /** The actor message's id: stable across redeliveries of the same message. */
  id: string;
  /** 1 on the first delivery; higher after a retried failure or a reclaimed crash. */
  delivery: number;
  /**
   * Set when a query kind (`ActorProtocol.queries`) is answered out of the
   * mailbox's order, beside whatever handler is running on the key: the
   * handler reads `state` as it is and must change nothing and send nothing.
   */
  readOnly?: true;
  /** Child logger carrying actor type, key and this actor message's id. */
  log: Logger;
  /** The key's activated state (see `ActorImplementation.activate`). */
  state: S;
  /**
   * Sends to an actor (a timer with `delayMs`). The message's id is derived
   * from this actor message's id, so a redelivered message sends nothing twice.
   */
  send<P extends ActorProtocol>(to: P, key: string, msg: MessageOf<P>, opts?: EmitOptions): Promise<string>;
  /** An id derived from this actor message's id and `label`: the same on every delivery (event ids). */
  derivedId(label: string): string;
  /** Drops this key's state once the handler returns: the next message activates it again from the store. */
  deactivate(): void;
  /**
   * Aborted once this process no longer owns the key: its shard was released
   * or its lease lost (another worker may run the key now), or the runtime
   * stopped. Work a handler left running in the background must start
   * nothing more for the key after that; the new owner finds it in the store.
   */
  owned: AbortSignal;
}

export type Handler<S, M> = (ctx: ActorContext<S>, msg: M) => unknown;

/**
 * Handles several messages of one kind for one key at once, in the order
 * they were sent: as if each had been handled in turn, with the writes of
 * all of them batched. The runtime uses it for messages that wait next to
 * each other in the key's mailbox and asks nobody for an answer; when it
 * throws, each message is handled again alone by the kind's handler (which
 * is the truth, with its retries). What it sends derives its ids from the
 * batch, which a redelivery may compose differently: it must be safe for its
 * receivers to get it twice.
 */
export type BatchHandler<S, M> = (ctx: ActorContext<S>, msgs: M[]) => Promise<void>;

export interface ActorImplementation<P extends ActorProtocol, S> {
  /**
   * Builds a key's state from the store, on the first message after the key
   * was idle, moved to this worker, or failed. The runtime drops the state
   * when the key idles (`ACTOR_IDLE_MS`), when this worker releases or loses
   * the key's shard, and after a handler failure; so no worker acts on state
   * from before another worker held the key.
   */
  activate?: (ctx: ActorContext<undefined>) => S | Promise<S>;
  handlers: { [K in Kinds<P>]: Handler<S, MessageOfKind<P, K>> };
  /** Kinds whose waiting messages may be handled together (see `BatchHandler`). */
  batches?: { [K in Kinds<P>]?: BatchHandler<S, MessageOfKind<P, K>> };
}

/** An actor type as the runtime runs it. Built by `defineActor`, never by hand. */
export interface ActorDefinition {
  protocol: ActorProtocol;
  activate: ((ctx: ActorContext<undefined>) => unknown) | undefined;
  handlers: Record<string, Handler<any, any>>;
  batches: Record<string, BatchHandler<any, any>>;
}

export function defineActor<P extends ActorProtocol, S = undefined>(
  protocol: P,
  impl: ActorImplementation<P, S>,
): ActorDefinition {
  return {
    protocol,
    activate: impl.activate,
    handlers: impl.handlers as Record<string, Handler<any, any>>,
    batches: (impl.batches ?? {}) as Record<string, BatchHandler<any, any>>,
  };
}

/** A sender's handle on one actor type: a wrong `kind` or field does not compile. */
export interface ActorClient<P extends ActorProtocol> {
  send(key: string, msg: MessageOf<P>, opts?: EmitOptions): Promise<string>;
  /** Sends and waits for the handler's return value; an AppError thrown by the handler is rethrown here as it was. */
  ask<R = unknown>(key: string, msg: MessageOf<P>, timeoutMs?: number): Promise<R>;
}

/** What a typed client needs of a transport (src/runtime/types.ts `Transport` is one). */
export interface ActorSender {
  send(type: string, key: string, msg: { kind: string }, opts?: EmitOptions): Promise<string>;
  ask<R = unknown>(type: string, key: string, msg: { kind: string }, timeoutMs?: number): Promise<R>;
}

export function actorClient<P extends ActorProtocol>(runtime: ActorSender, protocol: P): ActorClient<P> {
  return {
    send: (key, msg, opts) => runtime.send(protocol.type, key, msg, opts),
    ask: (key, msg, timeoutMs) => runtime.ask(protocol.type, key, msg, timeoutMs),
  };
}
export { inSteps, workClass, type WorkClass } from './work-lane.ts';
export { afterInteractive } from './ahead-of-bulk.ts';

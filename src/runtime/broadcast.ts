import { randomUUID } from 'node:crypto';
import { redisClient, type RedisClient, type RedisTarget } from './redis-client.ts';
import type { Logger } from '../log.ts';
import { timerAfter } from './due-timer.ts';

export type BroadcastHandler = (payload: unknown) => void | Promise<void>;

/**
 * A message to every process of the deployment (frontends and workers), for
 * state each one caches (a revoked credential). `publish` resolves once every
 * process that was subscribed has handled it, or after the confirm timeout:
 * a process that does not confirm in time falls back on its cache expiry.
 */
export interface Broadcast {
  /** Resolves with how many processes confirmed having handled it (this one included). */
  publish(channel: string, payload: unknown): Promise<number>;
  /** Resolves once this process receives the channel's messages. */
  subscribe(channel: string, handler: BroadcastHandler): Promise<void>;
  close(): Promise<void>;
}

/** The embedded default: one process, so broadcasting is calling its own handlers. */
export class LocalBroadcast implements Broadcast {
  private readonly handlers = new Map<string, BroadcastHandler[]>();

  async publish(channel: string, payload: unknown): Promise<number> {
    const handlers = this.handlers.get(channel) ?? [];
    for (const handler of handlers) await handler(payload);
    return handlers.length > 0 ? 1 : 0;
  }

  async subscribe(channel: string, handler: BroadcastHandler): Promise<void> {
    this.handlers.set(channel, [...(this.handlers.get(channel) ?? []), handler]);
  }

  async close(): Promise<void> {
    this.handlers.clear();
  }
}

interface Envelope {
  id: string;
  from: string;
  payload: unknown;
}

/**
 * Redis pub/sub. Every receiver confirms on the sender's own confirm channel
 * once its handler has run; the sender waits for as many confirmations as
 * PUBLISH reported receivers.
 *
 * On a Redis Cluster every channel is a sharded channel (SPUBLISH,
 * SSUBSCRIBE) with its own hash tag: all the processes subscribe to a
 * broadcast channel on the one master that owns its slot, so SPUBLISH there
 * reaches every process and counts every receiver. A plain PUBLISH would
 * reach them too (the cluster forwards it to every node), but it counts only
 * the receivers on the node it was sent to, and the sender could not tell
 * when all had confirmed.
 */
export class RedisBroadcast implements Broadcast {
  private readonly pub: RedisClient;
  private readonly sub: RedisClient;
  private readonly sharded: boolean;
  private readonly handlers = new Map<string, BroadcastHandler[]>();
  private readonly waiting = new Map<string, { confirmed: number; expected: number; done(): void }>();
  private readonly confirmChannel: string;
  private ready: Promise<unknown> | undefined;

  /** `target` is a REDIS_URL or a cluster's seed nodes. */
  constructor(
    target: RedisTarget | string,
    private readonly keyPrefix: string,
    private readonly nodeId: string,
    private readonly confirmTimeoutMs: number,
    private readonly log: Logger,
  ) {
    const where = typeof target === 'string' ? { url: target } : target;
    this.sharded = !('url' in where);
    this.pub = redisClient(where, { maxRetriesPerRequest: 2 });
    this.sub = redisClient(where, { maxRetriesPerRequest: 2, shardedSubscribers: this.sharded });
    this.confirmChannel = this.confirmChannelOf(nodeId);
    this.sub.on(
      this.sharded ? 'smessageBuffer' : 'messageBuffer',
      (channel: Buffer, message: Buffer) => void this.receive(channel.toString(), message.toString()),
    );
  }

  private confirmChannelOf(node: string): string {
    return this.sharded
      ? `{${this.keyPrefix}:broadcast-confirm:${node}}`
      : `${this.keyPrefix}:broadcast-confirm:${node}`;
  }

  private async send(channel: string, message: string): Promise<number> {
    return Number(this.sharded ? await this.pub.spublish(channel, message) : await this.pub.publish(channel, message));
  }

  private listen(channel: string): Promise<unknown> {
    return this.sharded ? this.sub.ssubscribe(channel) : this.sub.subscribe(channel);
  }

  async publish(channel: string, payload: unknown): Promise<number> {
    await this.listening();
    const envelope: Envelope = { id: randomUUID(), from: this.nodeId, payload };
    let confirm!: () => void;
    const confirmed = new Promise<void>((resolve) => (confirm = resolve));
    const wait = { confirmed: 0, expected: Number.POSITIVE_INFINITY, done: confirm };
    this.waiting.set(envelope.id, wait);
    const timer = timerAfter(this.confirmTimeoutMs, confirm);
    try {
      wait.expected = await this.send(this.channelKey(channel), JSON.stringify(envelope));
      if (wait.confirmed >= wait.expected) confirm();
      await confirmed;
      if (wait.confirmed < wait.expected)
        this.log.warn(
          { channel, confirmed: wait.confirmed, expected: wait.expected },
          'broadcast not confirmed by every process in time',
        );
      return wait.confirmed;
    } finally {
      timer.cancel();
      this.waiting.delete(envelope.id);
    }
  }

  async subscribe(channel: string, handler: BroadcastHandler): Promise<void> {
    await this.listening();
    const known = this.handlers.get(channel);
    this.handlers.set(channel, [...(known ?? []), handler]);
    if (!known) await this.listen(this.channelKey(channel));
  }

  async close(): Promise<void> {
    await Promise.all([this.pub.quit().catch(() => undefined), this.sub.quit().catch(() => undefined)]);
  }

  private listening(): Promise<unknown> {
    this.ready ??= this.listen(this.confirmChannel);
    return this.ready;
  }

  private channelKey(channel: string): string {
    return this.sharded ? `{${this.keyPrefix}:broadcast:${channel}}` : `${this.keyPrefix}:broadcast:${channel}`;
  }

  private channelOf(channelKey: string): string {
    const name = this.sharded ? channelKey.slice(1, -1) : channelKey;
    return name.slice(this.keyPrefix.length + ':broadcast:'.length);
  }

  private async receive(channelKey: string, message: string): Promise<void> {
    let envelope: Envelope;
    try {
      envelope = JSON.parse(message) as Envelope;
    } catch {
      return;
    }
    if (channelKey === this.confirmChannel) {
      const wait = this.waiting.get(envelope.id);
      if (wait && ++wait.confirmed >= wait.expected) wait.done();
      return;
    }
    const channel = this.channelOf(channelKey);
    try {
      for (const handler of this.handlers.get(channel) ?? []) await handler(envelope.payload);
    } catch (err) {
      this.log.error({ err, channel }, 'broadcast handler failed');
      return;
    }
    await this.send(this.confirmChannelOf(envelope.from), JSON.stringify({ id: envelope.id })).catch((err) =>
      this.log.warn({ err }, 'could not confirm a broadcast'),
    );
  }
}

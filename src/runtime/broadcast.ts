import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Logger } from '../log.ts';

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
 */
export class RedisBroadcast implements Broadcast {
  private readonly pub: Redis;
  private readonly sub: Redis;
  private readonly handlers = new Map<string, BroadcastHandler[]>();
  private readonly waiting = new Map<string, { confirmed: number; expected: number; done(): void }>();
  private readonly confirmChannel: string;
  private ready: Promise<unknown> | undefined;

  constructor(url: string, private readonly keyPrefix: string, private readonly nodeId: string, private readonly confirmTimeoutMs: number, private readonly log: Logger) {
    this.pub = new Redis(url, { maxRetriesPerRequest: 2 });
    this.sub = new Redis(url, { maxRetriesPerRequest: 2 });
    this.confirmChannel = `${keyPrefix}:broadcast-confirm:${nodeId}`;
    this.sub.on('messageBuffer', (channel: Buffer, message: Buffer) => void this.receive(channel.toString(), message.toString()));
  }

  async publish(channel: string, payload: unknown): Promise<number> {
    await this.listening();
    const envelope: Envelope = { id: randomUUID(), from: this.nodeId, payload };
    let confirm!: () => void;
    const confirmed = new Promise<void>((resolve) => (confirm = resolve));
    const wait = { confirmed: 0, expected: Number.POSITIVE_INFINITY, done: confirm };
    this.waiting.set(envelope.id, wait);
    const timer = setTimeout(confirm, this.confirmTimeoutMs);
    try {
      wait.expected = await this.pub.publish(this.channelKey(channel), JSON.stringify(envelope));
      if (wait.confirmed >= wait.expected) confirm();
      await confirmed;
      if (wait.confirmed < wait.expected) this.log.warn({ channel, confirmed: wait.confirmed, expected: wait.expected }, 'broadcast not confirmed by every process in time');
      return wait.confirmed;
    } finally {
      clearTimeout(timer);
      this.waiting.delete(envelope.id);
    }
  }

  async subscribe(channel: string, handler: BroadcastHandler): Promise<void> {
    await this.listening();
    const known = this.handlers.get(channel);
    this.handlers.set(channel, [...(known ?? []), handler]);
    if (!known) await this.sub.subscribe(this.channelKey(channel));
  }

  async close(): Promise<void> {
    await Promise.all([this.pub.quit().catch(() => undefined), this.sub.quit().catch(() => undefined)]);
  }

  private listening(): Promise<unknown> {
    this.ready ??= this.sub.subscribe(this.confirmChannel);
    return this.ready;
  }

  private channelKey(channel: string): string {
    return `${this.keyPrefix}:broadcast:${channel}`;
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
    const channel = channelKey.slice(this.keyPrefix.length + ':broadcast:'.length);
    try {
      for (const handler of this.handlers.get(channel) ?? []) await handler(envelope.payload);
    } catch (err) {
      this.log.error({ err, channel }, 'broadcast handler failed');
      return;
    }
    await this.pub.publish(`${this.keyPrefix}:broadcast-confirm:${envelope.from}`, JSON.stringify({ id: envelope.id })).catch((err) => this.log.warn({ err }, 'could not confirm a broadcast'));
  }
}

/** The keys of one shard: everything a script or transaction touches together. */
export interface ShardKeys {
  stream: string;
  timers: string;
  lease: string;
  deadLetters: string;
  /** The marker of an id sent into this shard (`ctx.send` dedupe). */
  sent(id: string): string;
}

/**
 * Names of the runtime's Redis keys and channels. On a Redis Cluster every
 * key a script or transaction touches together carries one hash tag, so it
 * stays in one slot: a shard's stream, timers, sent markers, lease and dead
 * letters are `{<prefix>:<type>:<shard>}…`, the event stream and its markers
 * `{<prefix>:events}…`; the shards of a type hash to different slots and so
 * spread over the masters. On one Redis server the names are the ones a
 * deployment has always had (no tag), so upgrading keeps its streams.
 */
export class RedisKeys {
  constructor(
    readonly prefix: string,
    readonly cluster: boolean,
  ) {}

  private tag(name: string): string {
    return this.cluster ? `{${name}}` : name;
  }

  shard(type: string, index: number): ShardKeys {
    const base = `${this.prefix}:${type}:${index}`;
    const stream = this.tag(base);
    if (!this.cluster) {
      return {
        stream,
        timers: `${stream}:timers`,
        lease: `${this.prefix}:lease:${type}:${index}`,
        deadLetters: this.typeDeadLetters(type),
        sent: (id) => `${this.prefix}:sent:${id}`,
      };
    }
    return {
      stream,
      timers: `${stream}:timers`,
      lease: `${stream}:lease`,
      deadLetters: `${stream}:dlq`,
      sent: (id) => `${stream}:sent:${id}`,
    };
  }

  private typeDeadLetters(type: string): string {
    return `${this.prefix}:${type}:dlq`;
  }

  /** Where a type's dead letters are: one stream on a server, one per shard on a cluster (each beside its shard). */
  deadLetterStreams(type: string, shards: number): string[] {
    if (!this.cluster) return [this.typeDeadLetters(type)];
    return Array.from({ length: shards }, (_, i) => this.shard(type, i).deadLetters);
  }

  get members(): string {
    return `${this.prefix}:members`;
  }

  /** The event stream; the ids appended to it are the sorted set `<events>:seen` (older versions' markers `<events>:seen:<id>`), in its slot. */
  get events(): string {
    return this.tag(`${this.prefix}:events`);
  }

  /** Answers to a node's asks. On a cluster a sharded channel in the node's own slot, with its node channel. */
  replyChannel(node: string): string {
    return this.cluster ? `{${this.prefix}:node:${node}}:reply` : `${this.prefix}:reply:${node}`;
  }

  /** What other processes address to a node (relay frames). */
  nodeChannel(node: string): string {
    return this.cluster ? `{${this.prefix}:node:${node}}` : `${this.prefix}:node:${node}`;
  }
}

import { Redis, type Cluster } from 'ioredis';

/** A connection of its own to the master of one shard's slot, for its blocking reads. */
export interface ShardConnection {
  redis: Redis;
  /** Ends the connection: a blocking read on it fails at once. */
  close(): void;
}

/**
 * On a Redis Cluster one blocking read cannot span slots, and a blocking read
 * holds its connection: each shard a worker reads gets a connection of its
 * own to the master of its stream's slot. It does not reconnect by itself:
 * after a failure the reader asks again, and is given the slot's master as the
 * cluster client knows it then (after a failover, the promoted replica).
 */
export class ShardConnections {
  private readonly slots = new Map<string, number>();
  private readonly open = new Set<ShardConnection>();

  constructor(private readonly cluster: Cluster) {}

  /** A connection to the master now holding `stream`'s slot; `refresh` first asks the cluster where slots are. */
  async connect(stream: string, refresh = false): Promise<ShardConnection> {
    if (refresh) await new Promise<void>((resolve) => this.cluster.refreshSlotsCache(() => resolve()));
    let slot = this.slots.get(stream);
    if (slot === undefined) {
      slot = Number(await this.cluster.cluster('KEYSLOT', stream));
      this.slots.set(stream, slot);
    }
    const master = this.cluster.slots[slot]?.[0];
    if (!master) throw new Error(`no master known for the slot of ${stream}`);
    const at = master.lastIndexOf(':');
    const redis = new Redis({
      ...this.cluster.options.redisOptions,
      host: master.slice(0, at),
      port: Number(master.slice(at + 1)),
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    // Errors reach the read that was waiting; the connection is not used again.
    redis.on('error', () => undefined);
    const connection: ShardConnection = {
      redis,
      close: () => {
        this.open.delete(connection);
        redis.disconnect();
      },
    };
    this.open.add(connection);
    try {
      await redis.connect();
    } catch (err) {
      connection.close();
      throw err;
    }
    return connection;
  }

  /** Ends every connection (a stop): the reads waiting on them end. */
  closeAll(): void {
    for (const connection of [...this.open]) connection.close();
  }
}

import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Logger } from '../log.ts';
import type { ActorHost, DeliveryOutcome } from './actor-host.ts';
import { readEnvelope, tenantOfEnvelope } from './envelope.ts';
import { Mailboxes } from './mailboxes.ts';
import { bulkSliceMs, remoteBulkRunning, WorkLane } from './work-lane.ts';
import type { RedisClient } from './redis-client.ts';
import type { RedisKeys, ShardKeys } from './redis-keys.ts';
import type { ScriptedRedis } from './scripts.ts';
import type { ShardConnection, ShardConnections } from './shard-connections.ts';
import type { LeasedShard } from './shard-leases.ts';
import { TickBatches } from './tick-batches.ts';
import type { Envelope, RuntimeConfig } from './types.ts';

const group = 'workers';

export interface Shard extends LeasedShard {
  timers: string;
  keys: ShardKeys;
  /** Pending entries of the previous owner have been queued; new entries may be read now. */
  ready: boolean;
  /** When the shard's earliest timer is due as far as this worker knows (0: look now; Infinity: none). */
  dueAt: number;
}

type StreamEntry = [id: string, fields: string[]];

/** An entry read from a shard's stream, waiting in its key's mailbox. */
interface StreamDelivery {
  shard: Shard;
  id: string;
  env: Envelope;
  previousDeliveries: number;
}

/** Entry ids one acknowledgement script call takes at most (Lua's `unpack` has a limit). */
const ackChunk = 1_000;
/** How long a cluster shard's blocking read waits for an entry: an idle shard costs one read this often. */
const clusterBlockMs = 10_000;
/** How often a cluster's read loop looks at this worker's leases for a shard to start reading. */
const shardLookMs = 50;

/** What the stream reader takes from the worker it reads for. */
export interface StreamOwner {
  /** The shards this worker holds the lease of, by stream (the leases' own map). */
  owned: ReadonlyMap<string, Shard>;
  /** Whether the worker is stopping: the read loops end then. */
  stopping(): boolean;
  host(): ActorHost;
  /** The activated states of a shard's keys go (the shard came back to this worker). */
  dropStates(shard: Shard): void;
  /** Publishes on a node's channel (an ask's reply). */
  publish(channel: string, message: string): Promise<void>;
}

/**
 * Reads the owned shards' streams for one worker: an entry goes to its key's
 * mailbox, so one actor key runs one message at a time, and is acknowledged
 * or dead-lettered once handled. An entry is acknowledged only after its
 * handling: delivery is at-least-once.
 */
export class StreamReader {
  private readonly serial = new Mailboxes<StreamDelivery>(
    (items) => this.handle(items),
    (a, b) => a.shard === b.shard && this.owner.host().together(a.env, b.env),
    undefined,
    (d) => d.env.workClass ?? 1,
    (d) => tenantOfEnvelope(d.env),
    new WorkLane(bulkSliceMs, remoteBulkRunning),
  );
  private readonly inFlightIds = new Set<string>();
  /**
   * Handled entries of one shard stream, acknowledged and deleted together:
   * the batches of concurrent handlers that end in one tick cost one script
   * call for the shard, not one each.
   */
  private readonly acks = new TickBatches<string>(async (stream, ids) => {
    for (let i = 0; i < ids.length; i += ackChunk) await this.cmd.ack(stream, group, ...ids.slice(i, i + ackChunk));
  });

  constructor(
    private readonly cmd: ScriptedRedis,
    private readonly keys: RedisKeys,
    private readonly nodeId: string,
    private readonly config: RuntimeConfig,
    private readonly log: Logger,
    private readonly owner: StreamOwner,
  ) {}

  /** Resolves once every entry read has been handled. */
  idle(): Promise<void> {
    return this.serial.idle();
  }

  /** Sends the acknowledgements gathered and not sent yet, and waits for those under way: before the connection closes. */
  flushAcks(): Promise<void> {
    return this.acks.flush();
  }

  /** A shard whose lease was just taken: read once the previous owner's pending entries are queued. */
  async taken(shard: Shard): Promise<void> {
    // Whatever this worker held of these keys dates from before another worker may have run them.
    this.owner.dropStates(shard);
    try {
      await this.cmd.xgroup('CREATE', shard.stream, group, '0', 'MKSTREAM');
    } catch (err) {
      if (!String(err).includes('BUSYGROUP')) throw err;
    }
    await this.takeOverPending(shard);
    shard.ready = true;
    this.log.debug({ stream: shard.stream }, 'shard acquired');
  }

  /**
   * Entries of the owned shards another worker read after this one took them
   * over (its blocking read was already waiting when the lease moved, and it
   * left what it got unacknowledged): nobody reads that worker's pending
   * list, so they are claimed and handled here, as a takeover's are, once
   * idle `minIdleMs`.
   */
  async claimOrphans(minIdleMs: number): Promise<void> {
    for (const shard of [...this.owner.owned.values()]) {
      if (!shard.ready || shard.draining) continue;
      const pending = (await this.cmd.xpending(shard.stream, group, 'IDLE', minIdleMs, '-', '+', 500)) as Array<
        [string, string, number, number]
      >;
      // Another worker's only: this worker's own are in its handlers, and a claim would count a delivery for nothing.
      const orphans = pending.filter(([, consumer]) => consumer !== this.nodeId);
      if (orphans.length === 0) continue;
      const claimed = (await this.cmd.call(
        'XCLAIM',
        shard.stream,
        group,
        this.nodeId,
        String(minIdleMs),
        ...orphans.map(([id]) => id),
      )) as Array<StreamEntry | null>;
      const deliveries = new Map(orphans.map(([id, , , count]) => [id, count]));
      const entries = claimed.filter((e): e is StreamEntry => e !== null);
      if (entries.length === 0 || this.owner.owned.get(shard.stream) !== shard) continue;
      this.log.warn(
        { stream: shard.stream, entries: entries.length },
        'claimed entries another worker read after the shard moved',
      );
      for (const [id, fields] of entries) this.handleEntry(shard, id, fields, deliveries.get(id) ?? 1);
    }
  }

  /**
   * Claims every entry the previous owner read but did not acknowledge and
   * queues them, oldest first, before any new entry of the shard is read: so
   * per-actor order survives a takeover.
   */
  private async takeOverPending(shard: Shard): Promise<void> {
    let cursor = '0-0';
    const claimed: StreamEntry[] = [];
    do {
      const [next, entries] = (await this.cmd.xautoclaim(
        shard.stream,
        group,
        this.nodeId,
        0,
        cursor,
        'COUNT',
        500,
      )) as [string, Array<StreamEntry | null>, string[]];
      for (const entry of entries) if (entry) claimed.push(entry);
      cursor = next;
    } while (cursor !== '0-0');
    if (claimed.length === 0) return;
    const deliveries = new Map<string, number>();
    const pending = (await this.cmd.xpending(
      shard.stream,
      group,
      '-',
      '+',
      claimed.length + 100,
      this.nodeId,
    )) as Array<[string, string, number, number]>;
    for (const [id, , , count] of pending) deliveries.set(id, count);
    this.log.info({ stream: shard.stream, entries: claimed.length }, 'took over pending entries');
    for (const [id, fields] of claimed) this.handleEntry(shard, id, fields, Math.max(0, (deliveries.get(id) ?? 1) - 1));
  }

  /**
   * The owned shards ready to be read; null, after a short wait, when there
   * is none or the mailboxes hold what two reads bring (back-pressure).
   */
  private async readable(): Promise<Shard[] | null> {
    const shards = [...this.owner.owned.values()].filter((s) => s.ready && !s.draining);
    if (shards.length > 0 && this.serial.size < this.config.readBatch * 2) return shards;
    await sleep(shards.length === 0 ? this.config.readBlockMs / 5 : 2);
    return null;
  }

  /** Entries of `streams` no consumer has read yet, waiting up to `blockMs` for the first. */
  private async readNew(
    redis: RedisClient | Redis,
    blockMs: number,
    streams: string[],
  ): Promise<Array<[string, StreamEntry[]]> | null> {
    return (await redis.xreadgroup(
      'GROUP',
      group,
      this.nodeId,
      'COUNT',
      this.config.readBatch,
      'BLOCK',
      blockMs,
      'STREAMS',
      ...streams,
      ...streams.map(() => '>'),
    )) as Array<[string, StreamEntry[]]> | null;
  }

  /** `reader` is a connection of its own: a blocking read holds it until entries come or the block ends. */
  async readLoop(reader: RedisClient): Promise<void> {
    while (!this.owner.stopping()) {
      const shards = await this.readable();
      if (!shards) continue;
      let result: Array<[string, StreamEntry[]]> | null;
      try {
        result = await this.readNew(
          reader,
          this.config.readBlockMs,
          shards.map((s) => s.stream),
        );
      } catch (err) {
        if (this.owner.stopping()) break;
        this.log.warn({ err }, 'stream read failed; retrying');
        await sleep(500);
        continue;
      }
      for (const [stream, entries] of result ?? []) {
        const shard = this.owner.owned.get(stream);
        if (!shard) continue; // lease lost while reading: the next owner claims these
        for (const [id, fields] of entries) this.handleEntry(shard, id, fields, 0);
      }
    }
  }

  /**
   * The cluster's read loop: one read cannot span slots, so each owned shard
   * ready to be read has a blocking read of its own, on a connection of its
   * own (`connections`), waiting up to `clusterBlockMs`. Nothing is sent to
   * Redis while a shard is idle but that wait. A shard leaving this worker
   * ends its read at once (its connection is closed).
   */
  async clusterLoop(connections: ShardConnections): Promise<void> {
    const reading = new Map<Shard, Promise<void>>();
    while (!this.owner.stopping()) {
      for (const shard of this.owner.owned.values())
        if (shard.ready && !shard.draining && !reading.has(shard))
          reading.set(
            shard,
            this.readShard(shard, connections).finally(() => reading.delete(shard)),
          );
      // Looks at this worker's own leases only: no command.
      await sleep(shardLookMs);
    }
    connections.closeAll();
    await Promise.all(reading.values());
  }

  /** Reads one shard of a cluster until it leaves this worker or the worker stops. */
  private async readShard(shard: Shard, connections: ShardConnections): Promise<void> {
    const reading = () => !this.owner.stopping() && !shard.draining && this.owner.owned.get(shard.stream) === shard;
    let connection: ShardConnection | undefined;
    const end = () => connection?.close();
    shard.ownership.signal.addEventListener('abort', end, { once: true });
    try {
      for (let failed = false; reading();) {
        if (this.serial.size >= this.config.readBatch * 2) {
          await sleep(2);
          continue;
        }
        let result: Array<[string, StreamEntry[]]> | null;
        try {
          connection ??= await connections.connect(shard.stream, failed);
          // The shard may have left while the connection was made.
          if (!reading()) break;
          result = await this.readNew(connection.redis, clusterBlockMs, [shard.stream]);
          failed = false;
        } catch (err) {
          connection?.close();
          connection = undefined;
          if (!reading()) break;
          // A failover or a moved slot: the next read asks the cluster where the slot is now.
          this.log.warn({ err, stream: shard.stream }, 'stream read failed; retrying');
          failed = true;
          await sleep(500);
          continue;
        }
        // A shard whose lease was lost while reading: the next owner claims these.
        if (this.owner.owned.get(shard.stream) !== shard) break;
        for (const [id, fields] of result?.[0]?.[1] ?? []) this.handleEntry(shard, id, fields, 0);
      }
    } finally {
      shard.ownership.signal.removeEventListener('abort', end);
      connection?.close();
    }
  }

  private handleEntry(shard: Shard, id: string, fields: string[], previousDeliveries: number): void {
    // Entry ids are unique within a stream only.
    const entryKey = `${shard.stream}/${id}`;
    if (this.inFlightIds.has(entryKey)) return;
    const raw = fields[fields.indexOf('e') + 1];
    const read = readEnvelope(raw);
    if (!read.ok) {
      this.log.error({ stream: shard.stream, entry: id, error: read.reason }, 'actor message dead-lettered');
      void this.cmd
        .deadLetter(
          shard.stream,
          shard.keys.deadLetters,
          group,
          id,
          raw ?? '',
          read.reason,
          previousDeliveries + 1,
          new Date().toISOString(),
        )
        .catch((err) =>
          this.log.warn({ err, stream: shard.stream, entry: id }, 'could not dead-letter a malformed entry'),
        );
      return;
    }
    const env = read.envelope;
    this.inFlightIds.add(entryKey);
    shard.inFlight++;
    this.serial.post(`${env.type}\u0000${env.key}`, { shard, id, env, previousDeliveries });
  }

  private async handle(items: StreamDelivery[]): Promise<void> {
    try {
      const outcomes = await this.owner.host().deliverBatch(items, items[0]!.shard.ownership.signal);
      // The batch's handled entries (a mailbox batch is of one shard) are acknowledged with the shard's others of this tick, then each one ends.
      const handled = items.filter((_, i) => outcomes[i]!.ok || !outcomes[i]!.deadLetter);
      try {
        if (handled.length > 0)
          await this.acks.add(
            items[0]!.shard.stream,
            handled.map((item) => item.id),
          );
      } catch (err) {
        // Not acknowledged: the entries stay pending, and are delivered again; no ask is answered before that.
        this.log.error(
          { err, stream: items[0]!.shard.stream, entries: handled.length },
          'could not acknowledge entries; they will be delivered again',
        );
        return;
      }
      await Promise.all(
        items.map(async ({ shard, id, env }, i) => {
          try {
            await this.settle(shard, id, env, outcomes[i]!);
          } catch (err) {
            this.log.error(
              { err, stream: shard.stream, entry: id },
              'could not settle an entry; it will be delivered again',
            );
          }
        }),
      );
    } finally {
      for (const { shard, id } of items) {
        this.inFlightIds.delete(`${shard.stream}/${id}`);
        shard.inFlight--;
      }
    }
  }

  /** Dead-letters what failed for good, and answers an ask; a handled entry is acknowledged with its batch. */
  private async settle(shard: Shard, id: string, env: Envelope, outcome: DeliveryOutcome): Promise<void> {
    if (!outcome.ok && outcome.deadLetter) {
      const error = outcome.error || `delivered ${outcome.deliveries} times without finishing (worker crashes)`;
      await this.cmd.deadLetter(
        shard.stream,
        shard.keys.deadLetters,
        group,
        id,
        JSON.stringify(env),
        error,
        outcome.deliveries,
        new Date().toISOString(),
      );
      this.log.error(
        { actor: env.type, actorKey: env.key, actorMessageId: env.id, error },
        'actor message dead-lettered',
      );
    }
    if (env.replyTo) {
      const reply = outcome.ok
        ? { askId: env.replyTo.askId, ok: true, value: outcome.value }
        : { askId: env.replyTo.askId, ok: false, error: outcome.error, answer: outcome.answer };
      await this.owner.publish(this.keys.replyChannel(env.replyTo.node), JSON.stringify(reply));
    }
  }
}

import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../log.ts';
import type { ActorHost, DeliveryOutcome } from './actor-host.ts';
import { readEnvelope } from './envelope.ts';
import { Mailboxes } from './mailboxes.ts';
import type { RedisClient } from './redis-client.ts';
import type { RedisKeys, ShardKeys } from './redis-keys.ts';
import type { ScriptedRedis } from './scripts.ts';
import type { LeasedShard } from './shard-leases.ts';
import type { Envelope, RuntimeConfig } from './types.ts';

const group = 'workers';

export interface Shard extends LeasedShard {
  timers: string;
  keys: ShardKeys;
  /** On a cluster: how long the shard's reads have come back empty, and when to read it next. */
  idle: { ms: number; until: number };
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

/** The longest pause between two reads of idle shards on a cluster (where shards cannot share one blocking read). */
const clusterIdlePollMs = 25;

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
  );
  private readonly inFlightIds = new Set<string>();

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

  /** `reader` is a connection of its own: a blocking read holds it until entries come or the block ends. */
  async readLoop(reader: RedisClient): Promise<void> {
    while (!this.owner.stopping()) {
      const shards = await this.readable();
      if (!shards) continue;
      let result: Array<[string, StreamEntry[]]> | null;
      try {
        result = (await reader.xreadgroup(
          'GROUP',
          group,
          this.nodeId,
          'COUNT',
          this.config.readBatch,
          'BLOCK',
          this.config.readBlockMs,
          'STREAMS',
          ...shards.map((s) => s.stream),
          ...shards.map(() => '>'),
        )) as Array<[string, StreamEntry[]]> | null;
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
   * The cluster's read loop: one key per XREADGROUP (the shards are in
   * different slots), so each ready shard is read without blocking, those due
   * all at once (pipelined per master). A shard that gave entries is read
   * again at once; one that gave none waits a little longer each time, up to
   * `clusterIdlePollMs`.
   */
  async pollLoop(): Promise<void> {
    while (!this.owner.stopping()) {
      const shards = await this.readable();
      if (!shards) continue;
      const now = Date.now();
      const due = shards.filter((s) => s.idle.until <= now);
      if (due.length === 0) {
        await sleep(Math.max(1, Math.min(...shards.map((s) => s.idle.until)) - now));
        continue;
      }
      const results = await Promise.all(
        due.map((s) =>
          (
            this.cmd.xreadgroup(
              'GROUP',
              group,
              this.nodeId,
              'COUNT',
              this.config.readBatch,
              'STREAMS',
              s.stream,
              '>',
            ) as Promise<Array<[string, StreamEntry[]]> | null>
          ).catch((err) => {
            if (!this.owner.stopping()) this.log.warn({ err, stream: s.stream }, 'stream read failed; retrying');
            return null;
          }),
        ),
      );
      due.forEach((shard, i) => {
        const entries = results[i]?.[0]?.[1] ?? [];
        shard.idle.ms = entries.length > 0 ? 0 : Math.min(Math.max(1, shard.idle.ms * 2), clusterIdlePollMs);
        shard.idle.until = Date.now() + shard.idle.ms;
        // A shard whose lease was lost while reading: the next owner claims these.
        if (this.owner.owned.get(shard.stream) === shard)
          for (const [id, fields] of entries) this.handleEntry(shard, id, fields, 0);
      });
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
      // One acknowledgement for the batch's handled entries (a mailbox batch is of one shard), then each one's own ending.
      const handled = items.filter((_, i) => outcomes[i]!.ok || !outcomes[i]!.deadLetter);
      try {
        if (handled.length > 0) await this.cmd.ack(items[0]!.shard.stream, group, ...handled.map((item) => item.id));
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

import calculateSlot from 'cluster-key-slot';
import { Counter, register } from 'prom-client';
import { AppError } from '../errors.ts';
import { isCluster } from './redis-client.ts';
import { TickBatches } from './tick-batches.ts';
import type { ScriptedPipeline, ScriptedRedis } from './scripts.ts';

/** A reply that means the pipeline did not run where it was sent (the slot moved, or its master is failing over): it is sent again. */
const redirected =
  /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b|Connection is closed|ECONNREFUSED|ECONNRESET|max retries per request/;
/** How long `writeReplicated` keeps sending a redirected write again: beyond a failover (cluster-node-timeout plus the election). */
const redirectBudgetMs = 20_000;

/** Registered by the first write that stood without a replica's confirmation (on a cluster only). */
const unreplicatedWrites = () =>
  (register.getSingleMetric('relaybox_runtime_unreplicated_writes_total') as Counter | undefined) ??
  new Counter({
    name: 'relaybox_runtime_unreplicated_writes_total',
    help: 'Writes on a Redis Cluster that stood without a replica confirming them: their master had no replica in sync',
  });

/** Replicas in sync (`state=online`) with the master of `slotKey`'s slot: the INFO rides with a read of the key, so it goes to that master. */
async function onlineReplicas(redis: ScriptedRedis, slotKey: string): Promise<number> {
  const [, info] = ((await redis.pipeline().exists(slotKey).info('replication').exec()) ?? []).map(([err, reply]) => {
    if (err) throw err;
    return reply;
  });
  return (String(info).match(/^slave\d+:.*state=online/gm) ?? []).length;
}

/** A write waiting for its turn's pipeline: its commands, its slot's key, and how long it may keep being redirected. */
interface Pending {
  slotKey: string;
  waitMs: number;
  write: (pipeline: ScriptedPipeline) => void;
  deadline: number;
  resolve: (replies: unknown[]) => void;
  reject: (err: unknown) => void;
}

/**
 * The writes one event-loop turn makes to one master, in one pipeline
 * followed by one WAIT: a WAIT confirms every write made before it on its
 * connection, so the turn's writes share it where each had its own. They
 * travel together, so a WAIT never follows writes sent on another connection
 * (after a reconnect, a WAIT of its own would confirm writes it never saw).
 */
class TurnWrites {
  /** The turn's writes gathered by master (`tick-batches.ts`); each group settles its own writes, so its call never fails. */
  private readonly turn = new TickBatches<Pending>((_, group) => this.send(group));
  private alone = 0;

  constructor(private readonly redis: ScriptedRedis) {}

  add(write: Pending): void {
    // A slot whose master the client does not know yet goes alone: the client finds it for that pipeline.
    const master = isCluster(this.redis) ? this.redis.slots[calculateSlot(write.slotKey)]?.[0] : undefined;
    void this.turn.add(master ?? `alone ${++this.alone}`, [write]);
  }

  /** Sends a group; whatever goes wrong unforeseen fails its writes, never the process (a write settles once: the rest is a no-op). */
  private send(group: Pending[]): Promise<void> {
    return this.sendGroup(group).catch((err: unknown) => group.forEach((w) => w.reject(err)));
  }

  /** One pipeline: each write's commands, then the WAIT; each write settles from its own replies and the WAIT's. */
  private async sendGroup(group: Pending[]): Promise<void> {
    const pipeline = this.redis.pipeline() as ScriptedPipeline;
    const counts: number[] = [];
    const broken = new Set<Pending>();
    for (const w of group) {
      const before = pipeline.length;
      try {
        w.write(pipeline);
      } catch (err) {
        broken.add(w);
        w.reject(err);
      }
      counts.push(pipeline.length - before);
    }
    const waitMs = Math.max(...group.map((w) => w.waitMs));
    pipeline.call('WAIT', 1, waitMs);
    let results: Array<[Error | null, unknown]> = [];
    let whole: Error | undefined;
    try {
      results = (await pipeline.exec()) ?? [];
      if (results.length !== pipeline.length)
        whole = new Error('Connection is closed: the pipeline returned no replies');
    } catch (err) {
      whole = err as Error;
    }
    const waited = results[results.length - 1];
    const written: Array<[Pending, unknown[]]> = [];
    let offset = 0;
    group.forEach((w, i) => {
      const own = whole ? [] : results.slice(offset, (offset += counts[i]!));
      if (broken.has(w)) return;
      const failed = whole ?? own.find(([err]) => err)?.[0] ?? waited?.[0] ?? undefined;
      if (failed && redirected.test(failed.message) && Date.now() < w.deadline) this.again(w);
      else if (failed) w.reject(failed);
      else written.push([w, own.map(([, reply]) => reply)]);
    });
    if (written.length === 0) return;
    if (Number(waited?.[1] ?? 0) < 1) {
      const replicas = await onlineReplicas(this.redis, written[0]![0].slotKey).catch((err: unknown) => err);
      const refused =
        typeof replicas !== 'number'
          ? replicas
          : replicas > 0
            ? new AppError('service_unavailable', `no replica confirmed a write within ${waitMs} ms`)
            : undefined;
      if (refused !== undefined) return void written.forEach(([w]) => w.reject(refused));
      unreplicatedWrites().inc(written.length);
    }
    for (const [w, replies] of written) w.resolve(replies);
  }

  /** A redirected write goes again, with the slot map refreshed, in a later turn's pipeline. */
  private again(w: Pending): void {
    if (isCluster(this.redis)) this.redis.refreshSlotsCache();
    setTimeout(() => this.add(w), 200);
  }
}

const turns = new WeakMap<ScriptedRedis, TurnWrites>();

/**
 * Writes, then waits until a replica of the same master holds them (WAIT 1):
 * Redis replicates asynchronously, so a write a master confirmed is lost if it
 * dies before its replica has it. The writes must share one slot, `slotKey`'s.
 * The writes of one event-loop turn to one master go in one pipeline with one
 * WAIT after them all (`TurnWrites`).
 *
 * When no replica confirms within `waitMs`, the master is asked (`INFO
 * replication`) for its replicas: if it has none in sync at all (its replica died, or is still loading after a failover), there
 * is nothing a failover could promote without the write, so the write stands
 * (counted in `relaybox_runtime_unreplicated_writes_total`); if it has one that lags, the write fails
 * (`service_unavailable`): it may be there or not, as with any failed write,
 * and the caller's retry or reconciliation covers it.
 *
 * A write the client cannot follow itself (a redirection or a failover met
 * by the writes but not by the WAIT) is sent again, with the slot map
 * refreshed, for up to 20 s; a write may so be made twice, which
 * at-least-once delivery allows (the ids are the same). Returns the writes'
 * replies.
 */
export function writeReplicated(
  redis: ScriptedRedis,
  slotKey: string,
  waitMs: number,
  write: (pipeline: ScriptedPipeline) => void,
): Promise<unknown[]> {
  let turn = turns.get(redis);
  if (!turn) turns.set(redis, (turn = new TurnWrites(redis)));
  const deadline = Date.now() + redirectBudgetMs;
  return new Promise((resolve, reject) => turn.add({ slotKey, waitMs, write, deadline, resolve, reject }));
}

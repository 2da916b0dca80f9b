import { setTimeout as sleep } from 'node:timers/promises';
import { Counter, register } from 'prom-client';
import { AppError } from '../errors.ts';
import { isCluster } from './redis-client.ts';
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

/**
 * Writes, then waits until a replica of the same master holds them (WAIT 1):
 * Redis replicates asynchronously, so a write a master confirmed is lost if it
 * dies before its replica has it. The writes must share one slot, `slotKey`'s;
 * the WAIT follows them on the same connection.
 *
 * When no replica confirms within `waitMs`, the master is asked (`INFO
 * replication`) for its replicas: if it has none in sync at all (its replica died, or is still loading after a failover), there
 * is nothing a failover could promote without the write, so the write stands
 * (counted in `relaybox_runtime_unreplicated_writes_total`); if it has one that lags, the write fails
 * (`service_unavailable`): it may be there or not, as with any failed write,
 * and the caller's retry or reconciliation covers it.
 *
 * A pipeline the client cannot follow itself (a redirection or a failover met
 * by the writes but not by the WAIT) is sent again, with the slot map
 * refreshed, for up to 20 s; a write may so be made twice, which
 * at-least-once delivery allows (the ids are the same). Returns the writes'
 * replies.
 */
export async function writeReplicated(
  redis: ScriptedRedis,
  slotKey: string,
  waitMs: number,
  write: (pipeline: ScriptedPipeline) => void,
): Promise<unknown[]> {
  const deadline = Date.now() + redirectBudgetMs;
  for (;;) {
    const pipeline = redis.pipeline() as ScriptedPipeline;
    write(pipeline);
    pipeline.call('WAIT', 1, waitMs);
    const results: Array<[Error | null, unknown]> =
      (await pipeline.exec().catch((err: Error) => [[err, null]] as Array<[Error, null]>)) ?? [];
    const failed = results.find(([err]) => err)?.[0];
    if (failed && redirected.test(failed.message) && Date.now() < deadline) {
      if (isCluster(redis)) redis.refreshSlotsCache();
      await sleep(200);
      continue;
    }
    if (failed) throw failed;
    const replicas = Number(results.pop()?.[1] ?? 0);
    if (replicas < 1) {
      if ((await onlineReplicas(redis, slotKey)) > 0)
        throw new AppError('service_unavailable', `no replica confirmed a write within ${waitMs} ms`);
      unreplicatedWrites().inc();
    }
    return results.map(([, reply]) => reply);
  }
}

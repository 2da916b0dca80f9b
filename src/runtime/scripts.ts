import { readdirSync, readFileSync } from 'node:fs';
import type { ChainableCommander } from 'ioredis';
import { AppError } from '../errors.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { isCluster, type RedisClient } from './redis-client.ts';

const luaDir = new URL('./lua/', import.meta.url);

/** `lease-renew-1.lua` becomes the command `leaseRenew` taking 1 key. */
function commandName(file: string): { name: string; numberOfKeys: number } {
  const match = /^(.+)-(\d+)\.lua$/.exec(file);
  if (!match) throw new Error(`Lua script ${file} must be named <name>-<numKeys>.lua`);
  return { name: match[1]!.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase()), numberOfKeys: Number(match[2]) };
}

const scripts = readdirSync(luaDir)
  .filter((f) => f.endsWith('.lua'))
  .map((file) => ({ ...commandName(file), lua: readFileSync(new URL(file, luaDir), 'utf8') }));

export interface ScriptCommands {
  leaseRenew(key: string, node: string, ttlMs: number): Promise<number>;
  leaseRelease(key: string, node: string): Promise<number>;
  ack(stream: string, group: string, id: string): Promise<number>;
  deadLetter(stream: string, dlq: string, group: string, id: string, envelope: string, error: string, deliveries: number, failedAt: string): Promise<string>;
  moveDueTimers(timers: string, stream: string, now: number, limit: number): Promise<number>;
  enqueueOnce(marker: string, stream: string, timers: string, ttlMs: number, envelope: string, dueAt: number): Promise<number>;
  appendEventOnce(stream: string, marker: string, ttlMs: number, maxLength: number, event: string): Promise<number>;
  gcra(key: string, intervalMs: number, burst: number): Promise<[number, number, number, number]>;
}

export type ScriptedRedis = RedisClient & ScriptCommands;

/** A pipeline that also queues the scripts (their results come with `exec`). */
export type ScriptedPipeline = ChainableCommander & { [K in keyof ScriptCommands]: (...args: Parameters<ScriptCommands[K]>) => ScriptedPipeline };

/** A reply that means the pipeline did not run where it was sent (the slot moved, or its master is failing over): it is sent again. */
const redirected = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b|Connection is closed|ECONNREFUSED|ECONNRESET|max retries per request/;
/** How long `writeReplicated` keeps sending a redirected write again: beyond a failover (cluster-node-timeout plus the election). */
const redirectBudgetMs = 20_000;

/**
 * Writes, then waits until a replica of the same master holds them (WAIT 1):
 * Redis replicates asynchronously, so a write a master confirmed is lost if it
 * dies before its replica has it. The writes must share one slot; the WAIT
 * follows them on the same connection. A pipeline the client cannot follow
 * itself (a redirection or a failover met by the writes but not by the WAIT)
 * is sent again, with the slot map refreshed, for up to 20 s; a write may so
 * be made twice, which at-least-once delivery allows (the ids are the same).
 * Throws `service_unavailable` when no replica confirms within `waitMs` (a
 * master left without a replica): the write may be there or not, as with any
 * failed write, and the caller's retry or reconciliation covers it. Returns
 * the writes' replies.
 */
export async function writeReplicated(redis: ScriptedRedis, waitMs: number, write: (pipeline: ScriptedPipeline) => void): Promise<unknown[]> {
  const deadline = Date.now() + redirectBudgetMs;
  for (;;) {
    const pipeline = redis.pipeline() as ScriptedPipeline;
    write(pipeline);
    pipeline.call('WAIT', 1, waitMs);
    const results: Array<[Error | null, unknown]> = (await pipeline.exec().catch((err: Error) => [[err, null]] as Array<[Error, null]>)) ?? [];
    const failed = results.find(([err]) => err)?.[0];
    if (failed && redirected.test(failed.message) && Date.now() < deadline) {
      if (isCluster(redis)) redis.refreshSlotsCache();
      await sleep(200);
      continue;
    }
    if (failed) throw failed;
    const replicas = Number(results.pop()?.[1] ?? 0);
    if (replicas < 1) throw new AppError('service_unavailable', `no replica confirmed a write within ${waitMs} ms`);
    return results.map(([, reply]) => reply);
  }
}

/** Loads every Lua script once per connection (EVALSHA, falling back to EVAL after a script flush). */
export function withScripts(redis: RedisClient): ScriptedRedis {
  for (const { name, numberOfKeys, lua } of scripts) {
    if (!(name in redis)) redis.defineCommand(name, { numberOfKeys, lua });
  }
  return redis as ScriptedRedis;
}

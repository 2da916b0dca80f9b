import { readdirSync, readFileSync } from 'node:fs';
import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from './redis-client.ts';

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
  /** Acknowledges and deletes entries of one stream (at least one id). */
  ack(stream: string, group: string, ...ids: string[]): Promise<number>;
  deadLetter(
    stream: string,
    dlq: string,
    group: string,
    id: string,
    envelope: string,
    error: string,
    deliveries: number,
    failedAt: string,
  ): Promise<string>;
  leaseTake(key: string, holder: string, node: string, ttlMs: number): Promise<number>;
  /** Returns when the earliest timer left is due, or -1. */
  moveDueTimers(timers: string, stream: string, now: number, limit: number): Promise<number>;
  /** 0 when sent already; the lease holder's node id when the timer is now the shard's earliest; else 1. */
  enqueueOnce(
    marker: string,
    stream: string,
    timers: string,
    lease: string,
    ttlMs: number,
    envelope: string,
    dueAt: number,
  ): Promise<number | string>;
  /** The lease holder's node id when the timer is now the shard's earliest, else 1. */
  schedule(timers: string, lease: string, dueAt: number, envelope: string): Promise<number | string>;
  /**
   * Appends the events as one stream entry (`grouped` 0: an entry each, as versions before), `once` leaving out
   * each id appended within the window before; `idsAndEvents`: id, event (JSON), id, event, …; returns how many
   * were appended.
   */
  appendEvents(
    stream: string,
    seen: string,
    appended: string,
    now: number,
    trimBefore: number,
    maxLength: number,
    once: 0 | 1,
    grouped: 0 | 1,
    ...idsAndEvents: string[]
  ): Promise<number>;
  /** `count` requests against one budget, in order: how many passed, and the arrival time before the first less now (ms). */
  gcra(key: string, intervalMs: number, burst: number, count: number): Promise<[number, number]>;
}

export type ScriptedRedis = RedisClient & ScriptCommands;

/** A pipeline that also queues the scripts (their results come with `exec`). */
export type ScriptedPipeline = ChainableCommander & {
  [K in keyof ScriptCommands]: (...args: Parameters<ScriptCommands[K]>) => ScriptedPipeline;
};

/** Loads every Lua script once per connection (EVALSHA, falling back to EVAL after a script flush). */
export function withScripts(redis: RedisClient): ScriptedRedis {
  for (const { name, numberOfKeys, lua } of scripts) {
    if (!(name in redis)) redis.defineCommand(name, { numberOfKeys, lua });
  }
  return redis as ScriptedRedis;
}

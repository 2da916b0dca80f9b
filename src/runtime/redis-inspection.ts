import type { Redis } from 'ioredis';
import { readEnvelope } from './envelope.ts';
import type { ActorTypeStats, DeadLetter } from './types.ts';

type StreamEntry = [id: string, fields: string[]];

/** The newest `limit` entries of a dead-letter stream, oldest first. */
export async function readDeadLetters(redis: Redis, dlq: string, limit: number): Promise<DeadLetter[]> {
  const entries = (await redis.xrevrange(dlq, '+', '-', 'COUNT', limit)) as StreamEntry[];
  return entries.reverse().map(([, fields]) => {
    const get = (name: string) => fields[fields.indexOf(name) + 1] ?? '';
    const read = readEnvelope(get('e'));
    return { envelope: read.ok ? read.envelope : null, raw: get('e'), error: get('error'), deliveries: Number(get('deliveries')), failedAt: get('failedAt') };
  });
}

/** Backlog, timers and dead letters of one actor type, in one round trip. */
export async function readTypeStats(redis: Redis, type: string, streams: string[], dlq: string): Promise<ActorTypeStats> {
  const pipeline = redis.pipeline();
  // A handled entry is deleted from its stream, so each stream's first entry is its oldest not yet handled; its id holds when it was added.
  for (const stream of streams) pipeline.xlen(stream).zcard(`${stream}:timers`).xrange(stream, '-', '+', 'COUNT', 1);
  // The age is read against the server's clock, as the entry ids are.
  pipeline.xlen(dlq).time();
  const replies = ((await pipeline.exec()) ?? []).map(([, reply]) => reply);
  const [seconds, micros] = (replies.pop() as [string, string] | null) ?? [String(Date.now() / 1000), '0'];
  const nowMs = Number(seconds) * 1000 + Number(micros) / 1000;
  const deadLetters = Number(replies.pop() ?? 0);
  let pending = 0;
  let timers = 0;
  let oldest = Infinity;
  for (let i = 0; i < replies.length; i += 3) {
    pending += Number(replies[i] ?? 0);
    timers += Number(replies[i + 1] ?? 0);
    const first = (replies[i + 2] as StreamEntry[] | null)?.[0];
    if (first) oldest = Math.min(oldest, Number(first[0].split('-')[0]));
  }
  return { type, pending, timers, deadLetters, oldestAgeSeconds: Number.isFinite(oldest) ? Math.max(0, (nowMs - oldest) / 1000) : 0 };
}

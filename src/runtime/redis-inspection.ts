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
  for (const stream of streams) pipeline.xlen(stream).zcard(`${stream}:timers`);
  pipeline.xlen(dlq);
  const counts = ((await pipeline.exec()) ?? []).map(([, n]) => Number(n ?? 0));
  const deadLetters = counts.pop() ?? 0;
  return {
    type,
    pending: counts.filter((_, i) => i % 2 === 0).reduce((a, b) => a + b, 0),
    timers: counts.filter((_, i) => i % 2 === 1).reduce((a, b) => a + b, 0),
    deadLetters,
  };
}

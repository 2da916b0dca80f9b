import type { RedisClient } from './redis-client.ts';
import { readEnvelope } from './envelope.ts';
import type { ActorTypeStats, DeadLetter } from './types.ts';

type StreamEntry = [id: string, fields: string[]];

/** The newest `limit` entries of a type's dead-letter streams (one, or one per shard on a cluster), oldest first. */
export async function readDeadLetters(redis: RedisClient, dlqs: string[], limit: number): Promise<DeadLetter[]> {
  const entries = (
    await Promise.all(dlqs.map((dlq) => redis.xrevrange(dlq, '+', '-', 'COUNT', limit) as Promise<StreamEntry[]>))
  ).flat();
  const letters = entries.map(([, fields]) => {
    const get = (name: string) => fields[fields.indexOf(name) + 1] ?? '';
    const read = readEnvelope(get('e'));
    return {
      envelope: read.ok ? read.envelope : null,
      raw: get('e'),
      error: get('error'),
      deliveries: Number(get('deliveries')),
      failedAt: get('failedAt'),
    };
  });
  // Each stream is newest first; merged, the newest `limit` of all of them by when they failed.
  if (dlqs.length > 1) letters.sort((a, b) => (a.failedAt < b.failedAt ? 1 : a.failedAt > b.failedAt ? -1 : 0));
  return letters.slice(0, limit).reverse();
}

/** Backlog, timers and dead letters of one actor type, in one round trip (one per master on a cluster: the client pipelines the commands). */
export async function readTypeStats(
  redis: RedisClient,
  type: string,
  streams: string[],
  dlqs: string[],
): Promise<ActorTypeStats> {
  const settled = <T>(reply: Promise<T>) => reply.catch(() => null);
  // A handled entry is deleted from its stream, so each stream's first entry is its oldest not yet handled; its id holds when it was added.
  const perStream = streams.flatMap((stream) => [
    settled(redis.xlen(stream)),
    settled(redis.zcard(`${stream}:timers`)),
    settled(redis.xrange(stream, '-', '+', 'COUNT', 1)),
  ]);
  // The age is read against the server's clock, as the entry ids are.
  const [replies, letters, time] = await Promise.all([
    Promise.all<unknown>(perStream),
    Promise.all(dlqs.map((dlq) => settled(redis.xlen(dlq)))),
    settled(redis.time()),
  ]);
  const [seconds, micros] = (time as [string | number, string | number] | null) ?? [String(Date.now() / 1000), '0'];
  const nowMs = Number(seconds) * 1000 + Number(micros) / 1000;
  const deadLetters = letters.reduce<number>((sum, n) => sum + Number(n ?? 0), 0);
  let pending = 0;
  let timers = 0;
  let oldest = Infinity;
  for (let i = 0; i < replies.length; i += 3) {
    pending += Number(replies[i] ?? 0);
    timers += Number(replies[i + 1] ?? 0);
    const first = (replies[i + 2] as StreamEntry[] | null)?.[0];
    if (first) oldest = Math.min(oldest, Number(first[0].split('-')[0]));
  }
  return {
    type,
    pending,
    timers,
    deadLetters,
    oldestAgeSeconds: Number.isFinite(oldest) ? Math.max(0, (nowMs - oldest) / 1000) : 0,
  };
}

import { Type } from '@sinclair/typebox';
import { defineActor, defineProtocol } from '../src/runtime/actor.ts';
import { redisClient, type RedisClient, type RedisTarget } from '../src/runtime/redis-client.ts';

/** The benchmark's no-op actor: `ping` carries the time it was sent. */
export const benchProtocol = defineProtocol('bench', { ping: { t: Type.Number() } });

export const benchActor = (onPing: (sentAt: number) => void) =>
  defineActor(benchProtocol, { handlers: { ping: (_ctx, msg) => onPing(msg.t) } });

/** Where the workers count what they handled: one hash tag, so a cluster takes both in one transaction. */
export const benchKeys = (prefix: string) => ({
  handled: `{${prefix}:bench}:handled`,
  latency: `{${prefix}:bench}:latency`,
});

export const benchRedis = (target: RedisTarget): RedisClient => redisClient(target, { maxRetriesPerRequest: 3 });

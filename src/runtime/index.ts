import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import { LocalTransport } from './local-transport.ts';
import { RedisTransport } from './redis-transport.ts';
import type { Transport } from './types.ts';

export type { Transport } from './types.ts';

/** Redis Streams when REDIS_URL is set, otherwise everything in this process. */
export function createTransport(config: Config, log: Logger): Transport {
  const runtimeLog = log.child({ component: 'runtime' });
  if (config.redisUrl) return new RedisTransport(config.redisUrl, config.runtime, config.nodeId, runtimeLog);
  return new LocalTransport(config.runtime, runtimeLog);
}

/**
 * A worker process for the chaos test: runs a `counter` actor on the Redis
 * transport. Its handler counts each message once, by per-key sequence
 * number, in one Lua script, and records duplicates and order violations.
 */
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { RedisTransport } from '../../src/runtime/redis-transport.ts';
import { counterProtocol } from './counter-protocol.ts';
import { defineActor } from '../../src/runtime/actor.ts';

const countOnce = `
local last = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local seq = tonumber(ARGV[2])
if seq <= last then
  redis.call('HINCRBY', KEYS[3], 'duplicates', 1)
  return 0
end
if seq ~= last + 1 then redis.call('HINCRBY', KEYS[3], 'orderViolations', 1) end
redis.call('HSET', KEYS[1], ARGV[1], seq)
redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
redis.call('HINCRBY', KEYS[3], 'handled', 1)
return 1
`;

const config = loadConfig();
const prefix = config.runtime.keyPrefix;
const redis = new Redis(config.redisUrl!);
redis.defineCommand('countOnce', { numberOfKeys: 3, lua: countOnce });
const counted = redis as Redis & { countOnce(...args: Array<string | number>): Promise<number> };

const transport = new RedisTransport(config.redisUrl!, config.runtime, config.nodeId, createLogger(config.logLevel));
await transport.start(
  [
    defineActor(counterProtocol, {
      handlers: {
        async add(ctx, msg) {
          await sleep(1); // leaves messages in flight when the process is killed
          await counted.countOnce(
            `${prefix}:chaos:last`,
            `${prefix}:chaos:counts`,
            `${prefix}:chaos:stats`,
            ctx.key,
            msg.seq,
          );
        },
      },
    }),
  ],
  { consume: true },
);
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void transport.stop().then(() => process.exit(0));
});

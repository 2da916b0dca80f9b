/** A worker process for bench/runtime.ts: a no-op actor that records how long each message took from send to handled. */
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { redisTarget } from '../src/runtime/index.ts';
import { RedisTransport } from '../src/runtime/redis-transport.ts';
import { benchActor, benchKeys, benchRedis } from './runtime-protocol.ts';

const config = loadConfig();
const target = redisTarget(config)!;
const bench = benchKeys(config.runtime.keyPrefix);
const redis = benchRedis(target);
const latencies: number[] = [];
let handled = 0;

const transport = new RedisTransport(target, config.runtime, config.nodeId, createLogger('warn'));
await transport.start(
  [
    benchActor((t) => {
      latencies.push(Date.now() - t);
      handled++;
    }),
  ],
  { consume: true },
);

// Counts are flushed in batches so that recording does not dominate what is measured.
setInterval(() => {
  if (handled === 0) return;
  const batch = latencies.splice(0);
  const n = handled;
  handled = 0;
  void redis
    .multi()
    .incrby(bench.handled, n)
    .rpush(bench.latency, ...batch)
    .exec();
}, 50);
process.stdout.write('ready\n');
process.on('SIGTERM', () => void transport.stop().then(() => process.exit(0)));

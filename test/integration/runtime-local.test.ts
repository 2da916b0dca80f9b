import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLogger } from '../../src/log.ts';
import { defineActor, defineProtocol } from '../../src/runtime/actor.ts';
import { LocalTransport } from '../../src/runtime/local-transport.ts';
import { runtimeContract, testRuntimeConfig } from './runtime-contract.ts';

runtimeContract('local', async (cfg) => new LocalTransport(cfg, createLogger('silent')));

test('the in-process transport counts each pending timer under its own actor type', async () => {
  const rt = new LocalTransport(testRuntimeConfig(), createLogger('silent'));
  const first = defineProtocol('first', { ping: {} });
  const second = defineProtocol('second', { ping: {} });
  await rt.start([
    defineActor(first, { handlers: { async ping() {} } }),
    defineActor(second, { handlers: { async ping() {} } }),
  ]);
  try {
    await rt.send('first', 'later', { kind: 'ping' }, { delayMs: 60_000 });
    await rt.send('first', 'later', { kind: 'ping' }, { delayMs: 60_000 });
    await rt.send('second', 'later', { kind: 'ping' }, { delayMs: 60_000 });
    const timers = Object.fromEntries((await rt.stats()).map((s) => [s.type, s.timers]));
    assert.deepEqual(timers, { first: 2, second: 1 });
  } finally {
    await rt.stop();
  }
});

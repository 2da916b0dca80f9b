import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { answers, availableService } from '../support/services.ts';

/** A port nothing listens on: one just released. */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

test('a service-backed test asks once whether its service answers; outside CI an unset variable or a silent service skips with the reason', async (t) => {
  const server = createServer((socket) => socket.end()).listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const live = (server.address() as AddressInfo).port;
  const dead = await closedPort();
  assert.equal(await answers(`redis://127.0.0.1:${live}`), true);
  assert.equal(await answers(`mongodb://127.0.0.1:${dead}/relaybox`), false);
  assert.equal(
    await answers(`mongodb://127.0.0.1:${live},127.0.0.1:${dead}/relaybox?replicaSet=rs`),
    true,
    'the first host of a MongoDB seed list',
  );

  const saved = { CI: process.env.CI, MONGODB_URL: process.env.MONGODB_URL };
  t.after(() => {
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  });
  delete process.env.CI;
  delete process.env.MONGODB_URL;
  const unset = await availableService('MONGODB_URL');
  assert.ok(
    'skipped' in unset && /MONGODB_URL not set/.test(unset.skipped),
    `an unset variable skips, even with a service on the default port: ${JSON.stringify(unset)}`,
  );
  process.env.MONGODB_URL = `mongodb://127.0.0.1:${dead}/relaybox`;
  const skipped = await availableService('MONGODB_URL');
  assert.ok('skipped' in skipped && /does not answer/.test(skipped.skipped), JSON.stringify(skipped));
  process.env.MONGODB_URL = `mongodb://127.0.0.1:${live}/relaybox`;
  assert.deepEqual(await availableService('MONGODB_URL'), { url: `mongodb://127.0.0.1:${live}/relaybox` });
  delete process.env.MONGODB_URL;
  process.env.CI = 'true';
  await assert.rejects(
    availableService('MONGODB_URL'),
    /MONGODB_URL is not set/,
    'in CI a missing service is a failure',
  );
});

test('without REDIS_URL a Redis test is skipped with the reason, even when a Redis answers on the default port (outside CI)', async () => {
  // NODE_TEST_CONTEXT would make the child report to this runner instead of printing.
  const { CI: _ci, REDIS_URL: _redis, NODE_TEST_CONTEXT: _context, ...env } = process.env;
  const run = await promisify(execFile)(
    process.execPath,
    [
      '--import',
      'tsx',
      '--test',
      '--test-reporter=tap',
      '--test-name-pattern=shared through Redis',
      'test/integration/rate-limiter.test.ts',
    ],
    { env, timeout: 60_000 },
  );
  assert.match(run.stdout, /# SKIP REDIS_URL not set/, run.stdout);
});

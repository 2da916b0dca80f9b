import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { test } from 'node:test';
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

test('a service-backed test asks once whether its service answers, and skips with the reason when it does not (outside CI)', async (t) => {
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
  const skipped = await availableService('MONGODB_URL', `mongodb://127.0.0.1:${dead}/relaybox`);
  assert.ok('skipped' in skipped && /does not answer/.test(skipped.skipped), JSON.stringify(skipped));
  assert.deepEqual(await availableService('MONGODB_URL', `mongodb://127.0.0.1:${live}/relaybox`), {
    url: `mongodb://127.0.0.1:${live}/relaybox`,
  });
  process.env.CI = 'true';
  await assert.rejects(
    availableService('MONGODB_URL', `mongodb://127.0.0.1:${live}/relaybox`),
    /MONGODB_URL is not set/,
    'in CI a missing service is a failure',
  );
});

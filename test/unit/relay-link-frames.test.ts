import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger } from '../../src/log.ts';
import type { SendFrame } from '../../src/relay-protocol/frames.ts';
import { RelayLink } from '../../src/relays/relay-link.ts';
import { LocalTransport } from '../../src/runtime/local-transport.ts';
import { testRuntimeConfig } from '../integration/runtime-contract.ts';

const frame = (messageId: string, body: string): SendFrame => ({
  type: 'send',
  messageId,
  attempt: 1,
  to: '+15551230000',
  body,
});

/** A link on the in-process transport, with the addressed messages it published and the frames its receiving end got. */
function linked() {
  const rt = new LocalTransport(testRuntimeConfig(), createLogger('silent'));
  const link = new RelayLink(rt);
  const published: unknown[] = [];
  const publish = rt.publishToNode.bind(rt);
  rt.publishToNode = async (node, payload) => {
    published.push(payload);
    return publish(node, payload);
  };
  const got: string[] = [];
  link.onFrame((d) => void got.push(`${d.relayId}/${d.session} ${(d.frame as SendFrame).messageId}`));
  return { link, published, got };
}

const relay = { id: 'r1', node: 'n1', session: 3 };

test("a hand-over's frames go in one addressed message and arrive as that many frames, in order", async () => {
  const { link, published, got } = linked();
  await link.deliverAll(relay, [frame('m1', 'a'), frame('m2', 'b'), frame('m3', 'c')]);
  await sleep(0);
  assert.equal(published.length, 1);
  assert.equal((published[0] as { kind: string }).kind, 'relay-frames');
  assert.deepEqual(got, ['r1/3 m1', 'r1/3 m2', 'r1/3 m3']);
});

test('one frame goes as a relay-frame; long texts go in several messages of about 256 KB, still in order', async () => {
  const { link, published, got } = linked();
  await link.deliverAll(relay, [frame('m0', 'x')]);
  assert.equal((published[0] as { kind: string }).kind, 'relay-frame');
  const long = 'y'.repeat(20_000);
  await link.deliverAll(
    relay,
    Array.from({ length: 30 }, (_, i) => frame(`m${i + 1}`, long)),
  );
  await sleep(0);
  assert.equal(published.length, 1 + 3, '30 frames of about 21 KB: 12, 12 and 6');
  assert.deepEqual(
    published.slice(1).map((p) => (p as { frames: unknown[] }).frames.length),
    [12, 12, 6],
  );
  assert.deepEqual(
    got,
    Array.from({ length: 31 }, (_, i) => `r1/3 m${i}`),
  );
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { tenantProtocol } from '../../src/actors/tenant/protocol.ts';
import type { TenantState } from '../../src/actors/tenant/tenant-state.ts';
import type { MessageDoc } from '../../src/messages/message-store.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { message } from '../unit/tenant-fixtures.ts';
import { waitFor } from './runtime-contract.ts';

/** Queued messages stored before the restart: the activation after it reads them while the racing sends are stored. */
const stored = 200;
/** Sends made at once, each time the tenant actor is not active. */
const racing = 40;
const priorities = [0, 30, 60, 90];

async function queuedGauge(t: TestApp): Promise<number> {
  const text = (await t.request('GET', '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith('relaybox_queue_messages '));
  return line === undefined ? NaN : Number(line.split(' ').at(-1));
}

/**
 * `racing` sends at once, with the queue's gauge read all the while: the
 * highest value it showed, and each send's id and priority.
 */
async function raceSends(t: TestApp, org: Org, round: string): Promise<{ sent: Map<string, number>; highest: number }> {
  let highest = 0;
  let racingOn = true;
  const watch = (async () => {
    while (racingOn) {
      highest = Math.max(highest, await queuedGauge(t));
      await sleep(5);
    }
  })();
  const answers = await Promise.all(
    Array.from({ length: racing }, (_, i) => {
      const priority = priorities[i % priorities.length]!;
      return t
        .request('POST', '/api/v1/messages', {
          token: org.ownerToken,
          body: { to: `+1415555${String(i).padStart(4, '0')}`, body: `${round} ${i}`, priority },
        })
        .then((res) => ({ res, priority }));
    }),
  );
  racingOn = false;
  await watch;
  const sent = new Map<string, number>();
  for (const { res, priority } of answers) {
    assert.equal(res.status, 201, res.text);
    sent.set(res.body.id as string, priority);
  }
  return { sent, highest };
}

/** The tenant actor's count, when it is active (a state dropped after a failed handler is built again by its next message). */
function heldCount(t: TestApp): number | undefined {
  const states = [...t.app.runtime.statesOf(tenantProtocol.type)] as TenantState[];
  return states.length === 0 ? undefined : states.reduce((n, s) => n + s.queue.size, 0);
}

/** The gauge reaches `expected`, the actor's count stays there over several sweeps, and the gauge never showed more. */
async function countsExactly(t: TestApp, expected: number, highest: number, what: string): Promise<void> {
  await waitFor(async () => (await queuedGauge(t)) === expected, 15_000, `${expected} queued (${what})`);
  for (let i = 0; i < 5; i++) {
    await sleep(200);
    highest = Math.max(highest, await queuedGauge(t));
    const held = heldCount(t);
    if (held !== undefined) assert.equal(held, expected, `${what}: the count holds over the sweeps`);
  }
  assert.ok(highest <= expected, `${what}: the count never went past ${expected} (it showed ${highest})`);
}

eachBackend((backend) => {
  test(`${backend}: sends racing the tenant actor's activation, first and after a restart with a stored backlog, are each counted once and handed out once, in priority order`, async (ctx) => {
    let t = await startTestApp(backend, { TENANT_SWEEP_MS: '300' });
    let relay: StandInRelay | undefined;
    ctx.after(async () => {
      relay?.close();
      await t.stop();
    });
    const org = await signup(t);
    const priorityOf = new Map<string, number>();

    // The first sends of the organization: the first one's enqueue activates the actor while the others are being stored.
    const first = await raceSends(t, org, 'first');
    for (const [id, p] of first.sent) priorityOf.set(id, p);
    await countsExactly(t, priorityOf.size, first.highest, 'sends racing the first activation');

    // A backlog as a restart finds it, then a restart: the racing sends activate the actor, whose rebuild reads the backlog.
    const messages = t.app.store.collection<MessageDoc>('messages');
    const backlog = Array.from({ length: stored }, (_, i) =>
      message(`msg_backlog_${i}`, {
        tenantId: org.orgId,
        teamId: org.teamId,
        priority: priorities[(i * 7) % priorities.length]!,
        to: `+1415666${String(i).padStart(4, '0')}`,
      }),
    );
    for (let i = 0; i < backlog.length; i += 400)
      await messages.insertMany({ tenantId: org.orgId }, backlog.slice(i, i + 400));
    for (const m of backlog) priorityOf.set(m.id, m.priority);
    t = await t.restart();
    const second = await raceSends(t, org, 'after the restart');
    for (const [id, p] of second.sent) priorityOf.set(id, p);
    await countsExactly(t, priorityOf.size, second.highest, 'sends racing the rebuild of a stored backlog');

    // A relay takes them all: each once, the higher priority first.
    relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 200 });
    await relay.connect();
    let reported = 0;
    const deadline = Date.now() + 240_000;
    while (relay.sends.length < priorityOf.size) {
      const fresh = relay.sends.slice(reported);
      reported += fresh.length;
      await Promise.all(fresh.map((send) => relay.report(send.messageId, 'sent')));
      assert.ok(Date.now() < deadline, `every queued message handed to the relay: ${reported} of ${priorityOf.size}`);
      await sleep(10);
    }
    await sleep(500);
    const handed = relay.sends.map((s) => s.messageId);
    assert.equal(new Set(handed).size, handed.length, 'no message handed out twice');
    assert.deepEqual(new Set(handed), new Set(priorityOf.keys()), 'every queued message handed out');
    const order = handed.map((id) => priorityOf.get(id)!);
    const outOfOrder = order.findIndex((p, i) => i > 0 && p > order[i - 1]!);
    assert.equal(
      outOfOrder,
      -1,
      `handed out in priority order (priority ${order[outOfOrder]} after ${order[outOfOrder - 1]})`,
    );
    await waitFor(async () => (await queuedGauge(t)) === 0, 10_000, 'the queue empty');
  });
});

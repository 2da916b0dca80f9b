import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { tenantProtocol } from '../../src/actors/tenant/protocol.ts';
import type { TenantState } from '../../src/actors/tenant/tenant-state.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { eachBackend, signup, startTestApp } from '../support/test-app.ts';
import { waitFor } from './runtime-contract.ts';

const headSize = 5;
const priorities = [0, 50, 100, 0, 20, 50];
const queued = 36;

eachBackend((backend) => {
  test(`${backend}: the tenant actor holds a sender line's head of ${headSize} while ${queued} wait, answers for the others from the store, and hands all out in priority order`, async (ctx) => {
    const t = await startTestApp(backend, { TENANT_QUEUE_HEAD_SIZE: String(headSize) });
    const relays: StandInRelay[] = [];
    ctx.after(async () => {
      for (const r of relays) r.close();
      await t.stop();
    });
    const org = await signup(t);
    const states = () => [...t.app.runtime.statesOf(tenantProtocol.type)] as TenantState[];
    const held = () => Math.max(0, ...states().map((s) => s.queue.size));
    const sent: Array<{ id: string; priority: number; index: number }> = [];
    for (let i = 0; i < queued; i++) {
      const priority = priorities[i % priorities.length]!;
      const res = await t.request('POST', '/api/v1/messages', {
        token: org.ownerToken,
        body: { to: '+14155550100', body: `m${i}`, priority },
      });
      assert.equal(res.status, 201, res.text);
      sent.push({ id: res.body.id as string, priority, index: i });
    }
    await waitFor(() => states().some((s) => s.queue.waiting === queued), 10_000, 'all counted as waiting');
    // At most the head: an activation after the sends (the runtime may move or idle the actor) holds none until a relay can take them.
    assert.ok(held() <= headSize, `only the head is held, saw ${held()}`);
    // The last accepted at the lowest priority is not held: why it waits comes from the store.
    const last = sent.filter((m) => m.priority === 0).at(-1)!;
    const status = await t.request('GET', `/api/v1/messages/${last.id}/status`, { token: org.ownerToken });
    assert.equal(status.body.waitingFor, 'relay_offline');

    const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 1 });
    relays.push(relay);
    await relay.connect();
    let mostHeld = 0;
    for (let i = 0; i < queued; i++) {
      await waitFor(() => relay.sends.length === i + 1, 10_000, `send ${i + 1}`);
      mostHeld = Math.max(mostHeld, held());
      await relay.report(relay.sends[i]!.messageId, 'sent');
    }
    await sleep(100);
    assert.equal(relay.sends.length, queued, 'each handed out once');
    assert.ok(mostHeld <= headSize, `at most ${headSize} held while sending, saw ${mostHeld}`);
    const expected = [...sent].sort((a, b) => b.priority - a.priority || a.index - b.index).map((m) => m.id);
    assert.deepEqual(
      relay.sends.map((f) => f.messageId),
      expected,
      'priority first, then acceptance order',
    );
  });
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { tenantProtocol } from '../../src/actors/tenant/protocol.ts';
import type { TenantState } from '../../src/actors/tenant/tenant-state.ts';
import type { MessageDoc } from '../../src/messages/message-store.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { eachBackend, signup, startTestApp, type TestApp } from '../support/test-app.ts';
import { message } from '../unit/tenant-fixtures.ts';
import { waitFor } from './runtime-contract.ts';

/** The window: each line, priority and source holds this many in memory. */
const window = 5;
const line = '+14155550123';
const lines = [null, line] as const;
const priorities = [0, 40, 80];
/** Stored per line and priority before the restart: several windows each. */
const perPart = 14;

const tenantStates = (t: TestApp) => [...t.app.runtime.statesOf(tenantProtocol.type)] as TenantState[];

/** The line a message goes out on, as its order is checked: its sender number, or any relay. */
const lineKey = (fromNumber: string | null) => fromNumber ?? 'any relay';

eachBackend((backend) => {
  test(`${backend}: a queue longer than its window is paged from the store after a restart: each message handed out once, by priority then age on each line, with sends and a retry arriving meanwhile`, async (ctx) => {
    let t = await startTestApp(backend, {
      TENANT_QUEUE_WINDOW: String(window),
      TENANT_SWEEP_MS: '300',
      MESSAGE_RETRY_BASE_MS: '50',
      PACING_PER_SECOND: '10000',
      PACING_BURST: '10000',
      PACING_NEW_CONTACTS_PER_DAY: '100000',
    });
    let relay: StandInRelay | undefined;
    ctx.after(async () => {
      relay?.close();
      await t.stop();
    });
    const org = await signup(t);

    // The backlog as a restart finds it, stored in a shuffled order (the store's order is createdAt, not insertion).
    const backlog: MessageDoc[] = [];
    for (let i = 0; i < perPart; i++)
      for (const fromNumber of lines)
        for (const priority of priorities)
          backlog.push(
            message(`msg_page_${backlog.length}`, {
              tenantId: org.orgId,
              teamId: org.teamId,
              priority,
              fromNumber,
              to: `+1415777${String(backlog.length).padStart(4, '0')}`,
            }),
          );
    const shuffled = [...backlog].sort(
      (a, b) => ((a.id.length * 7 + a.to.charCodeAt(11)) % 5) - ((b.id.length * 7 + b.to.charCodeAt(11)) % 5),
    );
    await t.app.store.collection<MessageDoc>('messages').insertMany({ tenantId: org.orgId }, shuffled);
    t = await t.restart();

    // Activated after the restart: the whole backlog counted, only the windows held.
    const status = await t.request('GET', `/api/v1/messages/${backlog.at(-1)!.id}/status`, { token: org.ownerToken });
    assert.equal(
      status.body.waitingFor,
      'relay_offline',
      'a message counted in the store is known to wait for a relay',
    );
    await waitFor(async () => tenantStates(t).some((s) => s.queue.size === backlog.length), 15_000, 'backlog counted');
    const [state] = tenantStates(t);
    assert.ok(
      state!.queue.held <= lines.length * priorities.length * window,
      `memory holds the windows only (${state!.queue.held} of ${backlog.length})`,
    );

    // A relay that owns the number, taking 12 at a time (more than two windows); sends arrive as it drains, and its first send fails once.
    relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 12, phoneNumbers: [line] });
    await relay.connect();
    const arrivals: string[] = [];
    const arrive = async (i: number) => {
      const res = await t.request('POST', '/api/v1/messages', {
        token: org.ownerToken,
        body: { to: `+1415888${String(i).padStart(4, '0')}`, body: `arrival ${i}`, priority: priorities[i % 3] },
      });
      assert.equal(res.status, 201, res.text);
      arrivals.push(res.body.id as string);
    };
    const expected = backlog.length + 12;
    let reported = 0;
    let failed: string | undefined;
    const deadline = Date.now() + 120_000;
    while (relay.sends.length < expected + 1) {
      const fresh = relay.sends.slice(reported);
      reported += fresh.length;
      for (const send of fresh) {
        if (failed === undefined) {
          failed = send.messageId;
          await relay.report(send.messageId, 'failed', 'not this time', send.attempt);
        } else await relay.report(send.messageId, 'sent', undefined, send.attempt);
      }
      if (arrivals.length < 12 && reported >= 10 + arrivals.length * 5) await arrive(arrivals.length);
      assert.ok(Date.now() < deadline, `every message handed out: ${relay.sends.length} of ${expected + 1}`);
      await sleep(10);
    }
    await sleep(500);

    const handed = relay.sends.map((s) => `${s.messageId}#${s.attempt}`);
    assert.equal(new Set(handed).size, handed.length, 'no attempt handed out twice');
    assert.equal(relay.sends.length, expected + 1, 'each message once, and the failed one once more');
    const ids = new Set(relay.sends.map((s) => s.messageId));
    assert.deepEqual(ids, new Set([...backlog.map((m) => m.id), ...arrivals]), 'every message handed out');
    assert.equal(relay.sends.filter((s) => s.messageId === failed).length, 2, 'the failed send went back to the queue');

    // On each line, the backlog went out by priority, then age (the retry aside).
    const first = relay.sends.filter((s) => s.attempt === 1).map((s) => s.messageId);
    for (const fromNumber of lines) {
      const mine = backlog.filter((m) => m.fromNumber === fromNumber);
      const want = [...mine]
        .sort((a, b) => b.priority - a.priority || a.createdAt.localeCompare(b.createdAt))
        .map((m) => m.id)
        .filter((id) => id !== failed);
      const got = first.filter((id) => id !== failed && mine.some((m) => m.id === id));
      assert.deepEqual(got, want, `${lineKey(fromNumber)}: by priority, then age`);
    }
    await waitFor(async () => tenantStates(t).every((s) => s.queue.size === 0), 10_000, 'the queue empty');
  });
});

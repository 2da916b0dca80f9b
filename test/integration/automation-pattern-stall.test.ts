import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { relayProtocol } from '../../src/actors/relay/protocol.ts';
import { automationCollections } from '../../src/automations/automation-store.ts';
import { orgScope } from '../../src/automations/automation-store.ts';
import { actorClient } from '../../src/runtime/actor.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';

/**
 * No pattern holds the event loop: a 5 ms timer ticks (in this process,
 * which runs the whole service) while hostile patterns are saved, dry-run
 * and run on real inbound messages, and the CPU time the process spent
 * between two ticks is the longest the loop was held. CPU time, not wall
 * time: on a machine whose two cores run several test suites at once, a
 * 4 MB scavenge alone took 100 ms of wall time, the process waiting for a
 * core. A stalled loop was seconds (3.3 - 6.0 s for the first pattern below
 * on 1,000 characters). Wall time is printed beside it.
 */
const stallMs = 100;
const ourNumber = '+14155550000';

/** The patterns of the report: bounded repeats written out to 100,000 and 71,000 instructions. */
const reported = ['.{0,1000}'.repeat(50) + '!', '.{1000}'.repeat(71) + '$'];
/**
 * The worst found within the limit: a DFA with a new state per character
 * (`[ab]*a[ab]{n}$` on random a/b) and a live NFA thread per position
 * (`.{0,n}!` on a run of one letter), together just under 1,000 instructions.
 */
const worstAccepted = ['[ab]*a[ab]{400}$', '.{0,290}!'];

function randomAb(length: number, seed: number): string {
  let x = seed;
  return Array.from({ length }, () => (((x = (x * 1103515245 + 12345) & 0x7fffffff) >> 16) & 1 ? 'a' : 'b')).join('');
}

/** The most CPU time (and wall time) between two turns of the loop while `work` ran, in ms. */
async function worstLoopDelay<T>(work: () => Promise<T>): Promise<{ result: T; worstMs: number; worstWallMs: number }> {
  const cpuMs = () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1_000;
  };
  let worstMs = 0;
  let worstWallMs = 0;
  let cpu = cpuMs();
  let wall = performance.now();
  const tick = setInterval(() => {
    const [nowCpu, nowWall] = [cpuMs(), performance.now()];
    worstMs = Math.max(worstMs, nowCpu - cpu);
    worstWallMs = Math.max(worstWallMs, nowWall - wall);
    [cpu, wall] = [nowCpu, nowWall];
  }, 5);
  try {
    const result = await work();
    return { result, worstMs, worstWallMs };
  } finally {
    clearInterval(tick);
  }
}

eachBackend((backend) => {
  describe(`a pattern cannot stall the service (${backend})`, () => {
    let t: TestApp;
    let org: Org;
    let relay: StandInRelay;
    let row = 0;
    before(async () => {
      t = await startTestApp(backend);
      org = await signup(t, 'Patterns');
      relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 0, phoneNumbers: [ourNumber] });
      await relay.connect();
    });
    after(async () => {
      relay.close();
      await t.stop();
    });

    const call = (method: string, path: string, body?: unknown) =>
      t.request(method, `/api/v1${path}`, { token: org.ownerToken, body });
    const within = (what: string, held: { worstMs: number; worstWallMs: number }) => {
      console.log(
        `# ${backend}: ${what}: loop held ${held.worstMs.toFixed(0)} ms of CPU (${held.worstWallMs.toFixed(0)} ms of wall time)`,
      );
      assert.ok(held.worstMs < stallMs, `${what} held the loop ${held.worstMs.toFixed(0)} ms`);
    };
    const automation = async (patterns: string[]) => {
      const res = await call('POST', '/automations', {
        name: 'hostile',
        trigger: 'message_received',
        logic: 'or',
        conditions: patterns.map((value) => ({ field: 'body', operator: 'matches_regex', value })),
        actions: [{ type: 'create_contact', config: {} }],
      });
      return res;
    };
    /** A received message, as the gateway reports one. */
    const receive = async (from: string, body: string) => {
      row++;
      await actorClient(t.app.runtime, relayProtocol).send(relay.id, {
        kind: 'inbound',
        tenantId: org.orgId,
        session: relay.session,
        rowId: row,
        guid: `GUID-${org.orgId}-${row}`,
        from,
        isGroup: false,
        body,
        receivedAt: new Date().toISOString(),
      });
    };
    const executed = (id: string, count: number) =>
      until(`${count} executions of ${id}`, async () => {
        const res = await call('GET', `/automations/${id}/executions?limit=100`);
        return res.body.data.length >= count && res.body.data;
      });

    test('the reported patterns are refused at once with a 400 naming the field and why', async () => {
      for (const pattern of reported) {
        const { result: res, ...held } = await worstLoopDelay(() => automation([pattern]));
        assert.equal(res.status, 400, res.text.slice(0, 300));
        assert.equal(res.body.error, 'validation_error');
        assert.equal(res.body.details[0].path, '/conditions/0/value');
        assert.match(res.body.details[0].message, /compiles to \d+ instructions.*1000 together/);
        within(`saving ${pattern.slice(0, 20)}...`, held);
      }
    });

    test('the worst accepted patterns, dry-run and on real messages up to the longest body, hold the loop under 100 ms', async () => {
      const bodies = [randomAb(20_000, 7), `${'a'.repeat(19_999)}!`];
      const made = await Promise.all(Array.from({ length: 5 }, () => automation(worstAccepted)));
      for (const res of made) assert.equal(res.status, 201, res.text.slice(0, 300));
      const ids = made.map((res) => res.body.id as string);
      for (const body of [...bodies, randomAb(100_000, 11)]) {
        const { result: res, ...held } = await worstLoopDelay(() =>
          call('POST', `/automations/${ids[0]}/test`, { message: { body } }),
        );
        assert.equal(res.status, 200, res.text.slice(0, 300));
        within(`a dry run on ${body.length} characters`, held);
      }
      within(
        `${bodies.length} messages of 20,000 characters through ${ids.length} automations`,
        await worstLoopDelay(async () => {
          for (const [k, body] of bodies.entries()) await receive(`+1415555010${k}`, body);
          for (const id of ids) await executed(id, bodies.length);
        }),
      );
    });

    test('a pattern stored before the limit is not run: it does not match, the dry run says why, and nothing stalls', async () => {
      const res = await automation(['stop']);
      assert.equal(res.status, 201, res.text);
      const id = res.body.id as string;
      const { automations } = automationCollections(t.app.store);
      await automations.updateOne(
        orgScope(org.orgId),
        { id },
        { $set: { conditions: [{ field: 'body', operator: 'matches_regex', value: reported[0]! }] } },
      );
      const body = `${'a'.repeat(999)}!`;
      const { result: dry, ...held } = await worstLoopDelay(() =>
        call('POST', `/automations/${id}/test`, { message: { body } }),
      );
      assert.equal(dry.status, 200, dry.text.slice(0, 300));
      assert.equal(dry.body.matched, false);
      assert.match(dry.body.conditionsEvaluated[0].error, /^not run: the pattern compiles to \d+ instructions/);
      within('a dry run of a stored pattern over the limit', held);
      const inbound = await worstLoopDelay(async () => {
        await receive('+14155550109', body);
        return executed(id, 1);
      });
      assert.equal(inbound.result[0].matched, false);
      within('a message through a stored pattern over the limit', inbound);
    });
  });
});

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { storeWorkTotals, type StoreWorkTotals } from '../../src/store/store-work.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { apiKey, signup, startTestApp, type TestApp } from '../support/test-app.ts';
import { sleep, until } from '../support/until.ts';

/**
 * The work budget of docs/performance-budget.md, counted: statements, rows,
 * index entries, document bytes and JSON documents the embedded store spends
 * per accepted send (a batch of concurrent sends, and one send at a time) and
 * per status change of a delivered message. Counts only, never timings: a
 * change that spends more fails here until the budget (the table in that
 * document, read below) says so in the same commit.
 */

type Figure =
  | 'statements'
  | 'writes'
  | 'commits'
  | 'rows'
  | 'indexEntries'
  | 'storedBytes'
  | 'rewrittenBytes'
  | 'jsonEncodes'
  | 'jsonParses';
type Phase = 'sendBatch' | 'sendLone' | 'claim' | 'sent' | 'delivered' | 'read';
const phases: Phase[] = ['sendBatch', 'sendLone', 'claim', 'sent', 'delivered', 'read'];
const figureNames: Figure[] = [
  'statements',
  'writes',
  'commits',
  'rows',
  'indexEntries',
  'storedBytes',
  'rewrittenBytes',
  'jsonEncodes',
  'jsonParses',
];

/** The budget table of docs/performance-budget.md (under "## The budget"): a figure per row, a phase per column. */
function readBudget(): Record<Phase, Record<Figure, number>> {
  const doc = readFileSync(new URL('../../docs/performance-budget.md', import.meta.url), 'utf8');
  const section = doc.split(/^## /m).find((s) => s.startsWith('The budget\n'));
  assert.ok(section, 'docs/performance-budget.md has a "## The budget" section');
  const rows = section
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .map((line) =>
      line
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
  const [head, , ...body] = rows;
  assert.deepEqual(head, ['figure', ...phases], 'the budget table names every phase, in order');
  assert.deepEqual(
    body.map((r) => r[0]),
    figureNames,
    'the budget table names every figure, in order',
  );
  const budget = Object.fromEntries(phases.map((p) => [p, {}])) as Record<Phase, Record<Figure, number>>;
  for (const row of body)
    phases.forEach((phase, i) => {
      const limit = Number(row[i + 1]!.replace(/,/g, ''));
      assert.ok(Number.isFinite(limit), `budget ${phase}.${row[0]} is a number: ${row[i + 1]}`);
      budget[phase][row[0] as Figure] = limit;
    });
  return budget;
}

const batchSends = 300;
const loneSends = 30;
/** 25 characters: the body the budget's byte figures are for. */
const body = 'Your code is 123456. Bye!';
const to = '+14155550100';

const sum = (record: Record<string, number>, keep: (key: string) => boolean = () => true) =>
  Object.entries(record).reduce((s, [k, n]) => (keep(k) ? s + n : s), 0);

function difference(after: StoreWorkTotals, before: StoreWorkTotals): StoreWorkTotals {
  const minus = (a: Record<string, number>, b: Record<string, number>) =>
    Object.fromEntries(
      Object.entries(a)
        .map(([k, n]) => [k, n - (b[k] ?? 0)] as const)
        .filter(([, n]) => n !== 0),
    );
  return {
    statements: minus(after.statements, before.statements),
    rows: minus(after.rows, before.rows),
    indexEntries: minus(after.indexEntries, before.indexEntries),
    docBytes: minus(after.docBytes, before.docBytes),
    jsonEncodes: after.jsonEncodes - before.jsonEncodes,
    jsonParses: after.jsonParses - before.jsonParses,
  };
}

/** The budget's figures of `work`, per message. */
function perMessage(work: StoreWorkTotals, messages: number): Record<Figure, number> {
  const per = (n: number) => Math.round((n / messages) * 100) / 100;
  return {
    statements: per(sum(work.statements)),
    writes: per(sum(work.statements, (k) => /^(insert|update|delete) /.test(k))),
    commits: per(work.statements['commit *'] ?? 0),
    rows: per(sum(work.rows)),
    indexEntries: per(sum(work.indexEntries)),
    storedBytes: per(sum(work.docBytes, (k) => k.startsWith('insert '))),
    rewrittenBytes: per(sum(work.docBytes, (k) => k.startsWith('update '))),
    jsonEncodes: per(work.jsonEncodes),
    jsonParses: per(work.jsonParses),
  };
}

/** Waits until the store has run no statement for 600 ms: the background work of what came before is done. */
async function quiet(): Promise<void> {
  let last = -1;
  await until(
    'the store to go quiet',
    async () => {
      const now = sum(storeWorkTotals().statements);
      if (now === last) return true;
      last = now;
      await sleep(600);
      return false;
    },
    60_000,
  );
}

/** The store's work from `start` until `done` holds and the store is quiet again. */
async function measure(
  start: () => Promise<unknown>,
  done: (work: StoreWorkTotals) => boolean,
): Promise<StoreWorkTotals> {
  await quiet();
  const before = storeWorkTotals();
  await start();
  await until('the phase to finish', async () => done(difference(storeWorkTotals(), before)), 60_000);
  await quiet();
  return difference(storeWorkTotals(), before);
}

const rowsOf = (table: string) => (work: StoreWorkTotals) => work.rows[table] ?? 0;

test('the embedded store spends within docs/performance-budget.md per accepted send and per status change', async () => {
  // Timers that would read the store in the middle of a phase wait for minutes.
  const t: TestApp = await startTestApp('embedded', {
    CREDENTIAL_CACHE_MS: '600000',
    TENANT_SWEEP_MS: '600000',
    WEBHOOK_SWEEP_MS: '600000',
    MESSAGE_SEND_TIMEOUT_MS: '600000',
  });
  const relay = { current: undefined as StandInRelay | undefined };
  try {
    const org = await signup(t);
    const key = await apiKey(t, org, 'member');
    const send = async () => {
      const res = await t.request('POST', '/api/v1/messages', { token: key, body: { to, body } });
      assert.equal(res.status, 201, res.text);
      return res.body.id as string;
    };
    // Credentials cached, the conversation stored, the tenant actor awake.
    for (let i = 0; i < 2; i++) await send();

    const measured: Partial<Record<Phase, StoreWorkTotals>> = {};
    const counts: Partial<Record<Phase, number>> = {};
    measured.sendBatch = await measure(
      () => Promise.all(Array.from({ length: batchSends }, send)),
      (w) => rowsOf('messages')(w) >= batchSends,
    );
    counts.sendBatch = batchSends;
    measured.sendLone = await measure(
      async () => {
        for (let i = 0; i < loneSends; i++) await send();
      },
      (w) => rowsOf('messages')(w) >= loneSends,
    );
    counts.sendLone = loneSends;

    const all = batchSends + loneSends + 2;
    const stand = (relay.current = new StandInRelay(t, org.orgId, org.teamId, { capacity: all }));
    measured.claim = await measure(
      () => stand.connect(),
      () => stand.sends.length >= all,
    );
    counts.claim = all;
    const ids = [...new Set(stand.sends.map((s) => s.messageId))];
    assert.equal(ids.length, all, 'every message handed to the relay once');
    for (const status of ['sent', 'delivered', 'read'] as const) {
      measured[status] = await measure(
        () => Promise.all(ids.map((id) => stand.report(id, status))),
        (w) => rowsOf('messages')(w) >= all,
      );
      counts[status] = all;
    }

    const over: string[] = [];
    const budget = readBudget();
    for (const phase of phases) {
      const work = measured[phase]!;
      const figures = perMessage(work, counts[phase]!);
      console.log(`# ${phase} per message (${counts[phase]}): ${JSON.stringify(figures)}`);
      console.log(`#   statements ${JSON.stringify(work.statements)}`);
      console.log(`#   rows ${JSON.stringify(work.rows)} index entries ${JSON.stringify(work.indexEntries)}`);
      console.log(`#   document bytes ${JSON.stringify(work.docBytes)}`);
      for (const [figure, limit] of Object.entries(budget[phase]) as Array<[Figure, number]>)
        if (figures[figure] > limit) over.push(`${phase}.${figure}: ${figures[figure]} > ${limit}`);
    }
    assert.deepEqual(over, [], 'over the budget in docs/performance-budget.md');

    // The same counts on /metrics, for a bench to read from a running service.
    const metrics = (await t.request('GET', '/metrics')).text;
    const inserts = /^relaybox_store_statements_total\{verb="insert",table="messages"\} (\d+)$/m.exec(metrics);
    assert.equal(Number(inserts?.[1]), storeWorkTotals().statements['insert messages']);
  } finally {
    relay.current?.close();
    await t.stop();
  }
});

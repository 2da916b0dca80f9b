import assert from 'node:assert/strict';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';
import { startTestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';

/** A data directory written by the store that kept GET /api/v1/events in a log of its own (`make-event-log-store.ts`). */
const fixture = join(import.meta.dirname, '../fixtures/event-log-store');

/** The app on a copy of a fixture's data directory, what the API answered then, and its event listing. */
async function openFixture(t: TestContext, fixture: string) {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-fixture-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await cp(join(fixture, 'store.sqlite'), join(dir, 'store.sqlite'));
  const before = livemodeAdded(JSON.parse(await readFile(join(fixture, 'answers.json'), 'utf8')));
  const app = await startTestApp('embedded', { DATA_DIR: dir });
  const running = { stopped: false };
  t.after(() => (running.stopped ? undefined : app.stop()));
  const events = (query = '') => app.request('GET', `/api/v1/events${query}`, { token: before.key });
  const stop = async () => {
    await app.stop();
    running.stopped = true;
  };
  return { dir, before, app, events, stop };
}

/** The answers recorded before events said `livemode`: the same, each event of the (live) data saying `livemode: true`. */
function livemodeAdded(answers: Record<string, any>): Record<string, any> {
  for (const answer of Object.values(answers))
    for (const e of Array.isArray(answer?.data) ? answer.data : []) if (e.event) e.livemode = true;
  return answers;
}

test('a data directory of the store with a separate event log opens, lists its events as it did, and keeps sending', async (t) => {
  const { dir, before, app, events, stop } = await openFixture(t, fixture);

  // Every event as answered before, cursors included: those the stream had let go too.
  const listed = await events();
  assert.equal(listed.status, 200);
  assert.deepEqual(listed.body, before.list);
  assert.deepEqual((await events(`?after=${before.list.data.at(-1).cursor}`)).body, before.after);

  const sent = await app.request('POST', '/api/v1/messages', {
    token: before.key,
    body: { to: '+14155550100', body: 'after' },
  });
  assert.equal(sent.status, 201);
  const newest = await until('the new event listed', async () => {
    const page = (await events()).body;
    return page.pagination.total === before.list.pagination.total + 1 && page.data[0];
  });
  assert.equal(newest.data.id, sent.body.id);
  assert.equal(newest.data.body, 'after');
  // The new event comes after every old one, in the order a catching-up reader follows.
  const caughtUp = (await events(`?after=${before.list.data[0].cursor}`)).body.data;
  assert.deepEqual(
    caughtUp.map((e: { id: string }) => e.id),
    [newest.id],
  );
  await stop();

  // The log's table is gone: its events are the stream's rows.
  const store = new EmbeddedStore(dir);
  t.after(() => store.close());
  assert.equal(store.first(`SELECT 1 AS found FROM sqlite_master WHERE name = 'org_events'`), null);
});

/** A data directory written while every event, message.queued included, was a row of `events` (`make-slim-event-store.ts`). */
const slimFixture = join(import.meta.dirname, '../fixtures/slim-event-store');

test('a data directory whose message.queued events are rows opens, lists every event once as before, and new sends carry theirs', async (t) => {
  const { dir, before, app, events, stop } = await openFixture(t, slimFixture);

  // As answered before: the whole list, a page after the oldest cursor, and a page of one type.
  assert.deepEqual((await events()).body, before.list);
  assert.deepEqual((await events(`?after=${before.list.data.at(-1).cursor}&limit=3`)).body, before.after);
  assert.deepEqual((await events('?type=message.queued&limit=2&page=2')).body, before.queued);

  const sent: string[] = [];
  for (const body of ['after 1', 'after 2']) {
    const res = await app.request('POST', '/api/v1/messages', {
      token: before.key,
      body: { to: '+14155550100', body },
    });
    assert.equal(res.status, 201);
    sent.push(res.body.id);
  }
  const total = before.list.pagination.total + 2;
  const listed = await until('the new events listed', async () => {
    const page = (await events('?limit=100')).body;
    return page.pagination.total === total && page;
  });
  // Each message's message.queued exactly once, the old ones (rows) and the new ones (carried by their messages) alike, newest first.
  const queued = listed.data.filter((e: { event: string }) => e.event === 'message.queued');
  assert.deepEqual(
    queued.map((e: { data: { id: string } }) => e.data.id),
    [...before.sent, ...sent].reverse(),
  );
  assert.equal(new Set(listed.data.map((e: { id: string }) => e.id)).size, total);
  assert.deepEqual(listed.data.slice(2), before.list.data);
  assert.equal(listed.data[0].data.body, 'after 2');
  assert.equal(listed.data[0].data.status, 'queued');
  // A reader catching up from the newest old event gets the new ones, oldest first; by type too.
  const newest = before.list.data[0].cursor;
  assert.deepEqual(
    (await events(`?after=${newest}`)).body.data.map((e: { data: { id: string } }) => e.data.id),
    sent,
  );
  const typed = (await events('?type=message.queued&limit=100')).body;
  assert.equal(typed.pagination.total, before.sent.length + sent.length);
  assert.deepEqual(typed.data, queued);
  assert.equal((await events('?type=message.sent')).body.pagination.total, 1);

  // The new events are not rows: the messages carry them.
  const store = app.app.store as EmbeddedStore;
  const rows = store.first(
    `SELECT count(*) AS n FROM events WHERE json_extract(CAST(doc AS TEXT), '$.event.event') = 'message.queued'`,
  );
  assert.equal(rows?.n, before.sent.length + 1, 'the old message.queued rows (both organizations), none new');

  // After a restart, the same.
  await stop();
  const again = await startTestApp('embedded', { DATA_DIR: dir });
  t.after(() => again.stop());
  assert.deepEqual((await again.request('GET', '/api/v1/events?limit=100', { token: before.key })).body, listed);
});

import assert from 'node:assert/strict';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';
import { startTestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';

/** A data directory written by the store that kept GET /api/v1/events in a log of its own (`make-event-log-store.ts`). */
const fixture = join(import.meta.dirname, '../fixtures/event-log-store');

test('a data directory of the store with a separate event log opens, lists its events as it did, and keeps sending', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-event-log-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await cp(join(fixture, 'store.sqlite'), join(dir, 'store.sqlite'));
  const before = JSON.parse(await readFile(join(fixture, 'answers.json'), 'utf8'));

  const app = await startTestApp('embedded', { DATA_DIR: dir });
  let stopped = false;
  t.after(() => (stopped ? undefined : app.stop()));
  const events = (query = '') => app.request('GET', `/api/v1/events${query}`, { token: before.key });

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
  await app.stop();
  stopped = true;

  // The log's table is gone: its events are the stream's rows.
  const store = new EmbeddedStore(dir);
  t.after(() => store.close());
  assert.equal(store.first(`SELECT 1 AS found FROM sqlite_master WHERE name = 'org_events'`), null);
});

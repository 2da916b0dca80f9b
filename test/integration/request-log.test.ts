import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, mock, test } from 'node:test';
import { createLogger } from '../../src/log.ts';
import { requestChunkCollection, RequestRecorder, type RequestChunkDoc } from '../../src/request-log/index.ts';
import { requestLogRetentionMs, type RequestEntry } from '../../src/request-log/request-chunks.ts';
import { readRequestLog } from '../../src/request-log/request-reader.ts';
import type { Collection } from '../../src/store/collection.ts';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';

const day = 86_400_000;
const silent = createLogger('silent');

/** An entry as a frontend would record it, at `at`. */
const entry = (at: number, requestId: string, over: Partial<RequestEntry> = {}): RequestEntry => ({
  at,
  method: 'GET',
  route: '/api/v1/messages/:id',
  path: `/api/v1/messages/msg_${requestId}`,
  status: 200,
  keyId: null,
  requestId,
  durationMs: 1.5,
  error: null,
  ...over,
});

eachBackend((backend) => {
  describe(`request log (${backend})`, () => {
    let t: TestApp;
    let org: Org;
    let key: { id: string; key: string };
    let chunks: Collection<RequestChunkDoc>;

    const log = (query: string, token = org.ownerToken) => t.request('GET', `/api/v1/request-log${query}`, { token });
    /** The entries a query lists once `count` of them are there (they are written within about a second). */
    const listed = (query: string, count: number) =>
      until(
        `${count} entries for ${query}`,
        async () => {
          const res = await log(query);
          assert.equal(res.status, 200, res.text);
          return res.body.data.length >= count ? (res.body.data as any[]) : undefined;
        },
        10_000,
      );

    before(async () => {
      t = await startTestApp(backend);
      org = await signup(t, 'Logged');
      const res = await t.request('POST', '/api/v1/api-keys', {
        token: org.ownerToken,
        body: { name: 'server', role: 'member' },
      });
      assert.equal(res.status, 201, res.text);
      key = { id: res.body.id, key: res.body.key };
      chunks = requestChunkCollection(t.app.store);
    });
    after(() => t.stop());

    test('lists a request by its request id, within about a second: method, route, path, status, key, duration, error', async () => {
      const requestId = `probe-${randomUUID()}`;
      const sent = await t.request('POST', '/api/v1/messages', {
        token: key.key,
        headers: { 'x-request-id': requestId },
        body: { to: '+14155550100', body: 'hello' },
      });
      assert.equal(sent.status, 201);
      const answeredAt = Date.now();
      const [found] = await listed(`?requestId=${requestId}`, 1);
      assert.ok(Date.now() - answeredAt < 3000, `listed ${Date.now() - answeredAt} ms after its answer`);
      assert.deepEqual(Object.keys(found).sort(), [
        'at',
        'durationMs',
        'error',
        'id',
        'keyId',
        'method',
        'path',
        'requestId',
        'route',
        'status',
      ]);
      assert.equal(found.requestId, requestId);
      assert.equal(found.method, 'POST');
      assert.equal(found.route, '/api/v1/messages');
      assert.equal(found.path, '/api/v1/messages');
      assert.equal(found.status, 201);
      assert.equal(found.keyId, key.id);
      assert.equal(found.error, null);
      assert.ok(found.durationMs > 0 && found.durationMs < 10_000, `durationMs ${found.durationMs}`);
      assert.ok(Math.abs(Date.parse(found.at) - answeredAt) < 10_000);

      // An error answer: its code; paths without their query string; a user's token has no key id.
      const badId = `bad-${randomUUID()}`;
      const bad = await t.request('GET', '/api/v1/messages?secret=hunter2&limit=0', {
        token: org.ownerToken,
        headers: { 'x-request-id': badId },
      });
      assert.equal(bad.status, 400);
      const [refused] = await listed(`?requestId=${badId}`, 1);
      assert.equal(refused.path, '/api/v1/messages');
      assert.equal(refused.status, 400);
      assert.equal(refused.error, 'validation_error');
      assert.equal(refused.keyId, null);
      const readId = `read-${randomUUID()}`;
      const read = await t.request('GET', `/api/v1/messages/${sent.body.id}?token=hunter2`, {
        token: org.ownerToken,
        headers: { 'x-request-id': readId },
      });
      assert.equal(read.status, 200);
      const [one] = await listed(`?requestId=${readId}`, 1);
      assert.equal(one.route, '/api/v1/messages/:id');
      assert.equal(one.path, `/api/v1/messages/${sent.body.id}`);
      assert.doesNotMatch(JSON.stringify(await chunks.find({ tenantId: org.orgId }, {})), /hunter2|hello/);
    });

    test('filters: status and status class, method, path prefix, key id, since and until; every role reads', async () => {
      const mark = randomUUID().slice(0, 8);
      const since = new Date().toISOString();
      for (let i = 0; i < 3; i++)
        assert.equal((await t.request('GET', `/api/v1/messages/msg_${mark}${i}`, { token: key.key })).status, 404);
      // A request refused before its organization is known is in no organization's log.
      const unknown = await t.request('GET', '/api/v1/messages', {
        token: 'rbx_live_not_a_key',
        headers: { 'x-request-id': `anon-${mark}` },
      });
      assert.equal(unknown.status, 401);
      const ok = await t.request('GET', '/api/v1/messages', {
        token: key.key,
        headers: { 'x-request-id': `ok-${mark}` },
      });
      assert.equal(ok.status, 200);
      const path = encodeURIComponent(`/api/v1/messages/msg_${mark}`);
      const missing = await listed(`?path=${path}`, 3);
      assert.equal(missing.length, 3);
      assert.ok(missing.every((e) => e.status === 404 && e.error === 'not_found' && e.keyId === key.id));
      assert.deepEqual(
        missing.map((e) => e.path),
        [2, 1, 0].map((i) => `/api/v1/messages/msg_${mark}${i}`),
        'newest first',
      );
      assert.equal((await listed(`?path=${path}&status=4xx`, 3)).length, 3);
      assert.equal((await listed(`?path=${path}&status=404`, 3)).length, 3);
      assert.equal((await log(`?path=${path}&status=5xx`)).body.data.length, 0);
      assert.equal((await log(`?path=${path}&status=200`)).body.data.length, 0);
      assert.equal((await log(`?path=${path}&method=POST`)).body.data.length, 0);
      assert.equal((await log(`?path=${path}&method=GET`)).body.data.length, 3);
      assert.equal((await log(`?path=${path}&keyId=key_other`)).body.data.length, 0);
      assert.equal((await log(`?path=${path}&keyId=${key.id}`)).body.data.length, 3);
      assert.equal((await log(`?path=${path}&since=${since}`)).body.data.length, 3);
      assert.equal((await log(`?path=${path}&until=${since}`)).body.data.length, 0);
      const [okEntry] = await listed(`?requestId=ok-${mark}&status=2xx&method=GET`, 1);
      assert.equal(okEntry.path, '/api/v1/messages');
      assert.deepEqual((await log(`?requestId=anon-${mark}`)).body.data, []);

      const viewer = await apiKey(t, org, 'viewer');
      assert.equal((await log(`?path=${path}`, viewer)).body.data.length, 3);
      const other = await signup(t, 'Elsewhere');
      assert.deepEqual((await log(`?path=${path}`, other.ownerToken)).body.data, []);
      assert.deepEqual((await log(`?requestId=ok-${mark}`, other.ownerToken)).body.data, []);
    });

    test('pages by cursor, newest first, with a Link to the next page; bad input is a 400', async () => {
      const mark = randomUUID().slice(0, 8);
      for (let i = 0; i < 5; i++) await t.request('GET', `/api/v1/messages/msg_${mark}${i}`, { token: key.key });
      const path = encodeURIComponent(`/api/v1/messages/msg_${mark}`);
      await listed(`?path=${path}`, 5);
      const seen: string[] = [];
      let query = `?path=${path}&limit=2`;
      for (let pages = 0; ; pages++) {
        assert.ok(pages < 5);
        const res = await log(query);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.body.pagination, { page: null, limit: 2, total: null, totalPages: null });
        seen.push(...res.body.data.map((e: any) => e.path));
        if (!res.body.nextCursor) {
          assert.equal(res.headers.get('link'), null);
          break;
        }
        assert.match(res.headers.get('link')!, /^<\/api\/v1\/request-log\?.*after=.*>; rel="next"$/);
        query = `?path=${path}&limit=2&after=${res.body.nextCursor}`;
      }
      assert.deepEqual(
        seen,
        [4, 3, 2, 1, 0].map((i) => `/api/v1/messages/msg_${mark}${i}`),
      );

      const first = (await log(`?path=${path}&limit=2`)).body;
      const other = await signup(t, 'Other');
      assert.equal((await log(`?after=${first.nextCursor}`, other.ownerToken)).status, 400);
      for (const bad of ['status=4x', 'status=600', 'method=HEAD', 'path=nope', 'since=yesterday', 'page=2', 'x=1']) {
        const res = await log(`?${bad}`);
        assert.equal(res.status, 400, `${bad}: ${res.text}`);
        assert.equal(res.body.error, 'validation_error');
      }
    });

    test("several processes' chunks are read as one log, merged in time order", async () => {
      const tenantId = `org_${randomUUID()}`;
      let now = Date.parse('2030-01-01T09:00:00Z');
      const clock = () => now;
      const a = new RequestRecorder(chunks, { maxEntries: 100_000, now: clock }, silent);
      const b = new RequestRecorder(chunks, { maxEntries: 100_000, now: clock }, silent);
      try {
        const start = now;
        // Two frontends answer alternately and write a chunk each every round: 24 chunks that overlap in time,
        // more than one read of the store takes.
        for (let round = 0; round < 12; round++) {
          for (let k = 0; k < 4; k++) {
            const i = round * 4 + k;
            (k % 2 ? a : b).record(tenantId, entry(start + i * 10, `r${i}`));
          }
          if (round === 5) {
            a.record(tenantId, entry(start + 215, 'tie-a'));
            b.record(tenantId, entry(start + 215, 'tie-b'));
          }
          await Promise.all([a.flush(), b.flush()]);
        }
        now += 1000;
        assert.equal((await chunks.find({ tenantId }, {})).length, 24, 'a chunk from each process each round');

        const all = (await readRequestLog(chunks, tenantId, { limit: 100 }, now)).data;
        const expected = all.map((e) => e.requestId);
        assert.equal(new Set(expected).size, 50);
        const ats = all.map((e) => Date.parse(e.at));
        assert.deepEqual(
          ats,
          [...ats].sort((x, y) => y - x),
          'newest first',
        );
        assert.deepEqual(expected.slice(0, 2), ['r47', 'r46']);
        assert.deepEqual(expected.slice(-2), ['r1', 'r0']);

        // Page by page, with a page size that cuts through chunks and through the tie, nothing is lost or shown twice.
        for (const limit of [1, 2, 3, 5]) {
          const paged: string[] = [];
          let keys: Array<string | number> | undefined;
          for (;;) {
            const page = await readRequestLog(chunks, tenantId, { limit, after: keys }, now);
            paged.push(...page.data.map((e) => e.requestId));
            if (!page.next) break;
            keys = page.next;
          }
          assert.deepEqual(paged, expected, `limit ${limit}`);
        }
        const byId = await readRequestLog(chunks, tenantId, { limit: 10, requestId: 'r7' }, now);
        assert.deepEqual(
          byId.data.map((e) => e.requestId),
          ['r7'],
        );
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });

    test('retention: an entry is listed for 7 days, then hidden, and the sweep deletes it (faked clock)', async () => {
      const tenantId = `org_${randomUUID()}`;
      const start = Date.parse('2030-01-01T09:00:00Z');
      let now = start;
      const recorder = new RequestRecorder(chunks, { maxEntries: 100_000, now: () => now }, silent);
      try {
        recorder.record(tenantId, entry(now, 'old'));
        await recorder.flush();
        now = start + 3 * day;
        recorder.record(tenantId, entry(now, 'newer'));
        await recorder.flush();
        const ids = async () =>
          (await readRequestLog(chunks, tenantId, { limit: 10 }, now)).data.map((e) => e.requestId);

        now = start + requestLogRetentionMs - 60_000;
        assert.deepEqual(await ids(), ['newer', 'old']);
        await recorder.sweep();
        assert.equal(await chunks.count({ tenantId }, {}), 2, 'nothing deleted before 7 days');

        now = start + requestLogRetentionMs + 1;
        assert.deepEqual(await ids(), ['newer'], 'hidden once 7 days old, before any sweep');
        assert.equal(await chunks.count({ tenantId }, {}), 2);
        await recorder.sweep();
        assert.equal(await chunks.count({ tenantId }, {}), 1, 'the sweep deleted the old chunk');

        // 30, 60 and 90 days on, the sweep leaves nothing and forgets the organization.
        for (const days of [30, 60, 90]) {
          now = start + days * day;
          await recorder.sweep();
          assert.deepEqual(await ids(), []);
          assert.equal(await chunks.count({ tenantId }, {}), 0);
        }
      } finally {
        await recorder.close();
      }
    });

    test("a quiet organization's entries go within an hour of turning 7 days old: the hourly sweep (faked timers)", async () => {
      const tenantId = `org_${randomUUID()}`;
      const start = Date.parse('2030-01-01T09:00:00Z');
      mock.timers.enable({ apis: ['setInterval', 'Date'], now: start });
      const recorder = new RequestRecorder(chunks, { maxEntries: 100_000 }, silent);
      try {
        recorder.record(tenantId, entry(Date.now(), 'quiet'));
        await recorder.flush();
        // No request after it: only the sweep's timer, every hour, is left to delete it.
        for (let hour = 1; hour < 7 * 24; hour++) {
          mock.timers.tick(3_600_000);
          await recorder.sweeping();
        }
        assert.equal(await chunks.count({ tenantId }, {}), 1, 'kept 7 days');
        mock.timers.tick(2 * 3_600_000);
        await recorder.sweeping();
        assert.equal(await chunks.count({ tenantId }, {}), 0, 'deleted within the hour after');
      } finally {
        mock.timers.reset();
        await recorder.close();
      }
    });

    test('an organization keeps at most maxEntries: its oldest chunks are deleted first', async () => {
      const tenantId = `org_${randomUUID()}`;
      let now = Date.parse('2030-01-01T09:00:00Z');
      const recorder = new RequestRecorder(chunks, { maxEntries: 1000, now: () => now }, silent);
      try {
        // 500 entries make a chunk at once; four of them are 2,000 entries, twice the cap.
        for (let i = 0; i < 2000; i++) recorder.record(tenantId, entry(now + i, `c${i}`));
        await recorder.flush();
        now += 5000;
        await recorder.prune(tenantId);
        const kept = await chunks.find({ tenantId }, {});
        assert.equal(
          kept.reduce((n, c) => n + c.count, 0),
          1000,
        );
        const page = await readRequestLog(chunks, tenantId, { limit: 1, requestId: 'c999' }, now);
        assert.deepEqual(page.data, [], 'the oldest went first');
        const newest = await readRequestLog(chunks, tenantId, { limit: 1 }, now);
        assert.equal(newest.data[0]!.requestId, 'c1999');
      } finally {
        await recorder.close();
      }
    });
  });
});

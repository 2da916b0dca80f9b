import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { EmbeddedStore, storeFile } from '../../src/store/embedded-store.ts';
import { signup, startTestApp } from '../support/test-app.ts';

/**
 * 40,000 sends: bulk jobs of 1,000 (each a send through the same queue and
 * store writes as a single one, about ten times faster to make than 40,000
 * requests) and a single send between two jobs. They write 100 to 170 MiB of
 * log (26,000 to 42,000 pages folded back in three runs of 2026-12-07), so
 * the checkpoint worker runs several rounds, and a log no checkpoint folded
 * back would pass the bound twice over.
 */
const jobs = 40;
const perJob = 1_000;
/**
 * Three times the 16 MiB at which the checkpoint worker starts a round: the
 * log grows while a round folds it back, by what the sends commit meanwhile
 * (to 25 to 34 MiB on the 2-core test machine under these writes, about
 * 19 MB of log a second).
 */
const walMaxMb = 48;

test(`the embedded store's write-ahead log stays under STORE_WAL_MAX_MB while /metrics is scraped every 50 ms during ${jobs * perJob} sends`, async () => {
  const logLines: string[] = [];
  const t = await startTestApp('embedded', { STORE_WAL_MAX_MB: String(walMaxMb) }, { logLines });
  try {
    const org = await signup(t, 'Scraped');
    const wal = join(t.config.dataDir, `${storeFile}-wal`);
    let maxWalBytes = 0;
    let scrapes = 0;
    const sample = () => (maxWalBytes = Math.max(maxWalBytes, statSync(wal, { throwIfNoEntry: false })?.size ?? 0));
    let sending = true;
    const scraper = (async () => {
      while (sending) {
        const res = await t.request('GET', '/metrics');
        assert.equal(res.status, 200);
        assert.match(res.text, /relaybox_bulk_jobs\{status=/, 'the scrape counts bulk jobs in the store');
        scrapes++;
        sample();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    const started = Date.now();
    const stored = () => t.app.store.collection('messages').count({ tenantId: org.orgId }, {});
    try {
      for (let j = 0; j < jobs; j++) {
        const messages = Array.from({ length: perJob - 1 }, (_, i) => ({
          to: `+1415555${String(i).padStart(4, '0')}`,
          body: `job ${j} message ${i}`,
        }));
        const job = await t.request('POST', '/api/v1/messages/bulk', { token: org.ownerToken, body: { messages } });
        assert.equal(job.status, 201, job.text);
        const single = await t.request('POST', '/api/v1/messages', {
          token: org.ownerToken,
          body: { to: '+14155550100', body: `single ${j}` },
        });
        assert.equal(single.status, 201, single.text);
        sample();
      }
      while ((await stored()) < jobs * perJob) {
        sample();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      sending = false;
      await scraper;
    }
    sample();
    const walMiB = maxWalBytes / 2 ** 20;
    console.log(
      `# ${jobs * perJob} sends stored in ${Date.now() - started} ms, ${scrapes} scrapes; largest write-ahead log seen ${walMiB.toFixed(1)} MiB (bound ${walMaxMb} MiB)`,
    );
    // Scraped throughout: a scrape reads the store while the sends are written (about 100 ms each under this load).
    assert.ok(scrapes >= 5, `scraped ${scrapes} times`);
    assert.ok(maxWalBytes < walMaxMb * 2 ** 20, `the log reached ${walMiB.toFixed(1)} MiB`);
    // The bound holds by the automatic checkpoint alone: the store never had to step in (a read left open, or a log
    // that passed the bound and was folded back at once: counted below).
    assert.deepEqual(
      logLines.filter((line) => line.includes('write-ahead log')),
      [],
    );
    // The worker thread folds the log back; the event loop only the pages committed during each of its rounds: a
    // share that moves with how much the sends commit meanwhile (12 to 26 % of the worker's in twelve runs on the
    // 2-core test machine, idle or beside two busy processes; 27 % in a CI run of a smaller version of this test,
    // whose one round left a long tail). A round taken as the worker's that it did not complete would have the
    // event loop fold back the whole log (a share above 100 %).
    const folded = (t.app.store as EmbeddedStore).walFolded;
    console.log(
      `# log pages folded back by the worker ${folded.worker}, by the event loop ${folded.eventLoop}, at the bound ${folded.bound}`,
    );
    assert.ok(folded.worker > 0, 'the worker folded the log back');
    assert.equal(folded.bound, 0, 'the log never passed its bound: the store never folded it all back at once');
    assert.ok(
      folded.eventLoop * 2 < folded.worker,
      `the event loop folded back ${folded.eventLoop} pages, the worker ${folded.worker}`,
    );
    assert.match(
      (await t.request('GET', '/metrics')).text,
      /relaybox_store_wal_frames_checkpointed_total\{by="worker"\} [1-9]/,
    );
  } finally {
    await t.stop();
  }
});

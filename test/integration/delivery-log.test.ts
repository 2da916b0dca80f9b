import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DeliveryLog } from '../../src/webhooks/delivery-log.ts';
import type { DeliveryDoc } from '../../src/webhooks/webhook-store.ts';
import { eachBackend, startTestApp, type TestApp } from '../support/test-app.ts';

eachBackend((backend) => {
  describe(`delivery log group commit (${backend})`, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(backend);
    });
    after(() => t.stop());

    const pending = (orgId: string, n: number, attempts = 0): DeliveryDoc => ({
      id: `whd_${orgId}_${n}`,
      tenantId: orgId,
      webhookId: `whk_${orgId}`,
      event: 'message.queued',
      eventId: `evt_${orgId}_${n}`,
      status: 'pending',
      attempts,
      responseStatus: null,
      lastError: 'before',
      nextAttemptAt: new Date().toISOString(),
      payload: '{}',
      createdAt: new Date().toISOString(),
      updatedAt: new Date().toISOString(),
    });

    test('successes reported side by side are each recorded once, in their own organization, by their own compare-and-set', async () => {
      const deliveries = t.app.store.collection<DeliveryDoc>('webhook_deliveries');
      const log = new DeliveryLog(deliveries);
      const orgA = `org_log_a_${backend.replace('+', '_')}`;
      const orgB = `org_log_b_${backend.replace('+', '_')}`;
      const a = Array.from({ length: 700 }, (_, i) => pending(orgA, i));
      const b = [pending(orgB, 0, 2), pending(orgB, 1)];
      await deliveries.insertMany({ tenantId: orgA }, a);
      await deliveries.insertMany({ tenantId: orgB }, b);
      // One of B's was settled already by another attempt: reporting it again changes nothing.
      await deliveries.updateOne(
        { tenantId: orgB },
        { id: b[1]!.id },
        { $set: { status: 'failed' }, $inc: { attempts: 1 } },
      );

      await Promise.all([
        ...a.map((d, i) => log.succeeded(d, i % 2 === 0 ? 200 : 204)),
        // The same attempt reported twice (a duplicate attempt after a takeover): recorded once.
        ...a.slice(0, 50).map((d, i) => log.succeeded(d, i % 2 === 0 ? 200 : 204)),
        ...b.map((d) => log.succeeded(d, 202)),
      ]);

      const storedA = await deliveries.find({ tenantId: orgA }, {}, { limit: 1_000 });
      assert.equal(storedA.length, 700);
      for (const d of storedA) {
        const i = Number(d.id.split('_').at(-1));
        assert.deepEqual(
          [d.status, d.attempts, d.responseStatus, d.lastError, d.nextAttemptAt],
          ['succeeded', 1, i % 2 === 0 ? 200 : 204, null, null],
          d.id,
        );
      }
      const storedB = new Map((await deliveries.find({ tenantId: orgB }, {})).map((d) => [d.id, d]));
      assert.deepEqual(
        [storedB.get(b[0]!.id)?.status, storedB.get(b[0]!.id)?.attempts, storedB.get(b[0]!.id)?.responseStatus],
        ['succeeded', 3, 202],
      );
      assert.deepEqual(
        [storedB.get(b[1]!.id)?.status, storedB.get(b[1]!.id)?.attempts],
        ['failed', 1],
        'settled by another attempt: left as it was',
      );
    });

    test('a clean stop waits for the last batch: every success reported before it is stored', async () => {
      const deliveries = t.app.store.collection<DeliveryDoc>('webhook_deliveries');
      const log = new DeliveryLog(deliveries);
      const org = `org_log_stop_${backend.replace('+', '_')}`;
      const docs = Array.from({ length: 300 }, (_, i) => pending(org, i));
      await deliveries.insertMany({ tenantId: org }, docs);
      await log.flushed(); // nothing reported: answers at once
      // Reported in two waves, the second while the first batch is being written; nobody awaits the reports.
      for (const d of docs.slice(0, 150)) void log.succeeded(d, 200);
      await new Promise((r) => setImmediate(r));
      for (const d of docs.slice(150)) void log.succeeded(d, 200);
      await log.flushed();
      const stored = await deliveries.find({ tenantId: org }, { status: 'succeeded' }, { limit: 1_000 });
      assert.equal(stored.length, 300);
    });
  });
});

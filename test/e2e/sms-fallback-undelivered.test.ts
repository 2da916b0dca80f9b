/**
 * `fallback: {sms: 'if_undelivered', afterSeconds}` through the relay agent in
 * simulator mode over the WebSocket (the server in this process, each
 * backend): an iMessage the simulated Messages app never delivers goes again
 * as SMS once its window is past, one extra attempt, and the record, the
 * checkpoints and the events say so; one delivered in time is sent once. The
 * window's minimum is lowered for the test (SMS_FALLBACK_MIN_SECONDS).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { readSendLog, simulateFailures } from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { waitFor } from '../integration/runtime-contract.ts';
import { startSimulatedAgent } from '../support/simulated-agent.ts';
import { backends, signup, startTestApp } from '../support/test-app.ts';

for (const backend of backends()) {
  describe(`SMS fallback if_undelivered (${backend})`, () => {
    test(
      'an iMessage not delivered within afterSeconds goes once more as SMS; one delivered in time does not; bad windows are refused',
      { timeout: 120_000 },
      async (t) => {
        const app = await startTestApp(backend, {
          SMS_FALLBACK_MIN_SECONDS: '2',
          TENANT_SWEEP_MS: '300',
          MESSAGE_MAX_ATTEMPTS: '1',
        });
        t.after(() => app.stop());
        const org = await signup(app);
        const call = (method: string, path: string, body?: unknown) =>
          app.request(method, path, { token: org.ownerToken, body });

        // Windows the server does not take: 400, naming the field.
        const refused = async (fallback: unknown, path: string, message: RegExp) => {
          const res = await call('POST', '/api/v1/messages', { to: '+14155550131', body: 'x', fallback });
          assert.equal(res.status, 400, res.text);
          assert.equal(res.body.error, 'validation_error');
          assert.ok(
            res.body.details.some((d: { path: string; message: string }) => d.path === path && message.test(d.message)),
            res.text,
          );
        };
        await refused({ sms: 'if_undelivered', afterSeconds: 1 }, '/fallback/afterSeconds', /at least 2 seconds/);
        await refused({ sms: 'if_undelivered', afterSeconds: 86_401 }, '/fallback/afterSeconds', /86400/);
        await refused({ sms: 'if_undelivered', afterSeconds: 2.5 }, '/fallback/afterSeconds', /integer/);
        await refused({ sms: 'if_not_imessage', afterSeconds: 60 }, '/fallback/afterSeconds', /only .*if_undelivered/);
        await refused({ sms: 'when_it_rains' }, '/fallback/sms', /./);
        const bulk = await call('POST', '/api/v1/messages/bulk', {
          messages: [
            { to: '+14155550131', body: 'ok', fallback: { sms: 'if_undelivered' } },
            { to: '+14155550132', body: 'x', fallback: { sms: 'if_undelivered', afterSeconds: 1 } },
          ],
        });
        assert.equal(bulk.status, 400, bulk.text);
        assert.deepEqual(
          bulk.body.details.map((d: { path: string }) => d.path),
          ['/messages/1/fallback/afterSeconds'],
        );

        const agent = await startSimulatedAgent(t, app, org, { RELAY_SIM_DELIVERY_MS: '100' });
        const chatDb = agent.chatDb;
        const send = async (to: string) => {
          const res = await call('POST', '/api/v1/messages', {
            to,
            body: `hello ${to}`,
            fallback: { sms: 'if_undelivered', afterSeconds: 2 },
          });
          assert.equal(res.status, 201, res.text);
          assert.deepEqual(res.body.fallback, { sms: 'if_undelivered', afterSeconds: 2 });
          return res.body.id as string;
        };
        const status = async (id: string) => (await call('GET', `/api/v1/messages/${id}/status`)).body;

        // The simulated Messages app sends the next message and never delivers it.
        await simulateFailures(chatDb, 1, { neverDeliver: true });
        const stuck = await send('+14155550133');
        let record: any;
        await waitFor(
          async () => {
            record = await status(stuck);
            return record.status === 'delivered';
          },
          30_000,
          `${stuck} delivered as SMS\n${agent.output()}`,
        );
        assert.deepEqual([record.service, record.attempts], ['SMS', 2]);
        const hops = record.checkpoints.map((c: { hop: string }) => c.hop);
        assert.ok(hops.includes('sms_fallback'), hops.join());
        assert.ok(hops.indexOf('sms_fallback') < hops.indexOf('sent'), hops.join());
        const log = (await readSendLog(chatDb)).filter((e) => e.messageId === stuck);
        assert.deepEqual(
          log.map((e) => [e.attempt, e.service]),
          [
            [1, 'iMessage'],
            [2, 'SMS'],
          ],
        );
        // The history: the fallback's checkpoint, and a message.sent for each attempt.
        const events = async (type: string) =>
          (await call('GET', `/api/v1/events?type=${type}&limit=100`)).body.data.filter(
            (e: { data: { id: string } }) => e.data.id === stuck,
          );
        const fallback = (await events('message.checkpoint')).filter(
          (e: { data: { hop: string } }) => e.data.hop === 'sms_fallback',
        );
        assert.equal(fallback.length, 1);
        assert.deepEqual([fallback[0].data.reason, fallback[0].data.attempt], ['undelivered', 1]);
        assert.equal((await events('message.sent')).length, 2);
        assert.equal((await events('message.delivered')).length, 1);

        // Delivered within its window: sent once, over iMessage, and nothing more after the window.
        const prompt = await send('+14155550134');
        await waitFor(async () => (await status(prompt)).status === 'delivered', 30_000, `${prompt} delivered`);
        await new Promise((r) => setTimeout(r, 3_500));
        const promptRecord = await status(prompt);
        assert.deepEqual(
          [promptRecord.status, promptRecord.service, promptRecord.attempts],
          ['delivered', 'iMessage', 1],
        );
        assert.equal((await readSendLog(chatDb)).filter((e) => e.messageId === prompt).length, 1, 'sent once');
      },
    );
  });
}

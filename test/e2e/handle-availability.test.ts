/**
 * `GET /api/v1/handles/{handle}/availability` through the relay agent in
 * simulator mode over the WebSocket (the server in this process, each
 * backend): the agent answers from the simulated Messages app's rule, the
 * answer is kept and reused, each relay's budget is enforced with
 * Retry-After, and a lookup with no relay to ask, or through an agent older
 * than lookups, is refused with the reason.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  createSimulatedChatDb,
  readSendLog,
  simulateFailures,
  simulateNoImessage,
  simulateSmsOnly,
} from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { simulatedAgentArgs, startAgent } from '../support/fake-relay-server.ts';
import { RelaySocket } from '../support/relay-socket.ts';
import { waitFor } from '../integration/runtime-contract.ts';
import { backends, signup, startTestApp } from '../support/test-app.ts';

for (const backend of backends()) {
  describe(`handle availability lookups (${backend})`, () => {
    test(
      "asked through the relay's agent, kept and reused, limited per relay with Retry-After; refused with no relay or an older agent",
      { timeout: 120_000 },
      async (t) => {
        const app = await startTestApp(backend, { HANDLE_LOOKUPS_PER_HOUR: '3' });
        const dir = await mkdtemp(join(tmpdir(), 'relaybox-lookup-'));
        const chatDb = join(dir, 'chat.db');
        const org = await signup(app);
        const sockets: RelaySocket[] = [];
        let agent: ReturnType<typeof startAgent> | undefined;
        t.after(async () => {
          for (const s of sockets) s.close();
          agent?.child.kill('SIGKILL');
          await agent?.exited;
          await app.stop();
          await rm(dir, { recursive: true, force: true });
        });
        const call = (path: string) => app.request('GET', path, { token: org.ownerToken });
        const lookup = (handle: string, query = '') =>
          call(`/api/v1/handles/${encodeURIComponent(handle)}/availability${query}`);
        const token = async () =>
          (await app.request('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`, { token: org.ownerToken })).body
            .token as string;

        // Nothing to ask yet, and input that is no handle.
        const none = await lookup('+14155550111');
        assert.equal(none.status, 409, none.text);
        assert.match(none.body.message, /no relay is online/);
        assert.equal((await lookup('not a handle')).status, 400);
        assert.equal((await lookup('+14155550111', '?from=12')).status, 400);

        // An agent older than 0.3 is not asked: it would not understand the frame.
        const older = await RelaySocket.open(app.base);
        sockets.push(older);
        older.hello({ registrationToken: await token() }, { agentVersion: '0.2.0' });
        await older.next('welcome');
        const tooOld = await lookup('+14155550111');
        assert.equal(tooOld.status, 409, tooOld.text);
        assert.match(tooOld.body.message, /older than 0\.3/);
        older.close();
        await waitFor(
          async () => (await call('/api/v1/relays')).body.data.every((r: { status: string }) => r.status !== 'online'),
          20_000,
          'the older relay offline',
        );

        await createSimulatedChatDb(chatDb).then((db) => db.close());
        await simulateSmsOnly(chatDb, '+14155550111');
        agent = startAgent(
          simulatedAgentArgs(`${app.base.replace('http', 'ws')}/api/v1/relays/connect`, join(dir, 'state'), chatDb),
          {
            RELAYBOX_TOKEN: await token(),
            LOG_LEVEL: 'info',
          },
        );
        await waitFor(
          async () => (await call('/api/v1/relays')).body.data.some((r: { status: string }) => r.status === 'online'),
          20_000,
          `relay online\n${agent.output()}`,
        );

        const sms = await lookup('+1 (415) 555-0111');
        assert.equal(sms.status, 200, sms.text);
        assert.deepEqual(
          { handle: sms.body.handle, imessage: sms.body.imessage, source: sms.body.source, cached: sms.body.cached },
          { handle: '+14155550111', imessage: false, source: 'simulator', cached: false },
        );
        const imessage = await lookup('Jane@Example.com');
        assert.equal(imessage.status, 200, imessage.text);
        assert.equal(imessage.body.handle, 'jane@example.com');
        assert.equal(imessage.body.imessage, true);

        // Kept: answered again without asking, so without spending the relay's budget.
        for (let i = 0; i < 3; i++) {
          const again = await lookup('+14155550111');
          assert.equal(again.body.cached, true);
          assert.equal(again.body.imessage, false);
          assert.equal(again.body.checkedAt, sms.body.checkedAt);
        }
        // refresh asks again: the third lookup of this relay's hour.
        const refreshed = await lookup('jane@example.com', '?refresh=true');
        assert.equal(refreshed.status, 200, refreshed.text);
        assert.equal(refreshed.body.cached, false);
        // The fourth is over the budget of 3 an hour.
        const over = await lookup('+14155550112');
        assert.equal(over.status, 429, over.text);
        assert.equal(over.body.error, 'rate_limited');
        const retryAfter = Number(over.headers.get('retry-after'));
        assert.ok(retryAfter >= 1 && retryAfter <= 1200, `Retry-After ${retryAfter}`);
        // Kept answers still come while the budget is spent.
        assert.equal((await lookup('+14155550111')).status, 200);
        // Another organization reads none of them: it has no relay of its own to ask.
        const other = await signup(app, 'Other Org');
        const theirs = await app.request('GET', '/api/v1/handles/%2B14155550111/availability', {
          token: other.ownerToken,
        });
        assert.equal(theirs.status, 409, theirs.text);
        // A number no online relay sends from.
        const unowned = await lookup('+14155550113', `?from=${encodeURIComponent('+14155550999')}`);
        assert.equal(unowned.status, 409);
        assert.match(unowned.body.message, /no online relay sends from \+14155550999/);
      },
    );

    test(
      'a send with fallback.sms if_not_imessage goes as SMS: decided by the agent before sending, or after Messages fails it as not registered',
      { timeout: 120_000 },
      async (t) => {
        const app = await startTestApp(backend, { MESSAGE_MAX_ATTEMPTS: '1' });
        const dir = await mkdtemp(join(tmpdir(), 'relaybox-fallback-'));
        const chatDb = join(dir, 'chat.db');
        const org = await signup(app);
        let agent: ReturnType<typeof startAgent> | undefined;
        t.after(async () => {
          agent?.child.kill('SIGKILL');
          await agent?.exited;
          await app.stop();
          await rm(dir, { recursive: true, force: true });
        });
        const call = (method: string, path: string, body?: unknown) =>
          app.request(method, path, { token: org.ownerToken, body });
        const token = (await call('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`)).body.token as string;
        await createSimulatedChatDb(chatDb).then((db) => db.close());
        await simulateNoImessage(chatDb, '+14155550121');
        await simulateNoImessage(chatDb, '+14155550122');
        agent = startAgent(
          simulatedAgentArgs(`${app.base.replace('http', 'ws')}/api/v1/relays/connect`, join(dir, 'state'), chatDb),
          { RELAYBOX_TOKEN: token, LOG_LEVEL: 'info', RELAY_SIM_DELIVERY_MS: '100' },
        );
        await waitFor(
          async () =>
            (await call('GET', '/api/v1/relays')).body.data.some((r: { status: string }) => r.status === 'online'),
          20_000,
          `relay online\n${agent.output()}`,
        );
        const send = async (to: string, fallback?: unknown) => {
          const res = await call('POST', '/api/v1/messages', {
            to,
            body: `hello ${to}`,
            ...(fallback ? { fallback } : {}),
          });
          assert.equal(res.status, 201, res.text);
          return res.body.id as string;
        };
        const settled = async (id: string) => {
          let status: any;
          await waitFor(
            async () => {
              status = (await call('GET', `/api/v1/messages/${id}/status`)).body;
              return status.status === 'delivered' || status.status === 'failed';
            },
            30_000,
            `${id} delivered or failed\n${agent!.output()}`,
          );
          return status;
        };

        assert.equal(
          (
            await call('POST', '/api/v1/messages', {
              to: '+14155550121',
              body: 'x',
              fallback: { sms: 'if_undelivered', afterSeconds: 10 },
            })
          ).status,
          400,
          'a window under the 30 s minimum',
        );
        // No fallback: Messages fails it, not registered, and it stays failed.
        const plain = await settled(await send('+14155550121'));
        assert.deepEqual([plain.status, plain.failureReason], ['failed', 'not_registered']);
        // The agent knows the recipient has no iMessage: the first attempt goes as SMS.
        const known = await send('+14155550122', { sms: 'if_not_imessage' });
        const knownStatus = await settled(known);
        assert.deepEqual([knownStatus.status, knownStatus.service, knownStatus.attempts], ['delivered', 'SMS', 1]);
        assert.deepEqual((await call('GET', `/api/v1/messages/${known}`)).body.fallback, { sms: 'if_not_imessage' });
        // The agent cannot tell beforehand (Messages fails the iMessage send): the next attempt goes as SMS,
        // though MESSAGE_MAX_ATTEMPTS is 1.
        await simulateFailures(chatDb, 1, { error: 22 });
        const retried = await send('+14155550123', { sms: 'if_not_imessage' });
        const retriedStatus = await settled(retried);
        assert.deepEqual(
          [retriedStatus.status, retriedStatus.service, retriedStatus.attempts],
          ['delivered', 'SMS', 2],
        );
        const log = (await readSendLog(chatDb)).filter((e) => e.messageId === retried);
        assert.deepEqual(
          log.map((e) => [e.attempt, e.service, e.error]),
          [
            [1, 'iMessage', 22],
            [2, 'SMS', 0],
          ],
        );
        assert.equal((await readSendLog(chatDb)).filter((e) => e.messageId === known).length, 1, 'sent once');
      },
    );
  });
}

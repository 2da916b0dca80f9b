/**
 * What chat.db says of a send reaches the API within seconds, with its
 * reason: the server in this process (each backend), the relay agent as a
 * process in simulator mode over the WebSocket, faults injected into its
 * simulated Messages app (an error code on the row, a row never delivered, a
 * recipient reached by SMS only). A restarted agent that reports everything
 * again adds no event.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { msToAppleNs } from '../../packages/relay-agent/src/apple-time.ts';
import {
  createSimulatedChatDb,
  simulateFailures,
  simulateSmsOnly,
  readSendLog as sendLog,
} from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { simulatedAgentArgs, startAgent } from '../support/fake-relay-server.ts';
import { waitFor } from '../integration/runtime-contract.ts';
import { backends, signup, startTestApp } from '../support/test-app.ts';

interface StatusRecord {
  status: string;
  attempts: number;
  lastError: string | null;
  failureReason: string | null;
  service: string | null;
  undeliveredAt: string | null;
  checkpoints: Array<{ hop: string; at: string }>;
}

for (const backend of backends()) {
  describe(`delivery truth through the relay agent (${backend})`, () => {
    test(
      "a row's error fails the send with its reason within seconds; a send never delivered is marked undelivered once; SMS is told apart; a restarted agent adds no event",
      { timeout: 120_000 },
      async (t) => {
        const app = await startTestApp(backend, {
          MESSAGE_RETRY_BASE_MS: '200',
          MESSAGE_MAX_ATTEMPTS: '3',
          TENANT_SWEEP_MS: '300',
        });
        const dir = await mkdtemp(join(tmpdir(), 'relaybox-truth-'));
        const chatDb = join(dir, 'chat.db');
        const stateDir = join(dir, 'state');
        const org = await signup(app);
        const token = (
          await app.request('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`, { token: org.ownerToken })
        ).body.token as string;
        const args = simulatedAgentArgs(`${app.base.replace('http', 'ws')}/api/v1/relays/connect`, stateDir, chatDb);
        const env = { RELAYBOX_TOKEN: token, LOG_LEVEL: 'info', RELAY_SIM_DELIVERY_MS: '200' };
        // Each run of the agent, the current one last: what all of them logged is the output.
        const runs: Array<ReturnType<typeof startAgent>> = [];
        const output = () => runs.map((r) => r.output()).join('');
        t.after(async () => {
          runs.at(-1)?.child.kill('SIGKILL');
          await runs.at(-1)?.exited;
          await app.stop();
          await rm(dir, { recursive: true, force: true });
        });
        const call = (method: string, path: string, body?: unknown) =>
          app.request(method, path, { token: org.ownerToken, body });
        const statusOf = async (id: string) =>
          (await call('GET', `/api/v1/messages/${id}/status`)).body as StatusRecord;
        const sendMessage = async (to: string, body: string) =>
          (await call('POST', '/api/v1/messages', { to, body })).body.id as string;
        const until = (id: string, done: (s: StatusRecord) => boolean, what: string) =>
          waitFor(async () => done(await statusOf(id)), 30_000, `${id} ${what}\n${output()}`);
        const eventsOf = async (type: string, id: string) =>
          ((await call('GET', `/api/v1/events?type=${type}&limit=100`)).body.data as Array<{ data: any }>).filter(
            (e) => e.data.id === id,
          );
        const online = () =>
          waitFor(
            async () =>
              (await call('GET', '/api/v1/relays')).body.data.some((r: { status: string }) => r.status === 'online'),
            20_000,
            `relay online\n${output()}`,
          );

        // The organization's window, in seconds so the test need not wait 10 minutes; an admin sets it, a bad one is refused.
        assert.deepEqual((await call('GET', '/api/v1/organization/delivery')).body, { undeliveredAfterSeconds: 600 });
        assert.equal((await call('PUT', '/api/v1/organization/delivery', { undeliveredAfterSeconds: 0 })).status, 400);
        assert.equal((await call('PUT', '/api/v1/organization/delivery', { undeliveredAfterSeconds: 2 })).status, 200);
        assert.deepEqual((await call('GET', '/api/v1/organization/delivery')).body, { undeliveredAfterSeconds: 2 });

        await createSimulatedChatDb(chatDb).then((db) => db.close());
        runs.push(startAgent(args, env));
        await online();

        // 1. Error 22 on the row: failed at once (no retry reaches a recipient without iMessage), within 5 s of the row.
        await simulateFailures(chatDb, 1, { error: 22 });
        const unregistered = await sendMessage('+14155550100', 'to an Android phone');
        await until(unregistered, (s) => s.status === 'failed', 'failed');
        const failed = await statusOf(unregistered);
        assert.equal(failed.failureReason, 'not_registered');
        assert.equal(failed.attempts, 1);
        assert.match(failed.lastError ?? '', /error 22: the recipient is not registered with iMessage/);
        const failedHop = failed.checkpoints.find((c) => c.hop === 'failed');
        assert.ok(failedHop, 'the checkpoints show the failure');
        const row = (await sendLog(chatDb)).find((e) => e.messageId === unregistered)!;
        assert.equal(row.error, 22);
        const lagMs = Date.parse(failedHop.at) - Date.parse(row.at);
        console.log(`# ${backend}: failed ${lagMs} ms after the row's error was written`);
        assert.ok(lagMs < 5_000, `failed within 5 s of the row's error (${lagMs} ms)`);
        const failedEvents = await eventsOf('message.failed', unregistered);
        assert.equal(failedEvents.length, 1);
        assert.equal(failedEvents[0]!.data.reason, 'not_registered');

        // 2. Any other code is retried as a failed attempt, and says its reason: unknown_<code>, then network.
        await simulateFailures(chatDb, 3, { error: 7 });
        const unknown = await sendMessage('+14155550101', 'unknown error every time');
        await until(unknown, (s) => s.status === 'failed', 'failed');
        assert.deepEqual(await statusOf(unknown).then((s) => [s.failureReason, s.attempts]), ['unknown_7', 3]);
        await simulateFailures(chatDb, 1, { error: 3 });
        const network = await sendMessage('+14155550102', 'network error once');
        await until(network, (s) => s.status === 'queued' || s.status === 'processing' || s.status === 'delivered', '');
        await until(network, (s) => s.status === 'delivered', 'delivered on its retry');
        const retried = await statusOf(network);
        assert.deepEqual([retried.attempts, retried.failureReason, retried.lastError], [2, null, null]);
        assert.match(output(), /"event":"send\.failed".*"reason":"network"/);

        // 3. Sent and never delivered: undelivered after the organization's window, still sent, one event.
        await simulateFailures(chatDb, 1, { neverDeliver: true });
        const silent = await sendMessage('+14155550103', 'never delivered');
        await until(silent, (s) => s.status === 'sent', 'sent');
        await until(silent, (s) => s.undeliveredAt !== null, 'undelivered');
        const undelivered = await statusOf(silent);
        assert.equal(undelivered.status, 'sent', 'undelivered is not a failure');
        assert.ok(
          Date.parse(undelivered.undeliveredAt!) -
            Date.parse(undelivered.checkpoints.find((c) => c.hop === 'sent')!.at) >=
            2_000,
        );
        assert.deepEqual(
          undelivered.checkpoints.map((c) => c.hop).filter((h) => h === 'sent' || h === 'undelivered'),
          ['sent', 'undelivered'],
        );
        const undeliveredEvents = await eventsOf('message.undelivered', silent);
        assert.equal(undeliveredEvents.length, 1);
        assert.equal(undeliveredEvents[0]!.data.windowSeconds, 2);
        // A later delivery still applies.
        const silentRow = (await sendLog(chatDb)).find((e) => e.messageId === silent)!;
        const db = await createSimulatedChatDb(chatDb);
        db.prepare('UPDATE message SET is_delivered = 1, date_delivered = ? WHERE ROWID = ?').run(
          msToAppleNs(Date.now()),
          silentRow.rowId,
        );
        db.close();
        await until(silent, (s) => s.status === 'delivered', 'delivered late');
        assert.ok((await statusOf(silent)).undeliveredAt, 'the record keeps when it was found undelivered');

        // 4. A recipient reached by SMS only is told apart from iMessage.
        await simulateSmsOnly(chatDb, '+14155550104');
        const sms = await sendMessage('+14155550104', 'by SMS');
        const imessage = await sendMessage('+14155550105', 'by iMessage');
        await until(sms, (s) => s.status === 'delivered', 'delivered');
        await until(imessage, (s) => s.status === 'delivered', 'delivered');
        assert.equal((await statusOf(sms)).service, 'SMS');
        assert.equal((await statusOf(imessage)).service, 'iMessage');
        assert.equal((await call('GET', `/api/v1/messages/${sms}`)).body.service, 'SMS');

        // 5. The agent restarts and, as if no ack had reached it, reports every status again: no event twice.
        runs.at(-1)!.child.kill('SIGKILL');
        await runs.at(-1)!.exited;
        const journalPath = join(stateDir, 'sends.json');
        const journal = JSON.parse(await readFile(journalPath, 'utf8')) as { records: Array<{ acked: number }> };
        for (const r of journal.records) r.acked = 0;
        await writeFile(journalPath, JSON.stringify(journal));
        runs.push(startAgent(args, env));
        await online();
        await waitFor(
          async () =>
            (
              runs
                .at(-1)!
                .output()
                .match(/"event":"online"/g) ?? []
            ).length >= 1,
          20_000,
          `the agent came back\n${output()}`,
        );
        await new Promise((done) => setTimeout(done, 1_500)); // its statuses again, and a few sweeps
        assert.equal((await eventsOf('message.failed', unregistered)).length, 1);
        assert.equal((await eventsOf('message.undelivered', silent)).length, 1);
        assert.equal((await eventsOf('message.delivered', silent)).length, 1);
        assert.equal((await eventsOf('message.failed', unknown)).length, 1);
        assert.deepEqual(
          [(await statusOf(unregistered)).status, (await statusOf(silent)).status],
          ['failed', 'delivered'],
        );
        const log = await sendLog(chatDb);
        assert.equal(log.filter((e) => e.messageId === unregistered).length, 1, 'nothing sent again');
      },
    );
  });
}

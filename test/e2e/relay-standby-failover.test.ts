/**
 * A sender line with a primary and a standby relay, both real agents in
 * simulator mode over the WebSocket (the server in this process, each
 * backend). The two simulated Macs share one chat.db, as two Macs signed in
 * to one Apple ID share their messages through iCloud. Killing the primary
 * under a steady send load moves the line to the standby with one
 * `relay.failover`; every accepted message is sent exactly once across both
 * Macs; the primary's return moves the line back with one `relay.failback`.
 * A send the primary had handed to Messages before it left is found in the
 * standby's chat.db and reported sent, not sent again.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  SimulatedMessagesApp,
  createSimulatedChatDb,
  readSendLog,
} from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { openSqliteFile } from '../../packages/relay-agent/src/sqlite-file.ts';
import { simulatedAgentArgs, startAgent } from '../support/fake-relay-server.ts';
import { RelaySocket } from '../support/relay-socket.ts';
import { backends, signup, startTestApp, type TestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';

const line = '+14155550190';
const heartbeatTimeoutMs = 3_000;
type Agent = ReturnType<typeof startAgent>;

/** How many rows the Macs' shared chat.db has that this Apple ID sent, by text. */
function sentRows(chatDb: string): Map<string, number> {
  const db = openSqliteFile(chatDb, 'readonly');
  try {
    const rows = db
      .prepare('SELECT text, COUNT(*) AS n FROM message WHERE is_from_me = 1 GROUP BY text')
      .all() as Array<{
      text: string;
      n: number;
    }>;
    return new Map(rows.map((r) => [r.text, Number(r.n)]));
  } finally {
    db.close();
  }
}

async function organization(app: TestApp) {
  const org = await signup(app);
  const call = (method: string, path: string, body?: unknown) =>
    app.request(method, path, { token: org.ownerToken, body });
  const token = async () => (await call('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`)).body.token as string;
  const relays = async () => (await call('GET', '/api/v1/relays')).body.data as Array<Record<string, any>>;
  const online = (name: string, agent?: Agent) =>
    until(
      `${name} online`,
      async () => (await relays()).find((r) => r.name === name && r.status === 'online') ?? false,
      20_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${agent?.output() ?? ''}`);
    });
  const send = async (to: string, body: string) => {
    const res = await call('POST', '/api/v1/messages', { to, body, fromNumber: line });
    assert.equal(res.status, 201, res.text);
    return res.body.id as string;
  };
  const message = async (id: string) => (await call('GET', `/api/v1/messages/${id}`)).body;
  const sentAll = (ids: string[], what: string) =>
    until(
      what,
      async () => {
        const docs = await Promise.all(ids.map(message));
        return docs.every((d) => d.status === 'sent' || d.status === 'delivered') && docs;
      },
      60_000,
    );
  const events = async (type: string) =>
    (await call('GET', `/api/v1/events?type=${type}`)).body.data as Array<Record<string, any>>;
  const number = await call('POST', '/api/v1/phone-numbers', { number: line });
  assert.equal(number.status, 201, number.text);
  return { call, token, online, send, message, sentAll, events, numberId: number.body.id as string };
}

for (const backend of backends()) {
  describe(`standby relay failover (${backend})`, () => {
    // Killed: its socket closes. Frozen (SIGSTOP, a Mac that stops answering): the heartbeat timeout finds it.
    for (const how of ['killed', 'frozen'] as const)
      test(
        `the primary ${how} under load: its line moves to the standby, every message sent once; its return moves it back`,
        { timeout: 180_000 },
        async (t) => {
          const app = await startTestApp(backend, {
            RELAY_HEARTBEAT_TIMEOUT_MS: String(heartbeatTimeoutMs),
            RELAY_HEARTBEAT_INTERVAL_MS: '500',
          });
          const dir = await mkdtemp(join(tmpdir(), 'relaybox-standby-'));
          const chatDb = join(dir, 'chat.db');
          const agents: Agent[] = [];
          t.after(async () => {
            for (const a of agents) a.child.kill('SIGKILL');
            await Promise.all(agents.map((a) => a.exited));
            await app.stop();
            await rm(dir, { recursive: true, force: true });
          });
          const org = await organization(app);
          await createSimulatedChatDb(chatDb).then((db) => db.close());
          const url = `${app.base.replace('http', 'ws')}/api/v1/relays/connect`;
          const start = (name: string, env: Record<string, string> = {}) => {
            const agent = startAgent(
              [...simulatedAgentArgs(url, join(dir, name), chatDb), '--name', name, '--capacity', '5'],
              { LOG_LEVEL: 'info', RELAY_SIM_DELIVERY_MS: '100', ...env },
            );
            agents.push(agent);
            return agent;
          };
          let primaryAgent = start('primary', { RELAYBOX_TOKEN: await org.token() });
          const primary = await org.online('primary', primaryAgent);
          const standbyAgent = start('standby', { RELAYBOX_TOKEN: await org.token() });
          const standby = await org.online('standby', standbyAgent);
          const set = await org.call('PUT', `/api/v1/phone-numbers/${org.numberId}`, {
            relays: [primary.id, standby.id],
          });
          assert.equal(set.status, 200, set.text);

          // A steady load: one send every 40 ms; the primary is killed a third of the way in.
          const ids: string[] = [];
          let killedAt = 0;
          for (let i = 0; i < 45; i++) {
            ids.push(await org.send(`+1415555020${i % 4}`, `load ${i}`));
            if (i === 15) {
              primaryAgent.child.kill(how === 'killed' ? 'SIGKILL' : 'SIGSTOP');
              killedAt = Date.now();
            }
            await new Promise((r) => setTimeout(r, 40));
          }
          const docs = await org.sentAll(ids, 'every message of the load sent');
          const failover = await until('relay.failover', async () => {
            const list = await org.events('relay.failover');
            return list.length > 0 && list;
          });
          assert.equal(failover.length, 1, 'one relay.failover');
          assert.deepEqual([failover[0]!.data.from, failover[0]!.data.to], [primary.id, standby.id]);
          const movedAfterMs = Date.parse(failover[0]!.timestamp) - killedAt;
          // Frozen, its last heartbeat came before the freeze: the timeout runs from there, then the check timer fires.
          const allowedMs = how === 'killed' ? heartbeatTimeoutMs : heartbeatTimeoutMs + 1_000;
          assert.ok(movedAfterMs <= allowedMs, `moved ${movedAfterMs} ms after the primary was ${how}`);
          const line = (await org.call('GET', '/api/v1/phone-numbers')).body.data[0];
          assert.equal(line.failedOverTo, standby.id);
          // The messages accepted after the kill went through the standby.
          assert.ok(
            docs.slice(20).every((d) => d.relayId === standby.id),
            'the standby took the line',
          );

          // Exactly once across both Macs: one row each in the shared chat.db, one entry at most in the send log.
          const rows = sentRows(chatDb);
          const log = await readSendLog(chatDb);
          const checks = standbyAgent.output().match(/"event":"sent-check"/g)?.length ?? 0;
          // Frozen, the primary held a window of sends at its timeout: each was checked before the standby sent it.
          if (how === 'frozen') assert.ok(checks >= 1, `the standby checked what the primary held (${checks})`);
          for (let i = 0; i < ids.length; i++) {
            assert.equal(rows.get(`load ${i}`), 1, `load ${i} sent once (${rows.get(`load ${i}`) ?? 0} rows)`);
            assert.ok(log.filter((e) => e.messageId === ids[i]).length <= 1, `load ${i} logged once`);
          }
          console.log(
            `# ${how}: failover ${movedAfterMs} ms after; ${checks} failover checks; ${log.length} sends logged for ${ids.length} messages`,
          );

          // The primary comes back: one relay.failback, and the line's new sends go to it again.
          if (how === 'frozen') {
            // It never wakes: what it held is the standby's now (a frozen Mac that wakes: docs/relay-agent.md).
            primaryAgent.child.kill('SIGKILL');
            await primaryAgent.exited;
          }
          primaryAgent = start('primary');
          await until('primary online again', async () => {
            const relays = (await org.call('GET', '/api/v1/relays')).body.data as any[];
            return relays.some((r) => r.id === primary.id && r.status === 'online');
          });
          const failback = await until('relay.failback', async () => {
            const list = await org.events('relay.failback');
            return list.length > 0 && list;
          });
          assert.equal(failback.length, 1, 'one relay.failback');
          assert.deepEqual([failback[0]!.data.from, failback[0]!.data.to], [standby.id, primary.id]);
          const after: string[] = [];
          for (let i = 0; i < 5; i++) after.push(await org.send('+14155550209', `after ${i}`));
          const back = await org.sentAll(after, 'the sends after the return');
          assert.ok(
            back.every((d) => d.relayId === primary.id),
            'the primary sends again',
          );
          assert.equal((await org.events('relay.failover')).length, 1);
          assert.equal((await org.events('relay.failback')).length, 1);
        },
      );

    test(
      "a send the primary handed to Messages before it left is found in the standby's chat.db: reported sent, never sent again",
      { timeout: 120_000 },
      async (t) => {
        const app = await startTestApp(backend);
        const dir = await mkdtemp(join(tmpdir(), 'relaybox-standby-check-'));
        const chatDb = join(dir, 'chat.db');
        let agent: Agent | undefined;
        const primary = await RelaySocket.open(app.base);
        t.after(async () => {
          primary.close();
          agent?.child.kill('SIGKILL');
          await agent?.exited;
          await app.stop();
          await rm(dir, { recursive: true, force: true });
        });
        const org = await organization(app);
        // The primary: a bare protocol client that takes the sends and reports nothing.
        primary.hello({ registrationToken: await org.token() }, { name: 'primary' });
        const primaryId = (await primary.next('welcome', undefined, 15_000)).relayId;
        primary.send({ type: 'ready', capacity: 5 });
        await createSimulatedChatDb(chatDb).then((db) => db.close());
        agent = startAgent(
          [
            ...simulatedAgentArgs(`${app.base.replace('http', 'ws')}/api/v1/relays/connect`, join(dir, 's'), chatDb),
          ].concat(['--name', 'standby']),
          { RELAYBOX_TOKEN: await org.token(), LOG_LEVEL: 'info' },
        );
        const standby = await org.online('standby', agent);
        await org.call('PUT', `/api/v1/phone-numbers/${org.numberId}`, { relays: [primaryId, standby.id] });

        const handed = await org.send('+14155550211', 'handed to Messages');
        const notYet = await org.send('+14155550212', 'not handed yet');
        const frame = await primary.next('send', (f) => f.messageId === handed, 15_000);
        await primary.next('send', (f) => f.messageId === notYet, 15_000);
        // The primary's Mac sent the first before it went away: its row is in the chat.db both Macs see.
        const mac = await SimulatedMessagesApp.open(chatDb);
        await mac.send({
          messageId: handed,
          attempt: frame.attempt,
          to: frame.to,
          body: frame.body!,
          attachmentPaths: [],
        });
        await mac.close();
        primary.close();

        const [first, second] = await org.sentAll([handed, notYet], 'both sent');
        const log = await readSendLog(chatDb);
        const entry = log.find((e) => e.messageId === handed)!;
        assert.equal(first.guid, entry.guid, "reported sent with the primary's row");
        assert.equal(log.filter((e) => e.messageId === handed).length, 1, 'the first never sent again');
        assert.equal(log.filter((e) => e.messageId === notYet).length, 1, 'the second sent by the standby');
        assert.equal(second.relayId, standby.id);
        const rows = sentRows(chatDb);
        assert.deepEqual([rows.get('handed to Messages'), rows.get('not handed yet')], [1, 1]);
      },
    );
  });
}

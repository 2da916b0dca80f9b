/**
 * A sender line's primary relay and its standby (docs/relay-agent.md,
 * "Standby relays"), with bare protocol clients for both (each backend):
 * `PUT /api/v1/phone-numbers/:id` `relays` and its errors; a send the primary
 * held when it left waits `relay_failover_check` while the standby does not
 * answer the check, and is sent once it answers "not sent"; a received
 * message both relays read is stored once, by its guid or by its recipient,
 * text and time.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RelaySocket } from '../support/relay-socket.ts';
import { backends, signup, startTestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';

const line = '+14155550180';

for (const backend of backends()) {
  describe(`standby relays (${backend})`, () => {
    test(
      'relays of a line are validated; an unanswered failover check holds the send as relay_failover_check; inbound twins are one message',
      { timeout: 90_000 },
      async (t) => {
        const app = await startTestApp(backend);
        const sockets: RelaySocket[] = [];
        t.after(async () => {
          for (const s of sockets) s.close();
          await app.stop();
        });
        const org = await signup(app);
        const call = (method: string, path: string, body?: unknown) =>
          app.request(method, path, { token: org.ownerToken, body });
        const relay = async (name: string, credential?: { relayId: string; secret: string }) => {
          const socket = await RelaySocket.open(app.base);
          sockets.push(socket);
          if (credential) socket.hello({ credential }, { name });
          else {
            const token = (await call('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`)).body.token as string;
            socket.hello({ registrationToken: token }, { name });
          }
          const welcome = await socket.next('welcome', undefined, 15_000);
          socket.send({ type: 'ready', capacity: 5 });
          return { socket, id: welcome.relayId, credential: credential ?? welcome.credential! };
        };
        const moves = async (type: string) =>
          ((await call('GET', `/api/v1/events?type=${type}`)).body.data as any[]).map((e) => [e.data.from, e.data.to]);
        const number = await call('POST', '/api/v1/phone-numbers', { number: line });
        assert.equal(number.status, 201, number.text);
        const numberId = number.body.id as string;
        const primary = await relay('primary');
        const standby = await relay('standby');

        // The relays must be the organization's, each once, four at most.
        const put = (relays: unknown) => call('PUT', `/api/v1/phone-numbers/${numberId}`, { relays });
        const unknown = await put([primary.id, 'rly_nope']);
        assert.equal(unknown.status, 400, unknown.text);
        assert.match(unknown.body.message, /\/relays\/1: relay rly_nope not found/);
        assert.equal((await put([primary.id, primary.id])).status, 400);
        assert.equal((await put(['a', 'b', 'c', 'd', 'e'])).status, 400);
        const other = await signup(app, 'Other Org');
        const theirs = (relays: string[]) =>
          app.request('PUT', `/api/v1/phone-numbers/${numberId}`, { token: other.ownerToken, body: { relays } });
        // Another organization can name neither our relays nor our number.
        assert.match((await theirs([primary.id])).body.message, /relay .* not found in this organization/);
        assert.equal((await theirs([])).status, 404);
        const set = await put([primary.id, standby.id]);
        assert.equal(set.status, 200, set.text);
        assert.deepEqual(set.body.relays, [primary.id, standby.id]);
        const listed = (await call('GET', '/api/v1/phone-numbers')).body.data.find(
          (n: { id: string }) => n.id === numberId,
        );
        assert.deepEqual(listed.relays, [primary.id, standby.id]);

        // The line's send goes to its primary, never to the standby while the primary is online.
        const sent = await call('POST', '/api/v1/messages', { to: '+14155550181', body: 'held', fromNumber: line });
        assert.equal(sent.status, 201, sent.text);
        const id = sent.body.id as string;
        const frame = await primary.socket.next('send', (f) => f.messageId === id, 15_000);
        assert.equal(frame.attempt, 1);
        assert.equal(standby.socket.frames.filter((f) => f.type === 'send').length, 0);

        // The primary leaves holding it: the standby is asked whether its chat.db has it, and does not answer.
        primary.socket.close();
        const check = await standby.socket.next('checkSent', (f) => f.to === '+14155550181', 20_000);
        assert.equal(check.body, 'held');
        assert.ok(Date.parse(check.since) <= Date.now());
        const waiting = await until(
          'the send waits for the failover check',
          async () => {
            const s = (await call('GET', `/api/v1/messages/${id}/status`)).body;
            return s.waitingFor === 'relay_failover_check' && s;
          },
          20_000,
        );
        assert.equal(waiting.status, 'queued');
        assert.equal(standby.socket.frames.filter((f) => f.type === 'send').length, 0, 'nothing sent unchecked');
        const failover = await until('relay.failover', async () => {
          const events = (await call('GET', '/api/v1/events?type=relay.failover')).body.data as any[];
          return events.length > 0 && events;
        });
        assert.equal(failover.length, 1);
        assert.deepEqual(
          { from: failover[0].data.from, to: failover[0].data.to, phoneNumber: failover[0].data.phoneNumber },
          { from: primary.id, to: standby.id, phoneNumber: line },
        );

        // Checked again, answered "not sent": the standby sends it, once.
        const again = await standby.socket.next(
          'checkSent',
          (f) => f.to === '+14155550181' && f.checkId !== check.checkId,
          20_000,
        );
        standby.socket.send({ type: 'sentCheck', checkId: again.checkId, sent: false });
        const resent = await standby.socket.next('send', (f) => f.messageId === id, 20_000);
        standby.socket.send({
          type: 'status',
          messageId: id,
          attempt: resent.attempt,
          status: 'sent',
          at: new Date().toISOString(),
          guid: 'GUID-SENT-BY-STANDBY',
        });
        const status = await until('sent by the standby', async () => {
          const s = (await call('GET', `/api/v1/messages/${id}/status`)).body;
          return s.status === 'sent' && s;
        });
        assert.equal(status.waitingFor, null);

        // One received message read by both relays: by its guid, then under another guid with the same text and time.
        const receivedAt = new Date().toISOString();
        const row = (rowId: number, guid: string, body = 'hello both') => ({
          type: 'inbound',
          rowId,
          guid,
          from: '+14155550182',
          isGroup: false,
          body,
          receivedAt,
        });
        standby.socket.send(row(1, 'GUID-IN-1'));
        await standby.socket.next('ack', (a) => a.of === 'inbound' && a.cursor === 1, 15_000);
        const back = await relay('standby again');
        assert.notEqual(back.id, standby.id);
        await call('PUT', `/api/v1/phone-numbers/${numberId}`, { relays: [standby.id, back.id] });
        back.socket.send(row(1, 'GUID-IN-1'));
        back.socket.send(row(2, 'GUID-IN-OTHER-MAC'));
        back.socket.send(row(3, 'GUID-IN-3', 'another text'));
        await back.socket.next('ack', (a) => a.of === 'inbound' && a.cursor === 3, 15_000);
        const received = await until('received messages', async () => {
          const events = (await call('GET', '/api/v1/events?type=message.received')).body.data as any[];
          return events.length >= 2 && events;
        });
        assert.deepEqual(received.map((e) => e.data.body).sort(), ['another text', 'hello both']);

        // The line [standby, back]: with both gone there is no move; the first to come back takes the line from its
        // primary (a failover), and the primary's return is a failback.
        back.socket.close();
        await until('the standby offline', async () => {
          const relays = (await call('GET', '/api/v1/relays')).body.data as any[];
          return relays.some((r) => r.id === back.id && r.status === 'offline');
        });
        standby.socket.close();
        await until('both offline', async () => {
          const relays = (await call('GET', '/api/v1/relays')).body.data as any[];
          return relays.filter((r) => r.status === 'online').length === 0;
        });
        assert.equal((await moves('relay.failover')).length, 1, 'no move with no relay online');
        const backAgain = await relay('standby again', back.credential);
        assert.equal(backAgain.id, back.id);
        await until('the standby takes the line', async () => (await moves('relay.failover')).length === 2);
        assert.deepEqual((await moves('relay.failover'))[0], [standby.id, back.id]);
        const lineNow = (await call('GET', '/api/v1/phone-numbers')).body.data.find((n: any) => n.id === numberId);
        assert.equal(lineNow.failedOverTo, back.id);
        const primaryAgain = await relay('standby', standby.credential);
        assert.equal(primaryAgain.id, standby.id);
        const failback = await until('failback', async () => {
          const list = await moves('relay.failback');
          return list.length > 0 && list;
        });
        assert.deepEqual(failback, [[back.id, standby.id]]);
      },
    );
  });
}

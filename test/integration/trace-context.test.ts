import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { SendFrame } from '../../src/relay-protocol/frames.ts';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { RelaySocket } from '../support/relay-socket.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { until } from '../support/until.ts';
import { WebhookReceivers, type ReceivedDelivery, type WebhookReceiver } from '../support/webhook-receiver.ts';

/** version 00: `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`. */
const traceparentShape = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

function parts(traceparent: string | undefined, what: string): { traceId: string; spanId: string; flags: string } {
  const m = traceparentShape.exec(traceparent ?? '');
  assert.ok(m, `${what}: a valid traceparent, got ${traceparent}`);
  assert.notEqual(m[1], '0'.repeat(32), `${what}: a trace id that is not all zeros`);
  assert.notEqual(m[2], '0'.repeat(16), `${what}: a span id that is not all zeros`);
  return { traceId: m[1]!, spanId: m[2]!, flags: m[3]! };
}

eachBackend((backend) => {
  describe(`trace context (${backend})`, () => {
    let t: TestApp;
    const relays: StandInRelay[] = [];
    const sockets: RelaySocket[] = [];
    const receivers = new WebhookReceivers();

    before(async () => {
      t = await startTestApp(backend, { WEBHOOK_ALLOW_PRIVATE: 'true', TENANT_SWEEP_MS: '300' });
    });
    after(async () => {
      for (const r of relays) r.close();
      for (const s of sockets) s.close();
      await t.stop();
      await receivers.stopAll();
    });

    /** An organization with a relay taking sends and a webhook on message.queued, .sent and .delivered. */
    const setUp = async (): Promise<{ org: Org; relay: StandInRelay; receiver: WebhookReceiver }> => {
      const org = await signup(t);
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 10 });
      relays.push(relay);
      await relay.connect();
      const receiver = await receivers.start();
      const hook = await t.request('POST', '/api/v1/webhooks', {
        token: org.ownerToken,
        body: { url: receiver.url, events: ['message.queued', 'message.sent', 'message.delivered'] },
      });
      assert.equal(hook.status, 201, hook.text);
      return { org, relay, receiver };
    };

    /** Sends one message with these headers, lets the relay report it sent; answers its send frame and the webhook deliveries of its two events. */
    const sendThrough = async (
      ctx: { org: Org; relay: StandInRelay; receiver: WebhookReceiver },
      headers: Record<string, string>,
    ) => {
      const res = await t.request('POST', '/api/v1/messages', {
        token: ctx.org.ownerToken,
        body: { to: '+14155550100', body: 'traced' },
        headers,
      });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.traceparent, undefined, 'the trace context is not part of the message as the API shows it');
      assert.equal(res.body.tracestate, undefined);
      const id: string = res.body.id;
      const frame = await until<SendFrame>(
        'the send frame',
        async () => ctx.relay.sends.find((f) => f.messageId === id),
        10_000,
      );
      await ctx.relay.report(id, 'sent');
      const ofMessage = (event: string) =>
        ctx.receiver.received.find((d) => d.json?.event === event && d.json?.data?.id === id);
      const queued = await until<ReceivedDelivery>(
        'message.queued delivered',
        async () => ofMessage('message.queued'),
        15_000,
      );
      const sent = await until<ReceivedDelivery>(
        'message.sent delivered',
        async () => ofMessage('message.sent'),
        15_000,
      );
      return { id, frame, queued, sent };
    };

    test('a traceparent sent with POST /api/v1/messages reaches the relay send frame and the webhook deliveries of its events, each as a child span', async () => {
      const ctx = await setUp();
      const incoming = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const { frame, queued, sent } = await sendThrough(ctx, {
        traceparent: incoming,
        tracestate: 'rbx=t61rcWkgMzE,congo=lZWRzIHRoNhcm5hbCBwbGVhc3VyZS4',
      });
      const onFrame = parts(frame.traceparent, 'send frame');
      assert.equal(onFrame.traceId, '4bf92f3577b34da6a3ce929d0e0e4736', 'the request trace id reaches the relay');
      assert.notEqual(onFrame.spanId, '00f067aa0ba902b7', 'the frame has a span id of its own');
      assert.equal(onFrame.flags, '01', 'the sampled flag is kept');
      for (const [name, delivery] of [
        ['message.queued', queued],
        ['message.sent', sent],
      ] as const) {
        const header = parts(delivery.headers.traceparent, `${name} delivery`);
        assert.equal(
          header.traceId,
          '4bf92f3577b34da6a3ce929d0e0e4736',
          `${name}: the request trace id reaches the webhook`,
        );
        assert.notEqual(header.spanId, '00f067aa0ba902b7', `${name}: the attempt has a span id of its own`);
        assert.notEqual(header.spanId, onFrame.spanId);
        assert.equal(header.flags, '01');
        assert.equal(
          delivery.headers.tracestate,
          'rbx=t61rcWkgMzE,congo=lZWRzIHRoNhcm5hbCBwbGVhc3VyZS4',
          `${name}: tracestate passed on as it came`,
        );
      }
      assert.notEqual(
        parts(queued.headers.traceparent, 'queued').spanId,
        parts(sent.headers.traceparent, 'sent').spanId,
        'each attempt is a hop of its own',
      );
      // A later status of the message continues the same trace.
      await ctx.relay.report(frame.messageId, 'delivered');
      const delivered = await until<ReceivedDelivery>(
        'message.delivered delivered',
        async () =>
          ctx.receiver.received.find(
            (d) => d.json?.event === 'message.delivered' && d.json?.data?.id === frame.messageId,
          ),
        15_000,
      );
      assert.equal(
        parts(delivered.headers.traceparent, 'message.delivered delivery').traceId,
        '4bf92f3577b34da6a3ce929d0e0e4736',
      );
    });

    test('a request without traceparent starts a trace, which its relay send and webhook deliveries share', async () => {
      const ctx = await setUp();
      const { frame, queued, sent } = await sendThrough(ctx, {});
      const onFrame = parts(frame.traceparent, 'send frame');
      assert.equal(onFrame.flags, '00', 'not sampled: nothing recorded it');
      for (const delivery of [queued, sent]) {
        assert.equal(
          parts(delivery.headers.traceparent, 'delivery').traceId,
          onFrame.traceId,
          'one trace from the request to the relay and the webhook',
        );
        assert.equal(delivery.headers.tracestate, undefined);
      }
      const again = await sendThrough(ctx, {});
      assert.notEqual(
        parts(again.frame.traceparent, 'second send').traceId,
        onFrame.traceId,
        'each request starts a trace of its own',
      );
    });

    test('a malformed traceparent is ignored (a new trace, never an error), and so is the tracestate beside it', async () => {
      const ctx = await setUp();
      const malformed = [
        '00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01', // upper case
        '00-00000000000000000000000000000000-00f067aa0ba902b7-01', // trace id all zeros
        '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01', // span id all zeros
        'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', // version ff
        '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra', // version 00 with more fields
        '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01', // short trace id
        'not a traceparent',
      ];
      for (const traceparent of malformed) {
        const { frame, sent } = await sendThrough(ctx, {
          traceparent,
          tracestate: 'rbx=kept-only-with-a-valid-parent',
        });
        const onFrame = parts(frame.traceparent, `send frame after ${traceparent}`);
        assert.notEqual(onFrame.traceId, '4bf92f3577b34da6a3ce929d0e0e4736', `${traceparent}: not continued`);
        assert.equal(parts(sent.headers.traceparent, 'delivery').traceId, onFrame.traceId);
        assert.equal(sent.headers.tracestate, undefined, `${traceparent}: its tracestate is dropped too`);
      }
    });

    test('a later version of traceparent is read as version 00; a tracestate keeps only its well-formed members', async () => {
      const ctx = await setUp();
      const { frame, sent } = await sendThrough(ctx, {
        traceparent: 'cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-later',
        tracestate: 'rbx=ok, BAD KEY=x,vendor@tenant=v2',
      });
      assert.equal(parts(frame.traceparent, 'send frame').traceId, '4bf92f3577b34da6a3ce929d0e0e4736');
      assert.equal(sent.headers.tracestate, 'rbx=ok,vendor@tenant=v2');
    });

    test('the relay gateway gives send.traceparent to agents from 0.2 on, and leaves it out for older ones', async () => {
      const org = await signup(t);
      const connect = async (agentVersion: string) => {
        const made = await t.request('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`, { token: org.ownerToken });
        assert.equal(made.status, 201, made.text);
        const s = await RelaySocket.open(t.base);
        sockets.push(s);
        s.hello({ registrationToken: made.body.token }, { agentVersion });
        const welcome = await s.next('welcome');
        // Room for a message handed back from the other relay besides the one under test.
        s.send({ type: 'ready', capacity: 2 });
        return { s, relayId: welcome.relayId };
      };
      const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
      const sendOne = async (body: string) => {
        const res = await t.request('POST', '/api/v1/messages', {
          token: org.ownerToken,
          body: { to: '+14155550100', body },
          headers: { traceparent },
        });
        assert.equal(res.status, 201, res.text);
        return res.body.id as string;
      };
      const older = await connect('0.1.9');
      const first = await sendOne('to the older agent');
      const toOlder = await older.s.next('send', (f) => f.messageId === first, 10_000);
      assert.equal('traceparent' in toOlder, false, 'an agent before 0.2 refuses fields it does not know');
      older.s.close();
      await until(
        'the older relay offline',
        async () =>
          (await t.request('GET', `/api/v1/relays/${older.relayId}`, { token: org.ownerToken })).body.status ===
          'offline',
        10_000,
      );
      const newer = await connect('0.2.0');
      const second = await sendOne('to the newer agent');
      const toNewer = await newer.s.next('send', (f) => f.messageId === second, 10_000);
      assert.equal(parts(toNewer.traceparent, 'frame to 0.2.0').traceId, '0af7651916cd43dd8448eb211c80319c');
    });
  });
});

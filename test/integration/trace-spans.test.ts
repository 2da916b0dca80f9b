import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import type { SendFrame } from '../../src/relay-protocol/frames.ts';
import { startTracing, type Tracing } from '../../src/tracing/trace-export.ts';
import { eachBackend, signup, startTestApp, type TestApp } from '../support/test-app.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { until } from '../support/until.ts';
import { WebhookReceivers, type ReceivedDelivery } from '../support/webhook-receiver.ts';

const incomingTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
const incomingSpan = '00f067aa0ba902b7';

const spanIdOf = (traceparent: string | undefined) => traceparent?.split('-')[2];

eachBackend((backend) => {
  describe(`spans while tracing is on (${backend})`, () => {
    let t: TestApp;
    let tracing: Tracing;
    const exporter = new InMemorySpanExporter();
    const relays: StandInRelay[] = [];
    const receivers = new WebhookReceivers();

    before(async () => {
      tracing = startTracing(new SimpleSpanProcessor(exporter), { role: 'all', nodeId: 'test' });
      t = await startTestApp(backend, { WEBHOOK_ALLOW_PRIVATE: 'true' });
    });
    after(async () => {
      for (const r of relays) r.close();
      await t.stop();
      await receivers.stopAll();
      await tracing.stop();
    });

    const spans = (name: string): ReadableSpan[] =>
      exporter.getFinishedSpans().filter((s) => s.name === name && s.spanContext().traceId === incomingTrace);

    test('a request, the actor messages it causes, its relay send and its webhook attempt are one trace of parent and child spans', async () => {
      const org = await signup(t);
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 10 });
      relays.push(relay);
      await relay.connect();
      const receiver = await receivers.start();
      assert.equal(
        (
          await t.request('POST', '/api/v1/webhooks', {
            token: org.ownerToken,
            body: { url: receiver.url, events: ['message.sent'] },
          })
        ).status,
        201,
      );
      // A first send reaches the relay: from then on the tenant actor holds the relay's credits, so the next one is handed over from its enqueue.
      const warm = await t.request('POST', '/api/v1/messages', {
        token: org.ownerToken,
        body: { to: '+14155550100', body: 'first' },
      });
      await until('the first send frame', async () => relay.sends.some((f) => f.messageId === warm.body.id), 10_000);

      const res = await t.request('POST', '/api/v1/messages', {
        token: org.ownerToken,
        body: { to: '+14155550100', body: 'traced' },
        headers: { traceparent: `00-${incomingTrace}-${incomingSpan}-01` },
      });
      assert.equal(res.status, 201, res.text);
      const frame = await until<SendFrame>(
        'the send frame',
        async () => relay.sends.find((f) => f.messageId === res.body.id),
        10_000,
      );
      await relay.report(res.body.id, 'sent');
      const delivery = await until<ReceivedDelivery>(
        'the webhook delivery',
        async () => receiver.received.find((d) => d.json?.data?.id === res.body.id),
        15_000,
      );
      await until('the webhook span', async () => spans('webhook POST').length > 0, 5_000);

      const [server] = spans('POST /api/v1/messages');
      assert.ok(server, 'a server span for the request');
      assert.equal(server.kind, SpanKind.SERVER);
      assert.equal(server.parentSpanContext?.spanId, incomingSpan, "the server span is the caller's child");
      assert.equal(server.attributes['http.response.status_code'], 201);
      assert.equal(server.attributes['http.route'], '/api/v1/messages');

      const [send] = spans('relay send');
      assert.ok(send, 'a span for the relay send');
      assert.equal(send.kind, SpanKind.PRODUCER);
      assert.equal(spanIdOf(frame.traceparent), send.spanContext().spanId, 'the frame carries the relay send span');
      assert.equal(
        send.parentSpanContext?.spanId,
        server.spanContext().spanId,
        'the send continues the request that stored the message',
      );

      const [attempt] = spans('webhook POST');
      assert.ok(attempt, 'a client span per webhook attempt');
      assert.equal(attempt.kind, SpanKind.CLIENT);
      assert.equal(
        spanIdOf(delivery.headers.traceparent),
        attempt.spanContext().spanId,
        'the delivery carries the attempt span',
      );
      assert.equal(
        attempt.parentSpanContext?.spanId,
        server.spanContext().spanId,
        "the message's event continues the request's trace",
      );
      assert.equal(attempt.attributes['http.response.status_code'], 200);

      const [enqueue] = spans('tenant enqueue');
      assert.ok(enqueue, 'a span for the actor message the request sent');
      assert.equal(enqueue.kind, SpanKind.CONSUMER);
      assert.equal(enqueue.parentSpanContext?.spanId, server.spanContext().spanId);
      const deliver = spans('relay deliver').find((s) => s.parentSpanContext?.spanId === enqueue.spanContext().spanId);
      assert.ok(deliver, 'the hand-over to the relay actor continues the tenant actor span');
    });

    test('actor messages without a trace (relay heartbeats, timers) make no span', async () => {
      const org = await signup(t);
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 1 });
      relays.push(relay);
      await relay.connect();
      exporter.reset();
      await relay.heartbeat();
      await relay.heartbeat();
      // The heartbeats are handled in order with a message that is traced: once its span is in, they were handled.
      const res = await t.request('POST', '/api/v1/messages', {
        token: org.ownerToken,
        body: { to: '+14155550100', body: 'x' },
        headers: { traceparent: `00-${incomingTrace}-${incomingSpan}-01` },
      });
      assert.equal(res.status, 201);
      await until('the relay send span', async () => spans('relay send').length > 0, 10_000);
      assert.deepEqual(
        exporter.getFinishedSpans().filter((s) => s.name === 'relay heartbeat'),
        [],
      );
    });
  });
});

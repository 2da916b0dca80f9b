import assert from 'node:assert/strict';
import { test } from 'node:test';
import { payloadTimestamp } from '../../src/webhooks/webhook-metrics.ts';
import { deliveryPayload } from '../../src/webhooks/webhook-router.ts';

test("a delivery's event time is read from its payload's head, whatever its data holds", () => {
  const at = '2026-12-06T21:40:00.123Z';
  const data = { timestamp: '1999-01-01T00:00:00.000Z', body: '","timestamp":"2000-01-01T00:00:00.000Z"' };
  for (const livemode of [true, false]) {
    const payload = deliveryPayload({ event: 'message.sent', timestamp: at, data }, livemode);
    assert.equal(payloadTimestamp(payload), at);
    assert.equal(payloadTimestamp(payload), (JSON.parse(payload) as { timestamp: string }).timestamp);
  }
});

test('a payload of another shape is parsed whole; one that is not JSON has no time', () => {
  assert.equal(payloadTimestamp('{"timestamp":"2026-12-06T00:00:00.000Z","event":"x"}'), '2026-12-06T00:00:00.000Z');
  assert.equal(
    payloadTimestamp('{"event":"a\\",\\"timestamp\\":\\"x","timestamp":"2026-12-06T00:00:01.000Z"}'),
    '2026-12-06T00:00:01.000Z',
  );
  assert.equal(payloadTimestamp('{"event":"message.sent"}'), undefined);
  assert.equal(payloadTimestamp('not json'), undefined);
});

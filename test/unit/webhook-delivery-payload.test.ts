import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deliveryPayload, deliveryPayloadTime } from '../../src/webhooks/delivery-payload.ts';

test("a delivery's event time is read from its payload's head, whatever its data holds", () => {
  const at = '2026-12-06T21:40:00.123Z';
  const data = { timestamp: '1999-01-01T00:00:00.000Z', body: '","timestamp":"2000-01-01T00:00:00.000Z"' };
  for (const livemode of [true, false]) {
    const payload = deliveryPayload({ event: 'message.sent', timestamp: at, data }, livemode);
    assert.equal(deliveryPayloadTime(payload), at);
    assert.equal(deliveryPayloadTime(payload), (JSON.parse(payload) as { timestamp: string }).timestamp);
  }
});

test('a payload of another shape is parsed whole; one that is not JSON has no time', () => {
  assert.equal(deliveryPayloadTime('{"timestamp":"2026-12-06T00:00:00.000Z","event":"x"}'), '2026-12-06T00:00:00.000Z');
  assert.equal(
    deliveryPayloadTime('{"event":"a\\",\\"timestamp\\":\\"x","timestamp":"2026-12-06T00:00:01.000Z"}'),
    '2026-12-06T00:00:01.000Z',
  );
  assert.equal(deliveryPayloadTime('{"event":"message.sent"}'), undefined);
  assert.equal(deliveryPayloadTime('not json'), undefined);
});

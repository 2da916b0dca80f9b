/** The webhook payload of spec section 6: {event, timestamp, livemode, data}; `livemode` is false for the organization's test data. */
export function deliveryPayload(
  e: { event: string; timestamp: string; data: Record<string, unknown> },
  livemode: boolean,
): string {
  return JSON.stringify({ event: e.event, timestamp: e.timestamp, livemode, data: e.data });
}

/** What `deliveryPayload` starts with: the event's name, then its time. */
const payloadHead = '{"event":"';
const timeKey = '","timestamp":"';

/**
 * The event's time in a delivery's payload, read from the payload's head
 * without parsing the rest (the event's data can be large); a payload of
 * another shape is parsed whole.
 */
export function deliveryPayloadTime(payload: string): unknown {
  if (payload.startsWith(payloadHead)) {
    // An event's name is a plain word (message.sent): the first time key is the payload's own, never one in its data.
    const key = payload.indexOf(timeKey, payloadHead.length);
    const end = key < 0 ? -1 : payload.indexOf('"', key + timeKey.length);
    if (end > 0 && !payload.slice(payloadHead.length, key).includes('"'))
      return payload.slice(key + timeKey.length, end);
  }
  try {
    return (JSON.parse(payload) as { timestamp?: unknown }).timestamp;
  } catch {
    return undefined;
  }
}

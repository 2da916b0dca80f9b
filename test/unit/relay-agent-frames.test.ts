import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agentFrame, frameLimits, helloFrame, serverFrame, statusFrame } from '../../src/relay-protocol/frames.ts';
import { parseFrame } from '../../src/relay-protocol/frame-parser.ts';
import { acceptsTraceparent } from '../../src/ws/agent-versions.ts';

const systemInfo = { hostOsVersion: 'macOS 14.5', hostname: 'mac-mini' };
const hello = { type: 'hello', name: 'Front desk', systemInfo, agentVersion: '0.1.0' };
const json = (value: unknown) => JSON.stringify(value);

test('every agent frame of the protocol is accepted', () => {
  const frames = [
    { ...hello, registrationToken: 'rtok_1' },
    { ...hello, credential: { relayId: 'rly_1', secret: 's3cret' } },
    {
      type: 'heartbeat',
      health: { cpuPercent: 12.5, memoryUsedBytes: 1024, memoryTotalBytes: 4096, messagesPerMinute: 3, queueDepth: 0 },
    },
    { type: 'ready', capacity: 0 },
    { type: 'ready', capacity: 1000 },
    {
      type: 'status',
      messageId: 'msg_1',
      attempt: 1,
      status: 'delivered',
      at: '2024-05-01T10:00:00.000Z',
      guid: 'ABC-123',
    },
    {
      type: 'status',
      messageId: 'msg_1',
      attempt: 1,
      status: 'failed',
      at: '2024-05-01T10:00:00Z',
      error: 'Messages reported error 22',
    },
    {
      type: 'inbound',
      rowId: 42,
      guid: 'G',
      from: '+15551234567',
      chatGuid: 'iMessage;-;+15551234567',
      isGroup: false,
      body: 'hi',
      receivedAt: '2024-05-01T10:00:00Z',
      attachments: ['/a.png'],
    },
  ];
  for (const frame of frames) {
    const parsed = parseFrame(json(frame), agentFrame);
    assert.equal(parsed.ok, true, `${frame.type}: ${parsed.ok ? '' : parsed.error}`);
  }
});

test('every server frame of the protocol is accepted', () => {
  const frames = [
    {
      type: 'welcome',
      relayId: 'rly_1',
      credential: { relayId: 'rly_1', secret: 's' },
      inboundCursor: 0,
      heartbeatIntervalMs: 10_000,
    },
    { type: 'welcome', relayId: 'rly_1', inboundCursor: 17, heartbeatIntervalMs: 10_000 },
    {
      type: 'send',
      messageId: 'msg_1',
      attempt: 1,
      to: '+15551234567',
      body: 'hello',
      attachments: ['https://example.com/a.png'],
      fromNumber: '+15550000000',
    },
    { type: 'send', messageId: 'msg_1', attempt: 1, to: 'a@example.com' },
    {
      type: 'send',
      messageId: 'msg_1',
      attempt: 1,
      to: 'a@example.com',
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    },
    { type: 'ack', of: 'inbound', cursor: 42 },
    { type: 'ack', of: 'status', messageId: 'msg_1', attempt: 1 },
    { type: 'error', code: 'unauthorized', message: 'bad token' },
  ];
  for (const frame of frames) {
    const parsed = parseFrame(json(frame), serverFrame);
    assert.equal(parsed.ok, true, `${frame.type}: ${parsed.ok ? '' : parsed.error}`);
  }
});

test('hello needs exactly one of registrationToken and credential', () => {
  const neither = parseFrame(json(hello), helloFrame);
  const both = parseFrame(
    json({ ...hello, registrationToken: 't', credential: { relayId: 'r', secret: 's' } }),
    agentFrame,
  );
  for (const result of [neither, both]) {
    assert.equal(result.ok, false);
    if (!result.ok) assert.match(result.error, /exactly one of registrationToken or credential/);
  }
});

test('malformed frames are refused with a reason naming the problem', () => {
  const cases: Array<[unknown, RegExp, typeof agentFrame | typeof serverFrame]> = [
    [{ type: 'ready', capacity: 1001 }, /capacity/, agentFrame],
    [{ type: 'ready', capacity: 1.5 }, /capacity/, agentFrame],
    [
      { type: 'status', messageId: 'm', attempt: 1, status: 'queued', at: '2024-05-01T10:00:00Z' },
      /status/,
      agentFrame,
    ],
    [{ type: 'status', messageId: 'm', attempt: 1, status: 'sent', at: 'yesterday' }, /at.*date-time/, agentFrame],
    [
      { type: 'status', messageId: 'm', attempt: 1, status: 'sent', at: '2024-05-01T10:00:00Z', extra: 1 },
      /unknown field extra/,
      agentFrame,
    ],
    [
      { type: 'inbound', rowId: 0, guid: 'g', from: 'f', isGroup: false, body: '', receivedAt: '2024-05-01T10:00:00Z' },
      /rowId/,
      agentFrame,
    ],
    [
      {
        type: 'heartbeat',
        health: { cpuPercent: 1, memoryUsedBytes: 1.5, memoryTotalBytes: 1, messagesPerMinute: 0, queueDepth: 0 },
      },
      /memoryUsedBytes/,
      agentFrame,
    ],
    [
      { type: 'send', messageId: 'm', attempt: 1, to: 'x', body: 'b'.repeat(frameLimits.bodyLength + 1) },
      /body/,
      serverFrame,
    ],
    [
      {
        type: 'send',
        messageId: 'm',
        attempt: 1,
        to: 'x',
        attachments: Array(frameLimits.attachments + 1).fill('https://e.com/a'),
      },
      /attachments/,
      serverFrame,
    ],
    [{ type: 'send', messageId: '', attempt: 1, to: 'x' }, /messageId/, serverFrame],
    [{ type: 'send', messageId: 'm', to: 'x' }, /attempt/, serverFrame],
    [{ type: 'send', messageId: 'm', attempt: 0, to: 'x' }, /attempt/, serverFrame],
    [{ type: 'status', messageId: 'm', status: 'sent', at: '2024-05-01T10:00:00Z' }, /attempt/, agentFrame],
    [
      { type: 'status', messageId: 'm', attempt: 1.5, status: 'sent', at: '2024-05-01T10:00:00Z' },
      /attempt/,
      agentFrame,
    ],
    [{ type: 'ack', of: 'everything' }, /of/, serverFrame],
    [{ type: 'welcome', relayId: 'r', inboundCursor: -1, heartbeatIntervalMs: 1000 }, /inboundCursor/, serverFrame],
    [{ type: 'teleport' }, /unknown frame type "teleport"/, serverFrame],
    [
      { type: 'hello', registrationToken: 't', name: 'n', systemInfo, agentVersion: '1' },
      /unknown frame type "hello"/,
      serverFrame,
    ],
  ];
  for (const [frame, reason, schema] of cases) {
    const parsed = parseFrame(json(frame), schema);
    assert.equal(parsed.ok, false, json(frame).slice(0, 120));
    if (!parsed.ok) assert.match(parsed.error, reason);
  }
});

test('text that is not JSON, or too large, is refused without throwing', () => {
  const notJson = parseFrame('{"type":', statusFrame);
  assert.deepEqual(notJson, { ok: false, error: 'frame is not valid JSON' });
  const huge = parseFrame(' '.repeat(frameLimits.maxFrameBytes + 1), statusFrame);
  assert.equal(huge.ok, false);
});

test('every string in the frame schemas has a maxLength and every array a maxItems', () => {
  const walk = (schema: Record<string, unknown>, path: string) => {
    if (schema.type === 'string' && schema.const === undefined)
      assert.ok(typeof schema.maxLength === 'number', `${path} has no maxLength`);
    if (schema.type === 'array') assert.ok(typeof schema.maxItems === 'number', `${path} has no maxItems`);
    if (schema.type === 'object') assert.equal(schema.additionalProperties, false, `${path} allows unknown fields`);
    for (const [key, child] of Object.entries(schema)) {
      if (child && typeof child === 'object') walk(child as Record<string, unknown>, `${path}.${key}`);
    }
  };
  walk(agentFrame as unknown as Record<string, unknown>, 'agentFrame');
  walk(serverFrame as unknown as Record<string, unknown>, 'serverFrame');
});

test('send.traceparent goes to agents from 0.2 on: older agents, and versions that do not read as major.minor, do not get it', () => {
  for (const version of ['0.2.0', '0.2', '0.10.1', '1.0.0', '2.0.0-beta.1'])
    assert.equal(acceptsTraceparent(version), true, version);
  for (const version of ['0.1.0', '0.1.99', '0', '', 'dev', 'v0.2.0'])
    assert.equal(acceptsTraceparent(version), false, version);
});

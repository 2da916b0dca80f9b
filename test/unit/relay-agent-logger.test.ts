import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { createAgentLogger } from '../../packages/relay-agent/src/agent-logger.ts';
import { OperatorLog } from '../../packages/relay-agent/src/operator-log.ts';
import type { SendRecord } from '../../packages/relay-agent/src/send-journal.ts';

function capture(): { stream: PassThrough; lines: () => string[] } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (c: Buffer) => (text += c.toString()));
  return { stream, lines: () => text.split('\n').filter(Boolean) };
}

const record: SendRecord = {
  messageId: 'msg_1',
  attempt: 2,
  to: '+15551234567',
  body: 'secret words',
  attachmentUrls: [],
  phase: 'queued',
  acceptedAtMs: 0,
  phaseAtMs: 0,
  steps: [],
  acked: 0,
};

test('pretty lines: time, level and the sentence; detail fields only on lines that are not operator events', () => {
  const out = capture();
  const logger = createAgentLogger('info', 'pretty', out.stream);
  const operator = new OperatorLog(logger);
  operator.sendAccepted(record, 1);
  operator.step(record, { status: 'failed', at: '2024-05-01T10:00:00.000Z', error: 'Messages reported error 1' });
  logger.warn({ error: 'bad frame', relayId: 'rly_1' }, 'invalid frame from server ignored');
  logger.debug('not shown at info');
  const [accepted, failed, other, ...rest] = out.lines();
  assert.match(accepted!, /^\[\d\d:\d\d:\d\d\] INFO: send msg_1 attempt 2 to \+1555•••4567 accepted \(1 waiting\)$/);
  assert.match(failed!, /^\[\d\d:\d\d:\d\d\] WARN: send msg_1 attempt 2 failed: Messages reported error 1$/);
  assert.match(
    other!,
    /^\[\d\d:\d\d:\d\d\] WARN: invalid frame from server ignored \(error=bad frame, relayId=rly_1\)$/,
  );
  assert.deepEqual(rest, []);
  assert.doesNotMatch(out.lines().join('\n'), /secret words/);
});

test('json lines carry the event and the ids in their own fields; the summary counts per interval', () => {
  const out = capture();
  const operator = new OperatorLog(createAgentLogger('info', 'json', out.stream));
  operator.sendAccepted(record, 0, '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
  operator.step(record, { status: 'sent', at: 'x' });
  operator.step(record, { status: 'delivered', at: 'y' });
  operator.inboundForwarded({
    type: 'inbound',
    rowId: 9,
    guid: 'G',
    from: '+15550000000',
    isGroup: false,
    body: 'hi',
    receivedAt: '2024-05-01T10:00:00.000Z',
  });
  operator.summary({ relayId: 'rly_1', connected: true, queued: 0, unfinished: 0, inboundUnacked: 1 });
  operator.summary({ relayId: 'rly_1', connected: true, queued: 0, unfinished: 0, inboundUnacked: 0 });
  const lines = out.lines().map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(
    lines.map((l) => l.event),
    ['send.accepted', 'send.sent', 'send.delivered', 'inbound.forwarded', 'summary', 'summary'],
  );
  assert.equal(
    lines[0]!.traceparent,
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    "the send frame's trace context, to find the send from the server's trace",
  );
  assert.equal(lines[1]!.traceparent, undefined);
  assert.deepEqual([lines[2]!.messageId, lines[2]!.attempt, lines[2]!.status], ['msg_1', 2, 'delivered']);
  assert.equal(lines[3]!.rowId, 9);
  assert.equal(lines[3]!.body, undefined, 'no message body');
  const pick = (l: Record<string, unknown>) => [l.accepted, l.sent, l.delivered, l.failed, l.inbound];
  assert.deepEqual(pick(lines[4]!), [1, 1, 1, 0, 1]);
  assert.deepEqual(pick(lines[5]!), [0, 0, 0, 0, 0], 'a new interval starts at zero');
  assert.match(
    String(lines[4]!.msg),
    /^online as rly_1; last \d+ ms: 1 accepted, 1 sent, 1 delivered, 0 failed, 1 received; now 0 waiting, 0 with Messages$/,
  );
});

const inbound = {
  type: 'inbound',
  rowId: 9,
  guid: 'G',
  from: 'jane.doe@example.com',
  isGroup: true,
  chatGuid: 'iMessage;+;chat42',
  body: 'meet at 6',
  receivedAt: '2024-05-01T10:00:00.000Z',
} as const;

test('handles are masked in every field and sentence, in both formats; bodies are never logged', () => {
  for (const format of ['json', 'pretty'] as const) {
    const out = capture();
    const logger = createAgentLogger('info', format, out.stream);
    const operator = new OperatorLog(logger);
    operator.sendAccepted(record, 0);
    operator.inboundForwarded(inbound);
    logger.warn(
      {
        error: 'Can\'t get buddy "+447700900123"',
        nested: { to: ['+33612345678', '+1 (415) 555-0123'] },
        body: 'secret words',
      },
      'osascript failed for +15551234567',
    );
    const text = out.lines().join('\n');
    assert.doesNotMatch(text, /15551234567|jane\.doe|447700900123|33612345678/, text);
    assert.doesNotMatch(text, /secret words|meet at 6/);
    assert.match(text, /\+1555•••4567/);
    assert.match(text, /j•••@example\.com/);
    if (format === 'json') {
      const [accepted, forwarded, failed] = out.lines().map((l) => JSON.parse(l) as Record<string, unknown>);
      assert.equal(accepted!.to, '+1555•••4567');
      assert.equal(forwarded!.from, 'j•••@example.com');
      assert.equal(failed!.error, 'Can\'t get buddy "+4477•••0123"');
      assert.deepEqual(failed!.nested, { to: ['+3361•••5678', '+1415•••0123'] });
      assert.equal(failed!.body, '[redacted]');
      assert.equal(failed!.msg, 'osascript failed for +1555•••4567');
    }
  }
});

test('--log-handles logs handles in full for a support session, still without bodies', () => {
  const out = capture();
  const logger = createAgentLogger('info', 'json', out.stream, { logHandles: true });
  new OperatorLog(logger).inboundForwarded(inbound);
  logger.info({ body: 'secret words' }, 'send to +15551234567');
  const [forwarded, other] = out.lines().map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.equal(forwarded!.from, 'jane.doe@example.com');
  assert.equal(other!.msg, 'send to +15551234567');
  assert.equal(other!.body, '[redacted]');
});

/**
 * How the relay agent turns chat.db rows into frames: a tapback names its
 * target by guid, and by our message id when the agent sent it; a reply names
 * the message it answers; an edit or unsend becomes a change frame. Every
 * frame passes the protocol's own validation.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ChatRow } from '../../packages/relay-agent/src/chat-db-reader.ts';
import { toChangeFrame, toInboundFrame } from '../../packages/relay-agent/src/inbound-forwarder.ts';
import { agentFrame, frameLimits, serverFrame } from '../../src/relay-protocol/frames.ts';
import { parseFrame } from '../../src/relay-protocol/frame-parser.ts';

function row(over: Partial<ChatRow> = {}): ChatRow {
  return {
    rowId: 7,
    guid: 'ROW-GUID',
    isFromMe: false,
    body: 'Loved a message',
    handle: '+14155550100',
    chatGuid: 'iMessage;-;+14155550100',
    isGroup: false,
    dateMs: Date.UTC(2026, 0, 2),
    dateDeliveredMs: undefined,
    dateReadMs: undefined,
    isDelivered: true,
    isRead: false,
    isSent: false,
    error: 0,
    service: 'iMessage',
    attachments: [],
    ...over,
  };
}

const ours = (guid: string) => (guid === 'OUR-GUID' ? 'msg_ours' : undefined);

function valid(frame: unknown): void {
  const parsed = parseFrame(JSON.stringify(frame), agentFrame);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.error);
}

test('a tapback on our message carries our message id; on another message, its guid only', () => {
  const love = toInboundFrame(row({ reaction: { kind: 'love', targetGuid: 'OUR-GUID', removed: false } }), ours);
  assert.deepEqual(love?.reaction, { kind: 'love', guid: 'OUR-GUID', messageId: 'msg_ours', removed: false });
  valid(love);
  const emoji = toInboundFrame(
    row({ body: '', reaction: { kind: 'emoji', targetGuid: 'THEIR-GUID', emoji: '🌮', removed: true } }),
    ours,
  );
  assert.deepEqual(emoji?.reaction, { kind: 'emoji', guid: 'THEIR-GUID', removed: true, emoji: '🌮' });
  assert.equal(emoji?.body, '', 'a tapback is forwarded even without a text');
  valid(emoji);
  assert.equal(
    toInboundFrame(
      row({ reaction: { kind: 'like', targetGuid: 'x'.repeat(frameLimits.guidLength + 1), removed: false } }),
    ),
    undefined,
    'a target guid past the limit cannot be named: the row is skipped',
  );
  assert.equal(toInboundFrame(row({ body: '' })), undefined, 'an empty ordinary row is still skipped');
});

test('a reply names the message it answers', () => {
  const reply = toInboundFrame(row({ body: 'yes', replyToGuid: 'OUR-GUID' }), ours);
  assert.deepEqual(reply?.replyTo, { guid: 'OUR-GUID', messageId: 'msg_ours' });
  assert.equal(reply?.reaction, undefined);
  valid(reply);
  assert.deepEqual(toInboundFrame(row({ body: 'yes', replyToGuid: 'THEIR-GUID' }), ours)?.replyTo, {
    guid: 'THEIR-GUID',
  });
  assert.equal(toInboundFrame(row({ body: 'plain' }))?.replyTo, undefined);
});

test('an edit carries the text as edited; an unsend wins over an earlier edit; an unchanged row is no change', () => {
  const editedAt = Date.UTC(2026, 0, 2, 10);
  const edited = toChangeFrame(row({ body: 'new text', dateEditedMs: editedAt }));
  assert.deepEqual(edited, {
    type: 'change',
    rowId: 7,
    guid: 'ROW-GUID',
    change: 'edited',
    at: new Date(editedAt).toISOString(),
    body: 'new text',
  });
  valid(edited);
  const unsent = toChangeFrame(row({ body: '', dateEditedMs: editedAt, dateRetractedMs: editedAt + 5 }));
  assert.deepEqual(unsent, {
    type: 'change',
    rowId: 7,
    guid: 'ROW-GUID',
    change: 'unsent',
    at: new Date(editedAt + 5).toISOString(),
  });
  valid(unsent);
  assert.equal(toChangeFrame(row()), undefined);
});

test("the server's ack of a change, and fields an older server refuses, are in the protocol", () => {
  const ack = parseFrame(
    JSON.stringify({ type: 'ack', of: 'change', guid: 'ROW-GUID', at: '2026-01-02T10:00:00.000Z' }),
    serverFrame,
  );
  assert.ok(ack.ok);
  const bad = parseFrame(
    JSON.stringify({
      ...toInboundFrame(row({ reaction: { kind: 'love', targetGuid: 'G', removed: false } })),
      reaction: { kind: 'hug', guid: 'G', removed: false },
    }),
    agentFrame,
  );
  assert.equal(bad.ok, false, 'an unknown tapback kind is refused');
});

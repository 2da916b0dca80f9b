/**
 * ChatDbReader, unchanged, against a chat.db written by the simulator: the
 * reading path the Mac runs, exercised on any machine.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'libsql';
import { createAgentLogger } from '../../packages/relay-agent/src/agent-logger.ts';
import { encodeAttributedBody } from '../../packages/relay-agent/src/attributed-body.ts';
import { ChatDbReader } from '../../packages/relay-agent/src/chat-db-reader.ts';
import { OutgoingTracker } from '../../packages/relay-agent/src/outgoing-tracker.ts';
import { SendJournal, type SendRecord } from '../../packages/relay-agent/src/send-journal.ts';
import {
  SimulatedMessagesApp,
  simulateFailures,
  simulateInbound,
  simulateEdit,
  simulateGroupEvent,
  simulateReaction,
  simulateReply,
  simulateSmsOnly,
  simulateUnsend,
} from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { toChangeFrame, toInboundFrame } from '../../packages/relay-agent/src/inbound-forwarder.ts';
import { ChatDbError, openSqliteFile } from '../../packages/relay-agent/src/sqlite-file.ts';

async function setup(t: TestContext, options: { deliveryDelayMs?: number; readDelayMs?: number } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-chatdb-'));
  const dbPath = join(dir, 'chat.db');
  const app = await SimulatedMessagesApp.open(dbPath, options);
  const reader = new ChatDbReader(dbPath);
  t.after(async () => {
    await reader.close();
    await app.close();
    await rm(dir, { recursive: true, force: true });
  });
  const journal = new SendJournal(join(dir, 'state'), 60_000);
  const tracker = new OutgoingTracker(journal, reader, { matchWindowMs: 5_000, trackStatusMs: 60_000 });
  await tracker.init();
  /** Sends through the simulator the way SendWorker does: `sending` on record first, `handed` after. */
  const send = async (messageId: string, to: string, body: string): Promise<SendRecord> => {
    const now = Date.now();
    const record: SendRecord = {
      messageId,
      attempt: 1,
      to,
      body,
      attachmentUrls: [],
      phase: 'queued',
      acceptedAtMs: now,
      phaseAtMs: now,
      steps: [],
      acked: 0,
    };
    journal.add(record);
    journal.setPhase(record, 'sending');
    assert.deepEqual(await app.send({ messageId, attempt: 1, to, body, attachmentPaths: [] }), { ok: true });
    if (record.phase === 'sending') journal.setPhase(record, 'handed');
    return record;
  };
  return { dir, dbPath, app, reader, journal, tracker, send };
}

const statuses = (record: SendRecord) => record.steps.map((s) => s.status);

test('an outgoing row goes sent → delivered → read, matched to its send by recipient and text', async (t) => {
  const { tracker, send, reader } = await setup(t, { deliveryDelayMs: 150, readDelayMs: 150 });
  const record = await send('msg_1', '+1 (555) 000-2222', 'Status check');
  assert.deepEqual(await tracker.poll(), [record]);
  assert.deepEqual(statuses(record), ['sent']);
  assert.equal(record.phase, 'tracking');
  const [row] = await reader.readRows([record.rowId!]);
  assert.equal(record.guid, row!.guid);
  assert.equal(row!.handle, '+15550002222');
  await sleep(200);
  await tracker.poll();
  assert.deepEqual(statuses(record), ['sent', 'delivered']);
  await sleep(200);
  await tracker.poll();
  assert.deepEqual(statuses(record), ['sent', 'delivered', 'read']);
  assert.equal(record.phase, 'closed');
  const times = record.steps.map((s) => s.at);
  assert.deepEqual([...times].sort(), times, 'step times never go backwards');
});

test('a row in a group chat is never reported read: Messages sends no read receipts there', async (t) => {
  const { tracker, send, dbPath } = await setup(t, { deliveryDelayMs: 10_000 });
  const record = await send('msg_group', '+15550002323', 'to the group');
  await tracker.poll();
  const db = openSqliteFile(dbPath, 'readwrite');
  // The row as Messages writes one in a group chat, delivered and with read fields set.
  db.prepare(
    "UPDATE message SET cache_roomnames = 'chat123', is_delivered = 1, date_delivered = 1, is_read = 1, date_read = 1 WHERE ROWID = ?",
  ).run(record.rowId);
  db.close();
  await tracker.poll();
  assert.deepEqual(statuses(record), ['sent', 'delivered']);
  assert.equal(record.phase, 'closed', 'nothing more to wait for');
});

test('an injected failure gives a failed status and is never delivered', async (t) => {
  const { tracker, send, dbPath } = await setup(t, { deliveryDelayMs: 50 });
  await simulateFailures(dbPath, 1);
  const failed = await send('msg_f', 'someone@example.com', 'doomed');
  const fine = await send('msg_ok', 'someone@example.com', 'fine');
  await sleep(120);
  await tracker.poll();
  assert.deepEqual(statuses(failed), ['failed']);
  assert.match(failed.steps[0]!.error!, /Messages reported error 1/);
  assert.equal(failed.phase, 'closed');
  assert.deepEqual(statuses(fine), ['sent', 'delivered']);
});

test('an error code is mapped to its reason, also when it reaches a row already sent; never-delivered rows stay sent; SMS rows say so', async (t) => {
  const { tracker, send, dbPath } = await setup(t, { deliveryDelayMs: 50 });
  await simulateFailures(dbPath, 1, { error: 22 });
  await simulateFailures(dbPath, 1, { error: 3 });
  await simulateFailures(dbPath, 1, { error: 42 });
  await simulateFailures(dbPath, 2, { neverDeliver: true });
  await simulateSmsOnly(dbPath, '+1 555 000 3333');
  const unregistered = await send('msg_22', '+15550001111', 'a');
  const network = await send('msg_3', '+15550001111', 'b');
  const unknown = await send('msg_42', '+15550001111', 'c');
  const silent = await send('msg_silent', '+15550001111', 'd');
  const late = await send('msg_late', '+15550001111', 'e');
  const sms = await send('msg_sms', '+15550003333', 'f');
  await sleep(120);
  await tracker.poll();
  assert.deepEqual(
    [unregistered, network, unknown].map((r) => [r.steps.map((s) => `${s.status}:${s.reason}`), r.phase]),
    [
      [['failed:not_registered'], 'closed'],
      [['failed:network'], 'closed'],
      [['failed:unknown_42'], 'closed'],
    ],
  );
  assert.match(unregistered.steps[0]!.error!, /error 22: the recipient is not registered with iMessage/);
  assert.deepEqual([statuses(silent), statuses(late), statuses(sms)], [['sent'], ['sent'], ['sent', 'delivered']]);
  assert.deepEqual([silent.service, sms.service], ['iMessage', 'SMS']);
  // Messages writes the error on a row it showed as sent: sent, then failed with the reason.
  const db = openSqliteFile(dbPath, 'readwrite');
  db.prepare('UPDATE message SET error = 3 WHERE ROWID = ?').run(late.rowId!);
  db.close();
  await tracker.poll();
  assert.deepEqual(
    late.steps.map((s) => `${s.status}:${s.reason}`),
    ['sent:undefined', 'failed:network'],
  );
  assert.deepEqual(statuses(silent), ['sent'], 'never delivered');
});

test('tapbacks are read as reactions on their target, emoji and removals included, in the one ROWID order of the inbound cursor', async (t) => {
  const { reader, dbPath } = await setup(t);
  const target = await simulateInbound(dbPath, { from: '+15550004444', body: 'lunch?' });
  const love = await simulateReaction(dbPath, { from: '+15550004444', targetGuid: target.guid, tapback: 'love' });
  const emoji = await simulateReaction(dbPath, {
    from: '+15550004444',
    targetGuid: target.guid,
    tapback: 'emoji',
    emoji: '🌮',
  });
  await simulateReaction(dbPath, {
    from: '+15550004444',
    targetGuid: target.guid,
    tapback: 'emoji',
    emoji: '🌮',
    removed: true,
  });
  const rows = await reader.readReactions(0, 10);
  assert.deepEqual(
    rows.map((r) => [r.handle, r.reaction]),
    [
      ['+15550004444', { kind: 'love', targetGuid: target.guid, removed: false }],
      ['+15550004444', { kind: 'emoji', targetGuid: target.guid, removed: false, emoji: '🌮' }],
      ['+15550004444', { kind: 'emoji', targetGuid: target.guid, removed: true, emoji: '🌮' }],
    ],
  );
  assert.deepEqual(
    (await reader.readReactions(love.rowId, 10)).map((r) => r.guid),
    [emoji.guid, rows[2]!.guid],
    'after a cursor',
  );
  assert.deepEqual(
    (await reader.readIncoming(0, 10)).map((r) => [r.guid, r.reaction?.kind]),
    [
      [target.guid, undefined],
      [love.guid, 'love'],
      [emoji.guid, 'emoji'],
      [rows[2]!.guid, 'emoji'],
    ],
    'the inbound cursor reads received messages and tapbacks in one ROWID order',
  );
});

test('a reply names the message it answers; an edit and an unsend are read by their time, oldest first', async (t) => {
  const { reader, dbPath } = await setup(t);
  const first = await simulateInbound(dbPath, { from: '+15550006666', body: 'lunch?' });
  const reply = await simulateReply(dbPath, { from: '+15550006666', body: 'at noon', replyToGuid: first.guid });
  const [, read] = await reader.readIncoming(0, 10);
  assert.equal(read!.guid, reply.guid);
  assert.equal(read!.replyToGuid, first.guid);
  assert.equal(read!.dateEditedMs, undefined);

  const before = Date.now();
  assert.deepEqual(await reader.readChanged(before - 1_000, 10), [], 'nothing changed yet');
  assert.ok(await simulateEdit(dbPath, { guid: first.guid, body: 'lunch at 1?' }));
  await sleep(5);
  assert.ok(await simulateUnsend(dbPath, reply.guid));
  assert.equal(await simulateEdit(dbPath, { guid: 'NO-SUCH-GUID', body: 'x' }), false);
  const changed = await reader.readChanged(before - 1_000, 10);
  assert.deepEqual(
    changed.map((r) => [r.guid, r.body, r.dateEditedMs !== undefined, r.dateRetractedMs !== undefined]),
    [
      [first.guid, 'lunch at 1?', true, false],
      [reply.guid, '', false, true],
    ],
  );
  assert.ok(changed[0]!.dateEditedMs! >= before - 5 && changed[0]!.dateEditedMs! <= Date.now());
  assert.deepEqual(
    (await reader.readChanged(changed[1]!.dateRetractedMs!, 10)).map((r) => r.guid),
    [reply.guid],
    'a change at the cursor time is read again (the server makes its event once)',
  );
  assert.deepEqual(await reader.readChanged(changed[1]!.dateRetractedMs! + 1, 10), []);
  assert.deepEqual(toChangeFrame(changed[0]!), {
    type: 'change',
    rowId: first.rowId,
    guid: first.guid,
    change: 'edited',
    at: new Date(changed[0]!.dateEditedMs!).toISOString(),
    body: 'lunch at 1?',
  });
  assert.equal(toChangeFrame(changed[1]!)?.change, 'unsent');
});

test('group events are read in the inbound order: a rename, a member added and removed, one who left; the members are as now', async (t) => {
  const { reader, dbPath } = await setup(t);
  const group = 'crew';
  await simulateGroupEvent(dbPath, { group, from: '+15550008888', change: 'renamed', name: 'The crew' });
  await simulateGroupEvent(dbPath, {
    group,
    from: '+15550008888',
    change: 'participant_added',
    handle: '+15550009999',
  });
  await simulateGroupEvent(dbPath, {
    group,
    from: '+15550008888',
    change: 'participant_added',
    handle: '+15550007777',
  });
  await simulateGroupEvent(dbPath, {
    group,
    from: '+15550008888',
    change: 'participant_removed',
    handle: '+15550007777',
  });
  await simulateGroupEvent(dbPath, { group, from: '+15550009999', change: 'participant_left' });
  const rows = await reader.readIncoming(0, 10);
  assert.deepEqual(
    rows.map((r) => [r.handle, r.isGroup, r.groupEvent]),
    [
      ['+15550008888', true, { change: 'renamed', name: 'The crew' }],
      ['+15550008888', true, { change: 'participant_added', handle: '+15550009999' }],
      ['+15550008888', true, { change: 'participant_added', handle: '+15550007777' }],
      ['+15550008888', true, { change: 'participant_left', handle: '+15550007777' }],
      ['+15550009999', true, { change: 'participant_left', handle: '+15550009999' }],
    ],
  );
  assert.deepEqual(await reader.chatMembers(rows[0]!.chatGuid!), ['+15550008888']);
  assert.deepEqual(await reader.chatMembers('iMessage;+;no-such-chat'), []);
  const frame = toInboundFrame(rows[1]!);
  assert.deepEqual(frame?.group, { change: 'participant_added', handle: '+15550009999' });
  assert.equal(frame?.body, '');
  assert.equal(
    toInboundFrame({ ...rows[1]!, isGroup: false }),
    undefined,
    'a group event outside a group chat is skipped',
  );
});

test('a chat.db before macOS 13 has no edits or unsends to read, and one before macOS 11 no replies', async (t) => {
  const { dbPath } = await setup(t);
  const first = await simulateInbound(dbPath, { from: '+15550007777', body: 'hey' });
  await simulateReply(dbPath, { from: '+15550007777', body: 'again', replyToGuid: first.guid });
  await simulateEdit(dbPath, { guid: first.guid, body: 'hey you' });
  const db = openSqliteFile(dbPath, 'readwrite');
  db.exec(
    'ALTER TABLE message DROP COLUMN date_edited; ALTER TABLE message DROP COLUMN date_retracted; ALTER TABLE message DROP COLUMN thread_originator_guid',
  );
  db.close();
  const reader = new ChatDbReader(dbPath);
  t.after(() => reader.close());
  assert.deepEqual(await reader.readChanged(0, 10), []);
  assert.deepEqual(
    (await reader.readIncoming(0, 10)).map((r) => r.replyToGuid),
    [undefined, undefined],
  );
});

test('a chat.db from before macOS 14 (no associated_message_emoji) still reads its classic tapbacks', async (t) => {
  const { dbPath } = await setup(t);
  const target = await simulateInbound(dbPath, { from: '+15550005555', body: 'hi' });
  await simulateReaction(dbPath, { from: '+15550005555', targetGuid: target.guid, tapback: 'like' });
  const db = openSqliteFile(dbPath, 'readwrite');
  db.exec('ALTER TABLE message DROP COLUMN associated_message_emoji');
  db.close();
  const reader = new ChatDbReader(dbPath);
  t.after(() => reader.close());
  assert.deepEqual(
    (await reader.readReactions(0, 10)).map((r) => r.reaction),
    [{ kind: 'like', targetGuid: target.guid, removed: false }],
  );
});

test('equal sends get distinct rows in order, and rows typed by hand on the Mac match no send', async (t) => {
  const { tracker, send, app } = await setup(t, { deliveryDelayMs: 10_000 });
  await app.send({
    messageId: 'typed-by-hand',
    attempt: 1,
    to: '+15550003333',
    body: 'something else',
    attachmentPaths: [],
  });
  const a = await send('msg_a', '+15550003333', 'same words');
  const b = await send('msg_b', '+15550003333', 'same words');
  await tracker.poll();
  assert.ok(a.rowId! < b.rowId!, 'the older send takes the older row');
  assert.notEqual(a.guid, b.guid);
  assert.deepEqual([statuses(a), statuses(b)], [['sent'], ['sent']]);
});

test('inbound rows are read after the cursor, in order, with group, attachments and bodies from attributedBody', async (t) => {
  const { reader, dbPath, app } = await setup(t);
  const first = await simulateInbound(dbPath, { from: '+15551110000', body: 'plain text' });
  await app.send({
    messageId: 'out',
    attempt: 1,
    to: '+15551110000',
    body: 'outgoing is not inbound',
    attachmentPaths: [],
  });
  const archived = await simulateInbound(dbPath, {
    from: '+15551110000',
    body: 'only in attributedBody ✓',
    attributedBodyOnly: true,
  });
  const group = await simulateInbound(dbPath, {
    from: 'Friend@Example.com',
    body: 'to the group',
    groupId: 'chat900',
    attachments: ['/Users/me/Library/Messages/Attachments/a.jpg'],
  });

  const plain = openSqliteFile(dbPath, 'readonly');
  const raw = plain
    .prepare('SELECT text, attributedBody IS NOT NULL AS hasBlob FROM message WHERE ROWID = ?')
    .all(archived.rowId);
  plain.close();
  assert.deepEqual(raw, [{ text: null, hasBlob: 1 }], 'the row really has NULL text');

  const all = await reader.readIncoming(0, 100);
  assert.deepEqual(
    all.map((r) => r.rowId),
    [first.rowId, archived.rowId, group.rowId],
  );
  assert.deepEqual(
    all.map((r) => r.body),
    ['plain text', 'only in attributedBody ✓', 'to the group'],
  );
  assert.ok(all.every((r) => !r.isFromMe));
  const g = all[2]!;
  assert.equal(g.isGroup, true);
  assert.equal(g.chatGuid, 'iMessage;+;chat900');
  assert.equal(g.handle, 'friend@example.com');
  assert.equal(g.attachments.length, 1);
  const [a] = g.attachments;
  assert.equal(a!.path, '/Users/me/Library/Messages/Attachments/a.jpg');
  assert.equal(a!.name, 'a.jpg');
  assert.equal(a!.mimeType, 'image/jpeg');
  assert.match(a!.guid, /^[0-9A-F-]{36}$/);
  // The frame names the file without its path on the Mac.
  const frame = toInboundFrame(g)!;
  assert.deepEqual(frame.files, [{ guid: a!.guid, name: 'a.jpg', mimeType: 'image/jpeg' }]);
  assert.equal(frame.attachments, undefined);
  assert.ok(!JSON.stringify(frame).includes('/Users/me'));
  assert.equal(all[0]!.isGroup, false);
  assert.equal(all[0]!.chatGuid, 'iMessage;-;+15551110000');
  assert.ok(Math.abs(all[0]!.dateMs! - Date.now()) < 60_000, 'dates convert from Apple nanoseconds');

  assert.deepEqual(
    (await reader.readIncoming(first.rowId, 100)).map((r) => r.rowId),
    [archived.rowId, group.rowId],
  );
  assert.deepEqual(
    (await reader.readIncoming(first.rowId, 1)).map((r) => r.rowId),
    [archived.rowId],
  );
  assert.deepEqual(await reader.readIncoming(group.rowId, 100), []);
  assert.equal(await reader.maxRowId(), group.rowId);
});

test('a body whose archive ends before its declared length is read up to the cut, and the log says so with the handle masked', async (t) => {
  const { dbPath } = await setup(t);
  const body = 'Call me back on the other number when you land 👋';
  const row = await simulateInbound(dbPath, { from: '+15551234567', body, attributedBodyOnly: true });
  // As some apps and extensions write it: the archive ends inside the string, in the middle of the emoji.
  const writer = new Database(dbPath);
  const [{ blob }] = writer.prepare('SELECT attributedBody AS blob FROM message WHERE ROWID = ?').all(row.rowId) as [
    { blob: Buffer },
  ];
  const cutAt = Buffer.from(blob).indexOf(Buffer.from('👋')) + 2;
  writer
    .prepare('UPDATE message SET attributedBody = ? WHERE ROWID = ?')
    .run(Buffer.from(blob).subarray(0, cutAt), row.rowId);
  writer.close();

  let logged = '';
  const out = new PassThrough().on('data', (chunk: Buffer) => (logged += chunk.toString()));
  const reader = new ChatDbReader(dbPath, createAgentLogger('info', 'json', out));
  t.after(() => reader.close());
  const [read] = await reader.readIncoming(0, 10);
  assert.equal(read!.body, 'Call me back on the other number when you land ');
  await reader.readRows([row.rowId]);
  const lines = logged
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
  assert.equal(lines.length, 1, 'one line for the row, however often it is read');
  assert.equal(lines[0].level, 40);
  assert.match(lines[0].msg, /ends before the length its archive declares/);
  assert.equal(lines[0].rowId, row.rowId);
  assert.equal(lines[0].declaredBytes, Buffer.byteLength(body));
  assert.equal(lines[0].heldBytes, Buffer.byteLength('Call me back on the other number when you land ') + 2);
  assert.equal(lines[0].handle, '+1555•••4567', 'the handle is masked');
  assert.ok(!logged.includes('Call me back'), 'the body is never logged');
});

test('the reader sees rows still in the WAL, reads while a writer holds its lock, and cannot write', async (t) => {
  const { reader, dbPath } = await setup(t);
  // Messages keeps chat.db open, so its WAL is not checkpointed away between writes; a held connection plays that part.
  const messages = openSqliteFile(dbPath, 'readwrite');
  t.after(() => messages.close());
  // The simulator holds its file open too: its schema is moved into the main file first, so only the row is in the WAL.
  messages.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  const row = await simulateInbound(dbPath, { from: '+15552220000', body: 'in the wal' });
  assert.ok((await stat(`${dbPath}-wal`)).size > 0, 'the row is in the write-ahead log');
  const mainFileOnly = new Database(`file:${dbPath}?immutable=1`);
  assert.deepEqual(
    mainFileOnly.prepare('SELECT COUNT(*) AS n FROM message').all(),
    [{ n: 0 }],
    'the main file alone does not have the row yet',
  );
  mainFileOnly.close();
  assert.equal((await reader.readIncoming(0, 10))[0]?.rowId, row.rowId);

  // Messages in the middle of a write: the reader is not blocked and sees what was committed before it.
  messages.exec("BEGIN IMMEDIATE; UPDATE message SET text = 'uncommitted'");
  // (Were reads blocked, this one would fail with SQLITE_BUSY: the lock is held until the ROLLBACK below.)
  assert.deepEqual(
    (await reader.readIncoming(0, 10)).map((r) => r.body),
    ['in the wal'],
  );
  messages.exec('ROLLBACK');

  // Read-only is SQLite's own (mode=ro), not an option libsql would ignore.
  const ro = openSqliteFile(dbPath, 'readonly');
  t.after(() => ro.close());
  assert.throws(
    () => ro.exec('DELETE FROM message'),
    (err: Error & { code?: string }) => err.code === 'SQLITE_READONLY',
  );
  assert.equal((await reader.readIncoming(0, 10)).length, 1);
});

test('between polls the reader holds no snapshot, so Messages can checkpoint its WAL', async (t) => {
  const { reader, dbPath } = await setup(t);
  const messages = openSqliteFile(dbPath, 'readwrite');
  t.after(() => messages.close());
  for (let i = 0; i < 3; i++) await simulateInbound(dbPath, { from: '+15552220000', body: `row ${i}` });
  assert.equal(await reader.maxRowId(), 3);
  assert.equal((await reader.readIncoming(0, 2)).length, 2, 'a read that stops before the last row');
  await reader.readRowsWithNews([1, 2], [3]);
  assert.deepEqual(messages.prepare('PRAGMA wal_checkpoint(TRUNCATE)').all(), [{ busy: 0, log: 0, checkpointed: 0 }]);
  assert.equal((await stat(`${dbPath}-wal`)).size, 0);
});

test('a missing database is a ChatDbError that reads as a refused open, and is not created', async (t) => {
  const { dir } = await setup(t);
  const path = join(dir, 'absent.db');
  const reader = new ChatDbReader(path);
  await assert.rejects(
    reader.maxRowId(),
    (err: unknown) => err instanceof ChatDbError && err.code === 14 && err.accessDenied && err.message.includes(path),
  );
  assert.equal(existsSync(path), false, 'the read-only open did not create the file');
  await assert.rejects(new ChatDbReader(join(dir, 'no-such-dir', 'chat.db')).readIncoming(0, 10), ChatDbError);
});

test('a database the process may not open gives the Full Disk Access hint (accessDenied)', async (t) => {
  const { dbPath } = await setup(t);
  await chmod(dbPath, 0o000);
  if (process.getuid?.() !== 0) {
    await assert.rejects(
      new ChatDbReader(dbPath).maxRowId(),
      (err: unknown) => err instanceof ChatDbError && err.accessDenied,
    );
    return;
  }
  // Root opens any file: the same read runs in a child process that has dropped to an unprivileged user.
  const readerModule = pathToFileURL(
    join(import.meta.dirname, '../../packages/relay-agent/src/chat-db-reader.ts'),
  ).href;
  const errorModule = pathToFileURL(join(import.meta.dirname, '../../packages/relay-agent/src/sqlite-file.ts')).href;
  const script = `
    const { ChatDbReader } = await import(${JSON.stringify(readerModule)});
    const { ChatDbError } = await import(${JSON.stringify(errorModule)});
    try { await new ChatDbReader(${JSON.stringify(dbPath)}).maxRowId(); console.log('opened'); }
    catch (err) { console.log(err instanceof ChatDbError && err.accessDenied ? 'access-denied' : 'other: ' + err.message); }`;
  const run = spawnSync(
    'setpriv',
    [
      '--reuid=65534',
      '--regid=65534',
      '--clear-groups',
      process.execPath,
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      script,
    ],
    {
      encoding: 'utf8',
      cwd: join(import.meta.dirname, '../..'),
      timeout: 60_000,
    },
  );
  assert.equal(
    run.error,
    undefined,
    `setpriv (util-linux) runs the read as an unprivileged user: ${run.error?.message}`,
  );
  assert.equal(run.stdout.trim(), 'access-denied', run.stderr);
});

test('a file that is not a Messages database is a ChatDbError without the Full Disk Access hint, and is read once it is one', async (t) => {
  const { dir } = await setup(t);
  const path = join(dir, 'other.db');
  openSqliteFile(path, 'readwrite').close();
  const reader = new ChatDbReader(path);
  t.after(() => reader.close());
  await assert.rejects(
    reader.maxRowId(),
    (err: unknown) => err instanceof ChatDbError && !err.accessDenied && /no such table/.test(err.message),
  );
  const row = await simulateInbound(path, { from: '+15553330000', body: 'now it has the schema' });
  assert.equal(await reader.maxRowId(), row.rowId);
});

test('the failover check finds a sent row by recipient and text since a time, from either text or attributedBody', async (t) => {
  const { app, reader } = await setup(t);
  const before = Date.now() - 1_000;
  await app.send({
    messageId: 'm1',
    attempt: 1,
    to: '+1 (415) 555-0301',
    body: 'sent by the primary',
    attachmentPaths: [],
  });
  const guid = await reader.sentSince('+14155550301', ' sent by the primary\r\n', before);
  assert.match(guid ?? '', /^[0-9A-F-]{36}$/, 'found, whatever its spacing and line endings');
  assert.equal(await reader.sentSince('+14155550301', 'another text', before), undefined, 'another text is not it');
  assert.equal(
    await reader.sentSince('+14155550302', 'sent by the primary', before),
    undefined,
    'nor another recipient',
  );
  assert.equal(
    await reader.sentSince('+14155550301', 'sent by the primary', Date.now() + 60_000),
    undefined,
    'nor an older row',
  );
  // A row Messages wrote with its text in attributedBody only (macOS 13 and later).
  const db = new Database(app.dbPath);
  db.prepare('UPDATE message SET text = NULL, attributedBody = ? WHERE guid = ?').run(
    encodeAttributedBody('sent by the primary'),
    guid,
  );
  db.close();
  assert.equal(await reader.sentSince('+14155550301', 'sent by the primary', before), guid);
});

/**
 * ChatDbReader, unchanged, against a chat.db written by the simulator: the
 * reading path the Mac runs, exercised on any machine with sqlite3.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ChatDbReader } from '../../src/relay-agent/chat-db-reader.ts';
import { OutgoingTracker } from '../../src/relay-agent/outgoing-tracker.ts';
import { SendJournal, type SendRecord } from '../../src/relay-agent/send-journal.ts';
import { SimulatedMessagesApp, simulateFailures, simulateInbound } from '../../src/relay-agent/simulated-messages-app.ts';
import { SqliteCli, SqliteError } from '../../src/relay-agent/sqlite-cli.ts';

async function setup(t: TestContext, options: { deliveryDelayMs?: number; readDelayMs?: number } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-chatdb-'));
  const dbPath = join(dir, 'chat.db');
  const app = await SimulatedMessagesApp.open(dbPath, options);
  t.after(async () => {
    await app.close();
    await rm(dir, { recursive: true, force: true });
  });
  const reader = new ChatDbReader(dbPath);
  const journal = new SendJournal(join(dir, 'state'), 60_000);
  const tracker = new OutgoingTracker(journal, reader, { matchWindowMs: 5_000, trackStatusMs: 60_000 });
  await tracker.init();
  /** Sends through the simulator the way SendWorker does: `sending` on record first, `handed` after. */
  const send = async (messageId: string, to: string, body: string): Promise<SendRecord> => {
    const now = Date.now();
    const record: SendRecord = { messageId, attempt: 1, to, body, attachmentUrls: [], phase: 'queued', acceptedAtMs: now, phaseAtMs: now, steps: [], acked: 0 };
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

test('equal sends get distinct rows in order, and rows typed by hand on the Mac match no send', async (t) => {
  const { tracker, send, app } = await setup(t, { deliveryDelayMs: 10_000 });
  await app.send({ messageId: 'typed-by-hand', attempt: 1, to: '+15550003333', body: 'something else', attachmentPaths: [] });
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
  await app.send({ messageId: 'out', attempt: 1, to: '+15551110000', body: 'outgoing is not inbound', attachmentPaths: [] });
  const archived = await simulateInbound(dbPath, { from: '+15551110000', body: 'only in attributedBody ✓', attributedBodyOnly: true });
  const group = await simulateInbound(dbPath, { from: 'Friend@Example.com', body: 'to the group', groupId: 'chat900', attachments: ['/Users/me/Library/Messages/Attachments/a.jpg'] });

  const raw = await new SqliteCli(dbPath, { readonly: true }).query<{ text: string | null; hasBlob: number }>(
    `SELECT text, attributedBody IS NOT NULL AS hasBlob FROM message WHERE ROWID = ${archived.rowId}`,
  );
  assert.deepEqual(raw, [{ text: null, hasBlob: 1 }], 'the row really has NULL text');

  const all = await reader.readIncoming(0, 100);
  assert.deepEqual(all.map((r) => r.rowId), [first.rowId, archived.rowId, group.rowId]);
  assert.deepEqual(all.map((r) => r.body), ['plain text', 'only in attributedBody ✓', 'to the group']);
  assert.ok(all.every((r) => !r.isFromMe));
  const g = all[2]!;
  assert.equal(g.isGroup, true);
  assert.equal(g.chatGuid, 'iMessage;+;chat900');
  assert.equal(g.handle, 'friend@example.com');
  assert.deepEqual(g.attachments, ['/Users/me/Library/Messages/Attachments/a.jpg']);
  assert.equal(all[0]!.isGroup, false);
  assert.equal(all[0]!.chatGuid, 'iMessage;-;+15551110000');
  assert.ok(Math.abs(all[0]!.dateMs! - Date.now()) < 60_000, 'dates convert from Apple nanoseconds');

  assert.deepEqual((await reader.readIncoming(first.rowId, 100)).map((r) => r.rowId), [archived.rowId, group.rowId]);
  assert.deepEqual((await reader.readIncoming(first.rowId, 1)).map((r) => r.rowId), [archived.rowId]);
  assert.deepEqual(await reader.readIncoming(group.rowId, 100), []);
  assert.equal(await reader.maxRowId(), group.rowId);
});

test('the reader sees rows still in the WAL and cannot write', async (t) => {
  const { reader, dbPath } = await setup(t);
  // Messages keeps chat.db open, so its WAL is not checkpointed away between writes; a held connection plays that part.
  const holder = spawn('sqlite3', [dbPath], { stdio: ['pipe', 'pipe', 'ignore'] });
  t.after(() => holder.kill());
  holder.stdin.write('SELECT COUNT(*) FROM message;\n');
  await once(holder.stdout, 'data');
  // The simulator holds its file open too: its schema is moved into the main file first, so only the row is in the WAL.
  execFileSync('sqlite3', [dbPath, 'PRAGMA wal_checkpoint(TRUNCATE);']);
  const row = await simulateInbound(dbPath, { from: '+15552220000', body: 'in the wal' });
  assert.ok((await stat(`${dbPath}-wal`)).size > 0, 'the row is in the write-ahead log');
  const mainFileOnly = execFileSync('sqlite3', [`file:${dbPath}?immutable=1`, 'SELECT COUNT(*) FROM message'], { encoding: 'utf8' }).trim();
  assert.equal(mainFileOnly, '0', 'the main file alone does not have the row yet');
  assert.equal((await reader.readIncoming(0, 10))[0]?.rowId, row.rowId);
  const ro = new SqliteCli(dbPath, { readonly: true });
  await assert.rejects(ro.query('DELETE FROM message'), (err: unknown) => err instanceof SqliteError && /readonly|read-only/i.test(err.stderr));
  await assert.rejects(ro.exec('DELETE FROM message'), /read-only/);
  assert.equal((await reader.readIncoming(0, 10)).length, 1);
});

test('a missing database is a SqliteError, not a crash', async (t) => {
  const { dir } = await setup(t);
  const reader = new ChatDbReader(join(dir, 'absent', 'chat.db'));
  await assert.rejects(reader.maxRowId(), SqliteError);
});

test('one long-lived sqlite3 program runs statement after statement, survives a failing one and ends on close', async (t) => {
  const { dir } = await setup(t);
  const db = new SqliteCli(join(dir, 'long-lived.db'), { readonly: false, longLived: true });
  t.after(() => db.close());
  await db.exec('CREATE TABLE t (n INTEGER NOT NULL)');
  // Many small statements, queued at once, run in order through the one program.
  await Promise.all(Array.from({ length: 200 }, (_, n) => db.exec(`INSERT INTO t (n) VALUES (${n})`)));
  assert.deepEqual(await db.query('SELECT COUNT(*) AS rows, SUM(n) AS total FROM t'), [{ rows: 200, total: 19_900 }]);
  // A failing statement inside a transaction ends that program; the transaction is rolled back and the next statement runs on a new one.
  await assert.rejects(db.exec('BEGIN IMMEDIATE; INSERT INTO t (n) VALUES (1000); INSERT INTO t (n) VALUES (NULL); COMMIT;'), (err: unknown) => err instanceof SqliteError && /NOT NULL/i.test(err.stderr));
  assert.deepEqual(await db.query('SELECT COUNT(*) AS rows FROM t'), [{ rows: 200 }]);
  // A statement without a closing semicolon and one that returns no rows both complete.
  assert.deepEqual(await db.query('SELECT n FROM t WHERE n < 0'), []);
  assert.deepEqual(await db.query('SELECT MAX(n) AS top FROM t'), [{ top: 199 }]);
  await db.close();
  await assert.rejects(db.query('SELECT 1'), SqliteError);
});

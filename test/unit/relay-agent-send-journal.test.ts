import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createAgentLogger } from '../../packages/relay-agent/src/agent-logger.ts';
import type { MessageSender } from '../../packages/relay-agent/src/message-sender.ts';
import { maxSentGuids, SendJournal, type SendRecord } from '../../packages/relay-agent/src/send-journal.ts';
import { SendWorker } from '../../packages/relay-agent/src/send-worker.ts';

const day = 24 * 60 * 60 * 1000;

function record(messageId: string, attempt: number, over: Partial<SendRecord> = {}): SendRecord {
  return {
    messageId,
    attempt,
    to: '+15551234567',
    body: 'hi',
    attachmentUrls: [],
    phase: 'queued',
    acceptedAtMs: 1_000,
    phaseAtMs: 1_000,
    steps: [],
    acked: 0,
    ...over,
  };
}

async function tempDir(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-journal-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('each attempt of a message is its own record; the same attempt is found again', async (t) => {
  const journal = new SendJournal(await tempDir(t), 7 * day);
  const first = record('msg_1', 1);
  journal.add(first);
  journal.addStep(first, { status: 'failed', at: '2024-05-01T10:00:00.000Z', error: 'Messages reported error 1' });
  journal.setPhase(first, 'closed');
  assert.equal(journal.get('msg_1', 1), first, 'a repeated send of attempt 1 is recognised');
  assert.equal(journal.get('msg_1', 2), undefined, 'the retry, attempt 2, is not: it is sent again');
  assert.equal(journal.get('msg_2', 1), undefined);

  const second = record('msg_1', 2);
  journal.add(second);
  assert.equal(journal.get('msg_1', 2), second);
  assert.equal(journal.get('msg_1', 1), first, 'the retry does not replace the failed attempt');
  assert.deepEqual(
    journal.get('msg_1', 1)!.steps.map((s) => s.status),
    ['failed'],
  );
  assert.equal(journal.unfinishedCount(), 1, 'only attempt 2 holds a credit');
  assert.deepEqual(journal.inPhase('queued'), [second]);
});

test('attempts survive a restart; a send that was with Messages comes back orphaned; the file is private', async (t) => {
  const dir = await tempDir(t);
  const journal = new SendJournal(dir, 7 * day);
  journal.add(
    record('msg_1', 1, { phase: 'closed', steps: [{ status: 'failed', at: '2024-05-01T10:00:00.000Z' }], acked: 1 }),
  );
  const sending = record('msg_1', 2);
  journal.add(sending);
  journal.setPhase(sending, 'sending', 2_000);
  journal.add(record('msg_2', 1));
  journal.setOutgoingCursor(17);
  await journal.flush(3_000);
  assert.equal((await stat(journal.path)).mode & 0o777, 0o600);

  const reloaded = new SendJournal(dir, 7 * day);
  await reloaded.load(4_000);
  assert.equal(reloaded.outgoingCursor, 17);
  assert.equal(reloaded.get('msg_1', 1)?.phase, 'closed');
  assert.equal(reloaded.get('msg_1', 2)?.phase, 'orphaned', 'never sent again after a crash, only looked for');
  assert.equal(reloaded.get('msg_1', 2)?.phaseAtMs, 4_000);
  assert.equal(reloaded.get('msg_1', 3), undefined);
  // Accepted and never begun: the server gives it again (maybe to another relay of its line), so it is forgotten.
  assert.equal(reloaded.get('msg_2', 1), undefined, 'a queued send is not sent by the next run');
});

test('a journal written before attempts were numbered loads its sends as first attempts', async (t) => {
  const dir = await tempDir(t);
  const { attempt: _attempt, ...unnumbered } = record('msg_old', 1, { phase: 'handed' });
  await writeFile(join(dir, 'sends.json'), JSON.stringify({ outgoingCursor: 5, records: [unnumbered] }));
  const journal = new SendJournal(dir, 7 * day);
  await journal.load();
  assert.equal(journal.get('msg_old', 1)?.phase, 'handed');
  assert.equal(journal.get('msg_old', 1)?.attempt, 1);
});

test('pruning forgets only closed, fully acked attempts past the retention time', async (t) => {
  const dir = await tempDir(t);
  const journal = new SendJournal(dir, 7 * day);
  const now = 100 * day;
  const old = now - 8 * day;
  journal.add(
    record('msg_1', 1, { phase: 'closed', phaseAtMs: old, steps: [{ status: 'failed', at: 'x' }], acked: 1 }),
  );
  journal.add(
    record('msg_1', 2, {
      phase: 'closed',
      phaseAtMs: old,
      steps: [
        { status: 'sent', at: 'x' },
        { status: 'delivered', at: 'y' },
      ],
      acked: 1,
    }),
  );
  journal.add(
    record('msg_1', 3, { phase: 'closed', phaseAtMs: now - day, steps: [{ status: 'sent', at: 'x' }], acked: 1 }),
  );
  journal.add(
    record('msg_2', 1, { phase: 'tracking', phaseAtMs: old, steps: [{ status: 'sent', at: 'x' }], acked: 1 }),
  );
  await journal.flush(now);
  assert.equal(journal.get('msg_1', 1), undefined, 'closed, acked, old: forgotten');
  assert.ok(journal.get('msg_1', 2), 'a status not yet acked is kept');
  assert.ok(journal.get('msg_1', 3), 'recent: kept');
  assert.ok(journal.get('msg_2', 1), 'still tracked: kept');
  const file = JSON.parse(await readFile(journal.path, 'utf8')) as { records: SendRecord[] };
  assert.deepEqual(file.records.map((r) => `${r.messageId}#${r.attempt}`).sort(), ['msg_1#2', 'msg_1#3', 'msg_2#1']);
});

test('the guids of our sends outlive their records, on disk, up to a cap that forgets the oldest first', async (t) => {
  const dir = await tempDir(t);
  const journal = new SendJournal(dir, 0);
  const sent = record('msg_1', 1, { phase: 'closed' });
  journal.add(sent);
  journal.rememberSent('GUID-1', 'msg_1');
  await journal.flush(10 * day);
  const reloaded = new SendJournal(dir, 0);
  await reloaded.load();
  assert.equal(reloaded.get('msg_1', 1), undefined, 'the record was pruned');
  assert.equal(reloaded.messageIdOf('GUID-1'), 'msg_1', 'its guid is still ours');
  assert.equal(reloaded.messageIdOf('GUID-2'), undefined);
  for (let i = 0; i < maxSentGuids; i += 1) reloaded.rememberSent(`G-${i}`, `msg_${i}`);
  assert.equal(reloaded.messageIdOf('GUID-1'), undefined, 'the oldest is forgotten past the cap');
  assert.equal(reloaded.messageIdOf('G-0'), 'msg_0');
  assert.equal(reloaded.messageIdOf(`G-${maxSentGuids - 1}`), `msg_${maxSentGuids - 1}`);
});

test('the sends not begun leave with the connection: forgotten and returned; begun ones stay', async (t) => {
  const dir = await tempDir(t);
  const journal = new SendJournal(dir, 7 * day);
  const queued = record('msg_q', 1);
  const handed = record('msg_h', 1, { phase: 'handed' });
  journal.add(queued);
  journal.add(handed);
  assert.deepEqual(
    journal.forgetQueued().map((r) => r.messageId),
    ['msg_q'],
  );
  assert.equal(journal.get('msg_q', 1), undefined, 'given again by the server, it is a new send');
  assert.equal(journal.get('msg_h', 1), handed);
  await journal.flush();
  const again = new SendJournal(dir, 7 * day);
  await again.load();
  assert.equal(again.get('msg_q', 1), undefined, 'not on disk either');
  assert.deepEqual(journal.forgetQueued(), []);
});

test('the send worker begins nothing while the connection is down, and what is queued waits', async () => {
  const begun: string[] = [];
  const journal = new SendJournal(await mkdtemp(join(tmpdir(), 'relaybox-worker-')), 7 * day);
  let open = false;
  const worker = new SendWorker(
    journal,
    {
      async send(req) {
        begun.push(req.messageId);
        return { ok: true };
      },
    } as MessageSender,
    {
      attachmentsDir: tmpdir(),
      attachmentCleanupDelayMs: 0,
      logger: createAgentLogger('silent', 'json', process.stderr),
      mayBegin: () => open,
      onChange() {},
    },
  );
  journal.add(record('msg_1', 1));
  worker.wake();
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(begun, [], 'not begun while the connection is down');
  open = true;
  worker.wake();
  await worker.stop();
  assert.deepEqual(begun, ['msg_1']);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLogger } from '../../src/log.ts';
import type { RequestChunkDoc } from '../../src/request-log/request-chunks.ts';
import { chunkEntries, maxHeldEntries, RequestRecorder } from '../../src/request-log/request-recorder.ts';
import type { Collection } from '../../src/store/collection.ts';

/** A store that takes chunks and answers only when told: what a process holds while its store hangs. */
function hangingChunks() {
  const inserted: RequestChunkDoc[] = [];
  let release: () => void = () => undefined;
  const answered = new Promise<void>((resolve) => (release = resolve));
  const chunks = {
    async insertOne(_scope: unknown, doc: RequestChunkDoc) {
      await answered;
      inserted.push(doc);
    },
    deleteMany: async () => 0,
    countBy: async () => [],
  } as unknown as Collection<RequestChunkDoc>;
  return { chunks, inserted, release: () => release() };
}

const entry = (i: number) => ({
  at: 1_900_000_000_000 + i,
  method: 'POST',
  route: '/api/v1/messages',
  path: '/api/v1/messages',
  status: 201,
  keyId: null,
  requestId: `r${i}`,
  durationMs: 1,
  error: null,
});

test('while the store does not answer, a process holds at most 50,000 entries and drops the rest; they are written once it answers', async () => {
  const store = hangingChunks();
  const recorder = new RequestRecorder(store.chunks, { maxEntries: 100_000 }, createLogger('silent'));
  try {
    for (let i = 0; i < maxHeldEntries + 10_000; i++) recorder.record('org_a', entry(i));
    assert.deepEqual(recorder.held, { entries: maxHeldEntries, dropped: 10_000 });
    store.release();
    await recorder.flush();
    assert.deepEqual(recorder.held, { entries: 0, dropped: 10_000 });
    assert.equal(store.inserted.length, maxHeldEntries / chunkEntries, 'chunks of 500');
    assert.equal(
      store.inserted.reduce((n, c) => n + c.count, 0),
      maxHeldEntries,
    );
    // Room again: the next request is recorded.
    recorder.record('org_a', entry(0));
    assert.equal(recorder.held.entries, 1);
  } finally {
    await recorder.close();
  }
});

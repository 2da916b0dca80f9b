import type { Doc } from '../../src/store/collection.ts';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';

/**
 * Writes to an embedded store in DATA_DIR as fast as it can until killed:
 * inserts, updates of earlier documents and deletes, several per turn of the
 * event loop. Prints `ack <op> <id> <n>` once each write has resolved, so the
 * parent knows exactly what the store acknowledged before the kill. It counts
 * the items now and then, so the counts the store keeps (and stores with the
 * writes that move them) are in play at the kill too.
 */
interface Item extends Doc {
  n: number;
  status: string;
}

const store = new EmbeddedStore(process.env.DATA_DIR!, {
  syncIntervalMs: Number(process.env.STORE_SYNC_INTERVAL_MS ?? 1_000),
});
const items = store.collection<Item>('items', [
  { keys: { tenantId: 1, status: 1 } },
  { keys: { tenantId: 1, n: 1 }, unique: true },
]);
const scope = { tenantId: 'org_kill' };
process.stdout.write('ready\n');
let next = 0;
const lines: string[] = [];
const flush = () => {
  if (lines.length > 0) process.stdout.write(lines.splice(0).join('\n') + '\n');
};
for (;;) {
  const writes: Array<Promise<unknown>> = [];
  for (let i = 0; i < 20; i++) {
    const n = next++;
    const id = `k${n}`;
    writes.push(
      items.insertOne(scope, { id, tenantId: '', n, status: 'new' }).then(() => lines.push(`ack put ${id} ${n}`)),
    );
    if (n % 3 === 2) {
      const target = `k${n - 2}`;
      writes.push(
        items
          .updateOne(scope, { id: target }, { $set: { status: 'done' } })
          .then(() => lines.push(`ack set ${target} 0`)),
      );
    }
    if (n % 10 === 9) {
      const target = `k${n - 5}`;
      writes.push(items.deleteOne(scope, { id: target }).then(() => lines.push(`ack del ${target} 0`)));
    }
  }
  await Promise.all(writes);
  if (next % 1_000 < 20)
    await Promise.all([
      items.count(scope, {}),
      items.count(scope, { status: 'done' }),
      items.count(scope, { status: 'new' }),
    ]);
  flush();
}

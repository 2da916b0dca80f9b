/**
 * The embedded store on a volume that stops taking writes (its database file,
 * its write-ahead log and its directory made immutable, as a volume gone
 * read-only): every write is answered 503 `service_unavailable` and counted
 * as the store unavailable, never a 500; nothing of a failed turn is kept;
 * and once the volume is back the same writes succeed.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { AppError } from '../../src/errors.ts';
import { EmbeddedStore, storeFile } from '../../src/store/embedded-store.ts';
import { storeTransientErrors } from '../../src/store/transient-errors.ts';

const scope = { tenantId: 'org_volume' };

/** The store-unavailable count of one operation. */
async function unavailableCount(operation: string): Promise<number> {
  const { values } = await storeTransientErrors.get();
  return values.find((v) => v.labels.operation === operation && v.labels.outcome === 'unavailable')?.value ?? 0;
}

/** Rejects with the store's 503. */
async function refused(write: Promise<unknown>, what: string): Promise<void> {
  await assert.rejects(write, (err: unknown) => {
    assert.ok(err instanceof AppError, `${what}: ${String(err)}`);
    assert.equal(err.code, 'service_unavailable', what);
    return true;
  });
}

test('on a volume gone read-only every write is a counted 503, a failed turn keeps nothing, and writes succeed once it is back', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-volume-'));
  // SQLite's shared-memory index is left writable: it is mapped into memory, and a file that cannot grow there is a SIGBUS, not an error.
  const files = [dir, join(dir, storeFile), join(dir, `${storeFile}-wal`)];
  const chattr = (flag: string) => spawnSync('chattr', [flag, ...files], { encoding: 'utf8' });
  const store = new EmbeddedStore(dir, { cacheMb: 2 });
  t.after(async () => {
    chattr('-i');
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  const things = store.collection<{ id: string; tenantId: string; pad: string }>('volume_things', []);
  await store.init();
  await things.insertOne(scope, { id: 'before', tenantId: scope.tenantId, pad: 'x' });
  const probe = chattr('+i');
  if (probe.status !== 0) {
    chattr('-i');
    const reason = `chattr +i failed (${(probe.stderr || probe.error?.message || '').trim()}): needs root on ext4 or xfs`;
    if (process.env.CI === 'true') throw new Error(reason);
    return t.skip(reason);
  }
  const statementsBefore = await unavailableCount('volume_things');
  const commitsBefore = await unavailableCount('transaction');

  // A small write fails at its COMMIT.
  await refused(things.insertOne(scope, { id: 'small', tenantId: scope.tenantId, pad: 'x' }), 'a small write');
  // A large one fails at a statement, when SQLite spills its cache to the log.
  const large = Array.from({ length: 2_000 }, (_, i) => ({
    id: `large-${i}`,
    tenantId: scope.tenantId,
    pad: 'y'.repeat(10_000),
  }));
  await refused(things.insertMany(scope, large), 'a write larger than the cache');
  assert.ok((await unavailableCount('transaction')) > commitsBefore, 'the failed COMMIT is counted');
  assert.ok(
    (await unavailableCount('volume_things')) > statementsBefore,
    'the failed statement is counted by collection',
  );

  chattr('-i');
  await things.insertOne(scope, { id: 'after', tenantId: scope.tenantId, pad: 'x' });
  const ids = (await things.find(scope, {})).map((d) => d.id).sort();
  assert.deepEqual(ids, ['after', 'before'], 'nothing of the refused writes was kept');
});

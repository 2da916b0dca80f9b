import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { platformScope } from '../../src/store/collection.ts';
import { shareWeightOf } from '../../src/runtime/share-weights.ts';
import { runAdmin } from '../support/admin-cli.ts';
import { eachBackend, signup, startTestApp } from '../support/test-app.ts';

async function until(what: string, done: () => boolean, ms = 5_000): Promise<void> {
  for (const end = Date.now() + ms; !done(); await sleep(20))
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
}

eachBackend((backend) => {
  describe(`share weights (${backend})`, () => {
    test("the operator's weight for an organization reaches the running workers, and --default takes it back", async (t) => {
      const app = await startTestApp(backend, { SHARE_WEIGHT_REFRESH_MS: '100' });
      t.after(() => app.stop());
      const org = await signup(app);
      const other = await signup(app, 'Other');
      assert.equal(shareWeightOf(org.orgId), 1);
      const weights = app.app.store.collection('share_weights');
      if (backend === 'redis+mongo') {
        // The operator's command, as a process of its own against the same database.
        const env = { MONGODB_URL: app.config.mongoUrl! };
        const set = await runAdmin(['share-weight', '--org', org.orgId, '--weight', '4'], env);
        assert.equal(set.code, 0, set.output);
        assert.match(set.output, /share weight 4/);
        for (const bad of ['0', '17', 'lots']) {
          const refused = await runAdmin(['share-weight', '--org', org.orgId, '--weight', bad], env);
          assert.equal(refused.code, 2, `--weight ${bad}: ${refused.output}`);
        }
        assert.equal((await runAdmin(['share-weight', '--org', 'org_missing', '--weight', '2'], env)).code, 1);
      } else {
        // The embedded store belongs to the running process: the document the command writes, written in it.
        await weights.insertOne(platformScope, {
          id: org.orgId,
          tenantId: platformScope.tenantId,
          weight: 4,
          updatedAt: new Date().toISOString(),
        });
      }
      await until('the weight read', () => shareWeightOf(org.orgId) === 4);
      assert.equal(shareWeightOf(other.orgId), 1, 'another organization keeps an equal share');
      if (backend === 'redis+mongo') {
        const back = await runAdmin(['share-weight', '--org', org.orgId, '--default'], {
          MONGODB_URL: app.config.mongoUrl!,
        });
        assert.equal(back.code, 0, back.output);
      } else {
        await weights.deleteOne(platformScope, { id: org.orgId });
      }
      await until('the weight taken back', () => shareWeightOf(org.orgId) === 1);
    });
  });
});

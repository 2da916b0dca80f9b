import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { storeFile } from '../../src/store/embedded-store.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { request } from '../support/test-app.ts';

const embedded = { REDIS_URL: '', MONGODB_URL: '', LOG_LEVEL: 'warn' };

test('the embedded default killed with SIGKILL starts again at once on the same DATA_DIR; a second live process on it is refused', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-chaos-'));
  const procs: ServiceProcess[] = [];
  t.after(async () => {
    for (const p of procs) p.child.kill('SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  });
  const first = await startServiceProcess('all', { ...embedded, DATA_DIR: dataDir });
  procs.push(first);
  const base = `http://127.0.0.1:${first.port}`;
  const signup = await request(base, 'POST', '/api/v1/auth/signup', {
    body: { organizationName: 'Killed', email: 'owner@example.com', password: 'correct horse battery' },
  });
  assert.equal(signup.status, 201, signup.text);
  const token = signup.body.accessToken as string;
  const sent = await request(base, 'POST', '/api/v1/messages', {
    token,
    body: { to: '+14155550100', body: 'before the kill' },
  });
  assert.equal(sent.status, 201, sent.text);

  await assert.rejects(
    startServiceProcess('all', { ...embedded, DATA_DIR: dataDir }),
    new RegExp(`is in use by another running process \\(process ${first.child.pid}\\): stop it first`),
  );

  first.child.kill('SIGKILL');
  // The id the killed process had, now held by an unrelated live process (here: this one), must not matter.
  writeFileSync(join(dataDir, `${storeFile}.owner`), String(process.pid));
  const killedAt = Date.now();
  const second = await startServiceProcess('all', { ...embedded, DATA_DIR: dataDir });
  procs.push(second);
  console.log(`# started again ${Date.now() - killedAt} ms after the SIGKILL`);
  const again = await request(`http://127.0.0.1:${second.port}`, 'GET', `/api/v1/messages/${sent.body.id}/status`, {
    token,
  });
  assert.equal(again.status, 200, again.text);
  assert.equal(again.body.status, 'queued', 'the message acknowledged before the kill is there');
  const { code } = await second.terminate();
  assert.equal(code, 0);
});

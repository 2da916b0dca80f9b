/**
 * A scheduled bulk job's start is a durable timer: it survives the process
 * that holds it. On the embedded default the whole service is killed and
 * started again on the same DATA_DIR; on Redis + MongoDB wire the worker is
 * killed and another takes over. Either way the job starts at scheduledAt.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config.ts';
import { MongoStore } from '../../src/store/mongo-store.ts';
import { waitFor } from '../integration/runtime-contract.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { backends, request, withDatabase } from '../support/test-app.ts';

const recipients = 50;
/** Far enough ahead that the kill and the restart happen before it. */
const aheadMs = 8_000;
/** Late by at most this much: the new process's start-up or the shard's lease hand-over, plus a loaded machine. */
const lateToleranceMs = 6_000;

async function scheduleJob(base: string, suffix: string) {
  const signup = await request(base, 'POST', '/api/v1/auth/signup', {
    body: { organizationName: 'Scheduled', email: `sched-${suffix}@example.com`, password: 'a long password' },
  });
  assert.equal(signup.status, 201, signup.text);
  const token: string = signup.body.accessToken;
  const scheduledAt = new Date(Date.now() + aheadMs).toISOString();
  const messages = Array.from({ length: recipients }, (_, i) => ({
    to: `+1415555${String(i).padStart(4, '0')}`,
    body: `reminder ${i}`,
  }));
  const created = await request(base, 'POST', '/api/v1/messages/bulk', { token, body: { messages, scheduledAt } });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.body.status, 'scheduled');
  return { token, jobId: created.body.jobId as string, scheduledAt };
}

async function expectStartedOnTime(base: string, token: string, jobId: string, scheduledAt: string): Promise<void> {
  let job: any;
  await waitFor(
    async () => {
      job = (await request(base, 'GET', `/api/v1/messages/bulk/${jobId}`, { token })).body;
      return job.status === 'processing' && job.counts.queued === recipients;
    },
    aheadMs + lateToleranceMs + 10_000,
    'the scheduled job starts',
  );
  const lateMs = Date.parse(job.startedAt) - Date.parse(scheduledAt);
  console.log(`# started ${lateMs} ms after scheduledAt`);
  assert.ok(lateMs >= 0, 'not before its time');
  assert.ok(lateMs <= lateToleranceMs, `on time: ${lateMs} ms late`);
}

for (const backend of backends()) {
  if (backend === 'embedded') {
    test(
      'embedded: a scheduled job survives a killed process and starts on time after a restart on the same DATA_DIR',
      { timeout: 90_000 },
      async () => {
        const dir = await mkdtemp(join(tmpdir(), 'relaybox-sched-'));
        const env = { REDIS_URL: '', MONGODB_URL: '', DATA_DIR: dir, LOG_LEVEL: 'warn', STORE_SYNC_INTERVAL_MS: '0' };
        let service: ServiceProcess | undefined;
        try {
          service = await startServiceProcess('all', env);
          const first = `http://127.0.0.1:${service.port}`;
          const { token, jobId, scheduledAt } = await scheduleJob(first, randomUUID().slice(0, 8));
          service.child.kill('SIGKILL');
          await new Promise((resolve) => service!.child.once('exit', resolve));
          service = await startServiceProcess('all', env);
          await expectStartedOnTime(`http://127.0.0.1:${service.port}`, token, jobId, scheduledAt);
        } finally {
          if (service && service.child.exitCode === null) await service.terminate();
          await rm(dir, { recursive: true, force: true });
        }
      },
    );
  } else {
    test(
      'Redis: a scheduled job survives a SIGKILL of the worker holding its timer and starts on time on another',
      { timeout: 90_000 },
      async () => {
        const suffix = randomUUID().slice(0, 8);
        const prefix = `sched${suffix}`;
        const mongoUrl = withDatabase(process.env.MONGODB_URL!, `relaybox_sched_${suffix}`);
        const dir = await mkdtemp(join(tmpdir(), 'relaybox-sched-'));
        const env = {
          REDIS_URL: process.env.REDIS_URL!,
          MONGODB_URL: mongoUrl,
          RUNTIME_KEY_PREFIX: prefix,
          DATA_DIR: dir,
          LOG_LEVEL: 'warn',
          RUNTIME_LEASE_TTL_MS: '2000',
          RUNTIME_LEASE_RENEW_MS: '400',
          RUNTIME_REBALANCE_MS: '300',
        };
        const processes: ServiceProcess[] = [];
        const redis = new Redis(process.env.REDIS_URL!);
        try {
          const web = await startServiceProcess('web', env);
          processes.push(web);
          const worker = await startServiceProcess('worker', env);
          processes.push(worker);
          const base = `http://127.0.0.1:${web.port}`;
          const { token, jobId, scheduledAt } = await scheduleJob(base, suffix);
          worker.child.kill('SIGKILL');
          await new Promise((resolve) => worker.child.once('exit', resolve));
          processes.push(await startServiceProcess('worker', env));
          await expectStartedOnTime(base, token, jobId, scheduledAt);
        } finally {
          for (const p of processes) if (p.child.exitCode === null) p.child.kill('SIGKILL');
          const keys = await redis.keys(`${prefix}:*`);
          if (keys.length > 0) await redis.del(...keys);
          redis.disconnect();
          const store = new MongoStore(mongoUrl, undefined, 2_000, loadConfig({}).mongoWrites);
          await store
            .init()
            .then(() => store.dropDatabase())
            .finally(() => store.close())
            .catch(() => undefined);
          await rm(dir, { recursive: true, force: true });
        }
      },
    );
  }
}

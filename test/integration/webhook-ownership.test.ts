import { Redis } from 'ioredis';
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { test } from 'node:test';
import { webhookProtocol } from '../../src/actors/webhook/protocol.ts';
import { shardOf } from '../../src/runtime/shard.ts';
import { signup, startTestApp } from '../support/test-app.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

test(
  "a worker that loses a webhook's shard finishes only the attempts under way; the rest wait for the owner, and none is sent twice",
  { timeout: 90_000 },
  async (t) => {
    if (!process.env.REDIS_URL || !process.env.MONGODB_URL) {
      if (process.env.CI === 'true') assert.fail('REDIS_URL and MONGODB_URL are required in CI');
      return t.skip('REDIS_URL and MONGODB_URL not set');
    }
    const app = await startTestApp('redis+mongo', {
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_CONCURRENCY: '2',
      WEBHOOK_SWEEP_MS: '300',
      RUNTIME_LEASE_TTL_MS: '1000',
      RUNTIME_LEASE_RENEW_MS: '100',
      RUNTIME_REBALANCE_MS: '100',
    });
    const receiver = await WebhookReceiver.start();
    const redis = new Redis(process.env.REDIS_URL);
    t.after(async () => {
      redis.disconnect();
      await app.stop();
      await receiver.stop();
    });
    // Every request is held until released: the first two are the attempts in flight when the shard goes.
    const held: ServerResponse[] = [];
    let holding = true;
    receiver.respond = (_req, res) => {
      if (holding) held.push(res);
      else res.writeHead(200).end('ok');
    };
    const org = await signup(app, 'Owners');
    const made = await app.request('POST', '/api/v1/webhooks', {
      token: org.ownerToken,
      body: { url: receiver.url, events: ['message.queued'] },
    });
    assert.equal(made.status, 201, made.text);
    const total = 10;
    for (let i = 0; i < total; i++) {
      const sent = await app.request('POST', '/api/v1/messages', {
        token: org.ownerToken,
        body: { to: '+14155550100', body: `m${i}` },
      });
      assert.equal(sent.status, 201, sent.text);
    }
    await until('two attempts in flight', () => held.length === 2);

    // Another worker takes the webhook's shard: this one's renewal fails and it lets go of the key.
    const shard = shardOf(made.body.id, webhookProtocol.shards ?? app.config.runtime.defaultShards);
    const lease = `${app.config.runtime.keyPrefix}:lease:webhook:${shard}`;
    // A live member of the runtime (a lease whose holder is not one is taken back at once), holding the lease.
    const members = `${app.config.runtime.keyPrefix}:members`;
    await redis.zadd(members, Date.now() + 60_000, 'another-worker');
    await redis.set(lease, 'another-worker', 'PX', 60_000);
    await sleep(1_500); // several renewals and sweeps: a lane still draining would have started more by now
    assert.equal(receiver.received.length, 2, 'only the two attempts under way were made after the shard left');
    const deliveries = async () =>
      (await app.request('GET', `/api/v1/webhooks/${made.body.id}/deliveries?limit=100`, { token: org.ownerToken }))
        .body.data as Array<{ status: string; attempts: number }>;
    assert.equal(
      (await deliveries()).filter((d) => d.status === 'pending' && d.attempts === 0).length,
      total,
      'all wait in the store for the owner',
    );

    // The shard comes back to this process while those two are still under way: its new lane starts others, not them again.
    await redis.zrem(members, 'another-worker');
    await redis.del(lease);
    await until('the next two attempts', () => held.length === 4);
    holding = false;
    for (const res of held) res.writeHead(200).end('ok');
    await until('every event delivered', () => receiver.received.length >= total);
    await sleep(1_500);
    const ids = receiver.received.map((d) => d.headers['webhook-id']);
    assert.equal(new Set(ids).size, total);
    assert.equal(ids.length, total, 'no event sent twice');
    assert.ok((await deliveries()).every((d) => d.status === 'succeeded' && d.attempts === 1));
  },
);

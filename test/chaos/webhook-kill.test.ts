/**
 * Webhook delivery across process kills, with real processes on Redis and a
 * MongoDB wire server.
 *
 * 1. A worker SIGKILLed while it delivers a stream of events (600 by default,
 *    WEBHOOK_CHAOS_EVENTS=2000 for the full size): a replacement starts at
 *    once; later the shard is taken from whichever worker holds it, so it
 *    changes hands at least twice. Every event must reach the receiver; an event
 *    received twice must carry the same `webhook-id` both times, and only
 *    an attempt in flight when the webhook changed hands may be repeated:
 *    its first copy arrived shortly before a change (the SIGKILL, or a
 *    worker's "shard lease lost") and its repeat after it; or a worker
 *    logged that the attempt's outcome could not be stored.
 *    WEBHOOK_CHAOS_DEBUG=1 prints each repeat.
 * 2. A frontend SIGKILLed right after it answered 201: the acknowledged
 *    message's `message.queued` is delivered all the same.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { webhookProtocol } from '../../src/actors/webhook/protocol.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { shardOf } from '../../src/runtime/shard.ts';
import { deliveryId } from '../../src/webhooks/webhook-store.ts';
import { waitFor } from '../integration/runtime-contract.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { request } from '../support/test-app.ts';
import { wireRun } from '../support/wire-run.ts';
import { WebhookReceiver, type ReceivedDelivery } from '../support/webhook-receiver.ts';

const events = Number(process.env.WEBHOOK_CHAOS_EVENTS ?? 600);
const shards = 4;
const concurrency = 8;

interface Cluster {
  env: Record<string, string>;
  prefix: string;
  procs: Map<string, ServiceProcess>;
  start(role: 'web' | 'worker', name: string): Promise<ServiceProcess>;
  kill(name: string): void;
  /** Every log line of every process started, killed ones included. */
  lines(): string[];
}

async function cluster(t: TestContext): Promise<Cluster | undefined> {
  const procs = new Map<string, ServiceProcess>();
  const all: ServiceProcess[] = [];
  const run = await wireRun(t, 'hook', () => {
    for (const p of procs.values()) p.child.kill('SIGKILL');
  });
  if (!run) return undefined;
  const { prefix } = run;
  const env = {
    ...run.env,
    RUNTIME_SHARDS: String(shards),
    RUNTIME_LEASE_TTL_MS: '3000',
    RUNTIME_LEASE_RENEW_MS: '500',
    RUNTIME_REBALANCE_MS: '300',
    EVENT_CLAIM_IDLE_MS: '1000',
    WEBHOOK_SWEEP_MS: '1000',
    WEBHOOK_CONCURRENCY: String(concurrency),
    WEBHOOK_ALLOW_PRIVATE: 'true',
    TENANT_SWEEP_MS: '1000',
    SHUTDOWN_TIMEOUT_MS: '5000',
    RATE_LIMIT_PER_MINUTE: '10000000',
    RATE_LIMIT_BURST: '1000000',
    PACING_PER_SECOND: '1000000',
    PACING_BURST: '1000000',
    PACING_NEW_CONTACTS_PER_DAY: '1000000',
    PACING_UNANSWERED_CAP: '1000000',
    PACING_FOLLOW_UPS_PER_DAY: '1000000',
    PACING_JITTER_MS: '0',
    PACING_QUIET_HOURS: 'off',
    LOG_LEVEL: 'warn',
    // Every process that shares the store shares the key that seals webhook secrets.
    WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
  };
  return {
    env,
    prefix,
    procs,
    async start(role, name) {
      const p = await startServiceProcess(role, { ...env, NODE_ID: `${prefix}-${name}` }, 60_000);
      procs.set(name, p);
      all.push(p);
      return p;
    },
    lines: () => all.flatMap((p) => p.lines),
    kill(name) {
      procs.get(name)!.child.kill('SIGKILL');
      procs.delete(name);
    },
  };
}

async function organization(base: string, suffix: string, receiver: WebhookReceiver, secret: string) {
  const signup = await request(base, 'POST', '/api/v1/auth/signup', {
    body: { organizationName: `Hooks ${suffix}`, email: `hooks-${suffix}@example.com`, password: 'a long password' },
  });
  assert.equal(signup.status, 201, signup.text);
  const token = signup.body.accessToken as string;
  const hook = await request(base, 'POST', '/api/v1/webhooks', {
    token,
    body: { url: receiver.url, events: ['message.queued'], secret },
  });
  assert.equal(hook.status, 201, hook.text);
  return { token, webhookId: hook.body.id as string };
}

/** The deliveries by message id: every copy received of each event. */
function byMessage(received: ReceivedDelivery[]): Map<string, ReceivedDelivery[]> {
  const seen = new Map<string, ReceivedDelivery[]>();
  for (const d of received) {
    const id = d.json?.data?.id as string;
    seen.set(id, [...(seen.get(id) ?? []), d]);
  }
  return seen;
}

test(
  `a worker SIGKILLed while it delivers ${events} events: every event delivered, repeats only of attempts in flight, under the same webhook-id`,
  { timeout: Math.max(600_000, events * 600) },
  async (t) => {
    const c = await cluster(t);
    if (!c) return;
    const receiver = await WebhookReceiver.start();
    t.after(() => receiver.stop());
    // A short wait before each answer keeps attempts in flight when the worker dies.
    receiver.respond = (_req, res) => void setTimeout(() => res.writeHead(200).end('ok'), 10);
    await Promise.all([c.start('worker', 'w1'), c.start('worker', 'w2')]);
    const web = await c.start('web', 'web');
    const base = `http://127.0.0.1:${web.port}`;
    const org = await organization(base, c.prefix, receiver, 'chaos secret');

    const redis = new Redis(c.env.REDIS_URL!);
    t.after(() => redis.disconnect());
    const lease = `${c.prefix}:lease:webhook:${shardOf(org.webhookId, webhookProtocol.shards ?? shards)}`;
    const owners: string[] = [];
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const owner = await redis.get(lease);
        if (owner && owner !== 'elsewhere' && owner !== owners.at(-1)) owners.push(owner);
        await sleep(50);
      }
    })();

    const started = Date.now();
    const timeline: string[] = [];
    const note = (what: string) => timeline.push(`${((Date.now() - started) / 1000).toFixed(1)}s ${what}`);
    const accepted: string[] = [];
    let next = 0;
    const sending = Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < events) {
          const i = next++;
          const res = await request(base, 'POST', '/api/v1/messages', {
            token: org.token,
            body: { to: `+1415${5_550_000 + (i % 100)}`, body: `event ${i}` },
          });
          assert.equal(res.status, 201, res.text);
          accepted.push(res.body.id);
        }
      }),
    );

    await waitFor(() => byMessage(receiver.received).size >= events * 0.3, events * 500, '30% delivered');
    const owner = await redis.get(lease);
    const victim = [...c.procs.keys()].find((name) => `${c.prefix}-${name}` === owner);
    assert.ok(victim?.startsWith('w'), `the webhook's shard is held by a worker (${owner})`);
    const atKill = receiver.received.length;
    const killedAt = Date.now();
    c.kill(victim!);
    note(`SIGKILL ${victim} (holding the webhook's shard) after ${atKill} deliveries; starting its replacement`);
    await c.start('worker', `${victim}b`);
    note('replacement started');
    // Then the shard is taken from whoever holds it, mid-stream, and handed on: the holder must leave what it queued to the next owner.
    const before = receiver.received.length;
    await waitFor(
      async () => receiver.received.length >= before + 50 || next >= events,
      300_000,
      'deliveries under the new owner',
    );
    const holder = await redis.get(lease);
    const stolenAt = Date.now();
    await redis.set(lease, 'elsewhere', 'PX', 1_500);
    note(`shard taken from ${holder?.slice(c.prefix.length + 1)} after ${receiver.received.length} deliveries`);
    await sending;
    note(`all ${events} sends accepted`);
    await waitFor(
      () => accepted.every((id) => byMessage(receiver.received).has(id)),
      events * 300,
      'every event delivered',
    );
    note(`every event delivered (${receiver.received.length} requests)`);
    await sleep(3_000); // a late repeat would arrive by now
    watching = false;
    await watch;

    const copies = byMessage(receiver.received);
    const repeated = [...copies.values()].filter((list) => list.length > 1);
    // When the webhook left a worker: the kill, the steal (its holder goes on until its next renewal notices it), and
    // every loss of its shard a worker noticed (the steal, or a lease that lapsed under load).
    const stream = `${c.prefix}:webhook:${lease.split(':').at(-1)}`;
    const logged = c.lines().map(
      (line) =>
        JSON.parse(line.startsWith('{') ? line : 'null') as {
          msg?: string;
          stream?: string;
          time?: number;
          deliveryId?: string;
        } | null,
    );
    const changes = [
      killedAt,
      stolenAt,
      ...logged.flatMap((e) => (e?.msg === 'shard lease lost' && e.stream === stream ? [e.time!] : [])),
    ];
    // An attempt is in flight until its outcome is stored: its request (up to the 10 s timeout) and the write after it, slow on a loaded wire server.
    const inFlightMs = 30_000;
    const inFlightAtChange = (list: ReceivedDelivery[]) =>
      changes.some(
        (at) => list[0]!.at <= at + 500 && list[0]!.at >= at - inFlightMs && list.slice(1).every((d) => d.at >= at),
      );
    // Or its outcome could not be stored (the store refused the write): it stays pending and is made again, as at least once says.
    const unrecorded = new Set(
      logged.flatMap((e) => (e?.msg === 'webhook attempt could not run' && e.deliveryId ? [e.deliveryId] : [])),
    );
    const notRecorded = (list: ReceivedDelivery[]) =>
      unrecorded.has(deliveryId(org.webhookId, list[0]!.headers['webhook-id']!));
    console.log(
      `# webhook kill: ${events} events, ${receiver.received.length} requests, ${repeated.length} events received twice or more; shard owners ${owners.map((o) => o.slice(c.prefix.length + 1)).join(' -> ')}\n#   ${timeline.join('\n#   ')}`,
    );
    if (process.env.WEBHOOK_CHAOS_DEBUG) {
      for (const list of repeated.slice(0, 40))
        console.log(`# repeat ${list.map((d) => ((d.at - started) / 1000).toFixed(2)).join(' ')}`);
      console.log(`# changes ${changes.map((at) => ((at - started) / 1000).toFixed(2)).join(' ')}`);
      for (const [name, p] of c.procs)
        for (const line of p.lines) if (/lease|took over|shard/.test(line)) console.log(`# ${name} ${line}`);
    }
    assert.equal(copies.size, events, 'every event, and nothing else');
    assert.ok(owners.length >= 2, 'the shard changed hands');
    for (const list of copies.values()) {
      assert.equal(
        new Set(list.map((d) => d.headers['webhook-id'])).size,
        1,
        'every copy of an event carries its one webhook-id',
      );
    }
    for (const list of repeated) {
      assert.ok(
        inFlightAtChange(list) || notRecorded(list),
        `a repeat only of an attempt in flight when the webhook changed hands, or whose outcome could not be stored (copies at ${list.map((d) => d.at - started).join(', ')} ms; changes at ${changes.map((at) => at - started).join(', ')} ms)`,
      );
    }
    // Each change of hands makes an attempt in flight at it once more, and no more: a third copy of an event needs a
    // second change during the second copy's flight (the kill, then the steal from the worker that took over), or an
    // outcome that could not be stored. A steal and its holder's notice of it (at its next renewal) are one change.
    const handOvers: Array<{ first: number; last: number }> = [];
    for (const at of [...changes].sort((a, b) => a - b)) {
      const open = handOvers.at(-1);
      if (open && at - open.first <= 1_000) open.last = at;
      else handOvers.push({ first: at, last: at });
    }
    const eachRepeatHasItsChange = (list: ReceivedDelivery[]) => {
      const used = new Set<number>();
      return list.slice(1).every((copy, k) => {
        const previous = list[k]!;
        const i = handOvers.findIndex(
          (h, j) =>
            !used.has(j) && previous.at <= h.last + 500 && previous.at >= h.first - inFlightMs && copy.at >= h.first,
        );
        if (i < 0) return notRecorded(list);
        used.add(i);
        return true;
      });
    };
    for (const list of repeated)
      assert.ok(
        eachRepeatHasItsChange(list),
        `an attempt in flight is made again once per change of hands (copies at ${list.map((d) => d.at - started).join(', ')} ms; changes at ${changes.map((at) => at - started).join(', ')} ms)`,
      );
  },
);

test(
  'a frontend SIGKILLed right after it answered 201: the message.queued event of what it acknowledged is delivered',
  { timeout: 300_000 },
  async (t) => {
    const c = await cluster(t);
    if (!c) return;
    const receiver = await WebhookReceiver.start();
    t.after(() => receiver.stop());
    await c.start('worker', 'w1');
    const doomed = await c.start('web', 'web1');
    const base = `http://127.0.0.1:${doomed.port}`;
    const org = await organization(base, c.prefix, receiver, 'frontend secret');

    // Sends in flight side by side; the frontend dies as the first answer arrives.
    const acknowledged: string[] = [];
    let killed = false;
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const res = await request(base, 'POST', '/api/v1/messages', {
          token: org.token,
          body: { to: '+14155550100', body: `last words ${i}` },
        }).catch(() => undefined);
        if (res?.status !== 201) return;
        acknowledged.push(res.body.id);
        if (!killed) {
          killed = true;
          c.kill('web1');
        }
      }),
    );
    assert.ok(acknowledged.length >= 1 && killed, 'at least one send was acknowledged before the kill');
    await waitFor(
      () => acknowledged.every((id) => byMessage(receiver.received).has(id)),
      60_000,
      'every acknowledged message.queued delivered',
    );

    // A message stored but not acknowledged (killed between its write and its answer) is announced too, by the
    // organization's sweep once its tenant runs again (a relay, a send): here, the next send through another frontend.
    const heir = await c.start('web', 'web2');
    const heirBase = `http://127.0.0.1:${heir.port}`;
    const after = await request(heirBase, 'POST', '/api/v1/messages', {
      token: org.token,
      body: { to: '+14155550100', body: 'after' },
    });
    assert.equal(after.status, 201, after.text);
    const stored = (await request(heirBase, 'GET', '/api/v1/messages?limit=100', { token: org.token })).body.data.map(
      (m: { id: string }) => m.id,
    ) as string[];
    await waitFor(
      () => stored.every((id) => byMessage(receiver.received).has(id)),
      60_000,
      'every stored message announced',
    );
    console.log(
      `# frontend kill: ${acknowledged.length} sends acknowledged before the kill, ${stored.length - 1} stored; every one's message.queued delivered (${receiver.received.length} requests)`,
    );
    for (const list of byMessage(receiver.received).values())
      assert.equal(new Set(list.map((d) => d.headers['webhook-id'])).size, 1);
  },
);

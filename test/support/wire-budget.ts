import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parseClusterNodes, redisClient, type RedisClient } from '../../src/runtime/redis-client.ts';
import type { StandInRelay } from './stand-in-relay.ts';
import type { AnyBackend, TestApp } from './test-app.ts';
import { until } from './until.ts';

/**
 * What the wire budget tests (and the Redis command bench) share: the budget
 * table of docs/performance-budget.md, the Redis a wire backend runs on, and
 * the sends they count.
 */

/** A row of the table under "## The wire budget" in docs/performance-budget.md: `| figure | budget |`. */
export function wireBudget(figure: string): number {
  const doc = readFileSync(new URL('../../docs/performance-budget.md', import.meta.url), 'utf8');
  const section = doc.split(/^## /m).find((s) => s.startsWith('The wire budget\n'));
  assert.ok(section, 'docs/performance-budget.md has a "## The wire budget" section');
  const row = section
    .split('\n')
    .map((line) => line.split('|').map((cell) => cell.trim()))
    .find((cells) => cells[1] === figure);
  assert.ok(row, `the wire budget has a row "${figure}"`);
  const budget = Number(row[2]!.replace(/,/g, ''));
  assert.ok(Number.isFinite(budget), `the wire budget of "${figure}" is a number: ${row[2]}`);
  return budget;
}

/** A client of the Redis a wire backend runs on: one server at `where` (a URL), or the cluster whose nodes `where` lists. */
export function wireRedis(backend: Exclude<AnyBackend, 'embedded'>, where: string): RedisClient {
  return backend === 'redis-cluster+mongo'
    ? redisClient({ clusterNodes: parseClusterNodes(where) })
    : redisClient({ url: where });
}

/** A message's current status, as its sender reads it. */
export async function statusOf(t: TestApp, token: string, id: string): Promise<string> {
  return (await t.request('GET', `/api/v1/messages/${id}/status`, { token })).body.status;
}

/** One message sent, handed to `relay`, reported sent and delivered, and read back delivered. */
export async function deliverOne(
  t: TestApp,
  token: string,
  relay: StandInRelay,
  to: string,
  body: string,
): Promise<void> {
  const sent = await t.request('POST', '/api/v1/messages', { token, body: { to, body } });
  assert.equal(sent.status, 201, sent.text);
  await until('the message handed to the relay', async () => relay.sends.some((f) => f.messageId === sent.body.id));
  await relay.report(sent.body.id, 'sent');
  await relay.report(sent.body.id, 'delivered');
  await until('the message delivered', async () => (await statusOf(t, token, sent.body.id)) === 'delivered', 10_000);
}

/** `count` accepted sends, at most `inFlight` requests at a time; `to` names the recipient of the n-th. Answers their ids. */
export async function sendMany(
  t: TestApp,
  token: string,
  opts: { count: number; inFlight: number; to: (n: number) => string; body: string },
): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(opts.inFlight, opts.count) }, async () => {
      while (next < opts.count) {
        const n = next++;
        const res = await t.request('POST', '/api/v1/messages', { token, body: { to: opts.to(n), body: opts.body } });
        if (res.status !== 201) throw new Error(`send: ${res.status} ${res.text}`);
        ids.push(res.body.id);
      }
    }),
  );
  return ids;
}

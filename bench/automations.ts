/**
 * Automation throughput in one process: message.received events appended to
 * the event stream, read by the `automations` consumer group, evaluated
 * against an organization's automations (a mix of operators, a regular
 * expression among them) and run to the end (`create_contact`). It prints
 * events routed per second, executions per second and the latency from the
 * event to its execution done (p50, p99). It reports, it does not assert.
 *
 *   npm run bench:automations
 *   REDIS_URL=redis://127.0.0.1:6379 MONGODB_URL=mongodb://127.0.0.1:27017/relaybox npm run bench:automations
 *
 * BENCH_EVENTS (2000), BENCH_AUTOMATIONS (10; half of them match every event).
 * FerretDB on PostgreSQL needs `pool_max_conns` above twice the client's 50
 * connections, or its findAndModify waits on its own pool for good (docs/benchmarks.md).
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../src/app.ts';
import { executionOutcomes } from '../src/automations/automation-metrics.ts';
import { automationCollections } from '../src/automations/automation-store.ts';
import { loadConfig } from '../src/config.ts';
import { domainEvent } from '../src/events/event-stream.ts';
import { createLogger } from '../src/log.ts';
import { conversationIdOf } from '../src/messages/recipients.ts';
import { discardRunData } from '../test/support/discard-data.ts';

const events = Number(process.env.BENCH_EVENTS || 2_000);
const automations = Number(process.env.BENCH_AUTOMATIONS || 10);
const redisUrl = process.env.REDIS_URL || undefined;
const mongoUrl = process.env.MONGODB_URL || undefined;

const matching = [
  { field: 'body', operator: 'contains', value: 'order' },
  { field: 'body', operator: 'matches_regex', value: '^(?i)where is my order #\\d+\\??$' },
  { field: 'from', operator: 'starts_with', value: '+1' },
];
const notMatching = [
  { field: 'body', operator: 'equals', value: 'stop' },
  { field: 'from', operator: 'is_in', value: '+44 20 7946 0958, +33 1 23 45 67 89' },
];

async function outcomeCount(outcome: string): Promise<number> {
  return (await executionOutcomes.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
}

async function main(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-bench-automations-'));
  const suffix = randomUUID().slice(0, 8);
  const env: Record<string, string> = { DATA_DIR: dataDir, LOG_LEVEL: 'warn', RUNTIME_KEY_PREFIX: `bench-${suffix}` };
  if (redisUrl && mongoUrl) {
    env.REDIS_URL = redisUrl;
    const url = new URL(mongoUrl);
    url.pathname = `/relaybox_bench_${suffix}`;
    env.MONGODB_URL = url.toString();
  }
  const config = loadConfig(env);
  const app = await createApp(config, createLogger('warn'), { consume: true });
  const backend = config.mongoUrl ? 'Redis + MongoDB wire' : 'embedded';
  try {
    const db = automationCollections(app.store);
    const orgId = `org_bench_${suffix}`;
    const teamId = `team_bench_${suffix}`;
    for (let i = 0; i < automations; i++) {
      const rule = await app.automations.service.create(orgId, {
        name: `rule ${i}`,
        trigger: 'message_received',
        logic: 'and',
        conditions: (i % 2 === 0 ? matching : notMatching) as never,
        actions: [{ type: 'create_contact', config: { tags: [`rule-${i}`] } }],
      });
      void rule;
    }
    const matchedPerEvent = Math.ceil(automations / 2);
    // Progress is read from the process's own execution counters, not by counting stored executions: a count
    // over the whole execution log on every poll costs the database as much as the work being measured.
    const notMatchedBefore = await outcomeCount('not_matched');
    const doneBefore = (await outcomeCount('succeeded')) + (await outcomeCount('failed'));
    const started = performance.now();
    const appendedAt = new Map<string, number>();
    const batch = 200;
    for (let i = 0; i < events; i += batch) {
      const chunk = [];
      for (let j = i; j < Math.min(events, i + batch); j++) {
        const from = `+1415${String(1_000_000 + j).slice(-7)}`;
        const id = `msg_bench_${j}`;
        chunk.push(
          domainEvent(
            'message.received',
            { tenantId: orgId, teamId },
            {
              id,
              to: '+14155550000',
              from,
              body: `Where is my order #${j}?`,
              status: 'delivered',
              conversationId: conversationIdOf(orgId, teamId, from),
            },
          ),
        );
        appendedAt.set(id, Date.now());
      }
      await app.events.append(chunk);
    }
    const expected = events * automations;
    const expectedDone = events * matchedPerEvent;
    const notMatchedTarget = expected - expectedDone + notMatchedBefore;
    const doneTarget = expectedDone + doneBefore;
    let routedMs = 0;
    for (;;) {
      if (!routedMs && (await outcomeCount('not_matched')) >= notMatchedTarget) routedMs = performance.now() - started;
      const done = (await outcomeCount('succeeded')) + (await outcomeCount('failed'));
      if (done >= doneTarget) break;
      if (performance.now() - started > 600_000)
        throw new Error(
          `only ${expectedDone - (doneTarget - done)} of ${expectedDone} executions done after 10 minutes`,
        );
      await new Promise((r) => setTimeout(r, 50));
    }
    const totalMs = performance.now() - started;
    const done = await db.executions.find({ tenantId: orgId }, { matched: true, state: 'done' });
    if (done.length !== expectedDone)
      throw new Error(`${done.length} executions stored as done, ${expectedDone} expected`);
    const latencies = done.map((d) => Date.parse(d.updatedAt) - appendedAt.get(d.messageId)!).sort((a, b) => a - b);
    const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))];
    console.log(
      `automations bench (${backend}, load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(
          ' ',
        )}): ${events} message.received events x ${automations} automations (${matchedPerEvent} match each, create_contact)`,
    );
    console.log(
      `  evaluated and logged: ${expected} executions in ${(routedMs / 1000).toFixed(1)} s = ${Math.round((events / routedMs) * 1000)} events/s`,
    );
    console.log(
      `  run to the end:       ${expectedDone} executions in ${(totalMs / 1000).toFixed(1)} s = ${Math.round((expectedDone / totalMs) * 1000)} executions/s`,
    );
    console.log(`  event appended -> execution done: p50 ${pct(50)} ms, p99 ${pct(99)} ms`);
    const counted = (await db.automations.find({ tenantId: orgId }, {})).reduce((sum, a) => sum + a.executionCount, 0);
    console.log(`  executionCount summed over the automations: ${counted} of ${expectedDone}`);
  } finally {
    await app.close();
    await discardRunData(config, dataDir);
  }
}

await main();

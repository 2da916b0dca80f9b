/**
 * The embedded store at scale: fills BENCH_MESSAGES (1,000,000) messages
 * across BENCH_ORGS (100) organizations, each team reading its history once
 * at the end (its first read ever, timed: the store keeps a large count from a
 * team's first read on, across restarts), then, once the disk has written
 * the fill back, in a fresh process on that DATA_DIR (with the service's
 * Node flags), measures the restart (open to first answered read), the reads of
 * recent history (a team's first page of GET /messages and a conversation's
 * thread, each with its count, as MessageQueries reads them), the writes a
 * send makes (message insert with its outbox, conversation upsert, outbox
 * cleared) at that size, and the RSS and DATA_DIR size. It reports, it does
 * not assert.
 *
 * Then, in another fresh process and DATA_DIR, one team's history of
 * BENCH_PAGE_MESSAGES (1,000,000) messages, four a millisecond, read as
 * GET /messages reads it (`readListPage`), 100 a page: the whole of it page
 * after page by cursor (each message seen once, in order, is checked), then
 * the first page, the second and the last (the 10,000th) by cursor, and the
 * last by offset.
 *
 * Then, in another fresh process and DATA_DIR, message statistics: the
 * rollups of BENCH_STATS_MESSAGES (1,000,000) messages of one organization
 * spread over 24 h (each accepted, sent and delivered, written through the
 * rollup write path in batches of 64 as the send path's group commits and
 * status batches write them), then the 24 h query GET /api/v1/stats/messages
 * answers (the rollups read and the buckets built), at 1m and 1h and at 1m
 * for one sender number: the median of 21 runs each.
 *
 *   npm run bench:store
 *   BENCH_BASELINE=/path/to/checkout npm run bench:store
 *   BENCH_MESSAGES=0 BENCH_PAGE_MESSAGES=200000 npm run bench:store   (the paging part only, smaller)
 *   BENCH_MESSAGES=0 BENCH_PAGE_MESSAGES=0 npm run bench:store   (the statistics part only)
 *
 * BENCH_BASELINE names a checkout of an earlier version whose
 * src/store/embedded-store.ts is measured the same way beside it, at
 * BENCH_BASELINE_MESSAGES (150,000: the store that keeps everything in memory
 * needs about 4 KB of RAM per message). BENCH_SECONDS (5) is the length of the
 * write phase, BENCH_READS (300) the number of each read. BENCH_DATA_DIR keeps
 * this version's filled directory there (and reuses it when it is filled).
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { SortKeys } from '../src/http/list-cursors.ts';
import { readListPage, type PageRequest } from '../src/http/pagination.ts';
import { historyOrder } from '../src/messages/message-queries.ts';
import { messagingCollections, type MessageDoc } from '../src/messages/message-store.ts';
import { createLogger } from '../src/log.ts';
import { MessageRollups, RollupTally } from '../src/messages/message-rollups.ts';
import type { Store } from '../src/store/collection.ts';
import { storePhase } from './store-phase.ts';

/** A count from the environment; 0 skips that part. */
const countSetting = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const messages = countSetting('BENCH_MESSAGES', 1_000_000);
const pageMessages = countSetting('BENCH_PAGE_MESSAGES', 1_000_000);
const statsMessages = countSetting('BENCH_STATS_MESSAGES', 1_000_000);
const pageSize = 100;
const orgs = Number(process.env.BENCH_ORGS || 100);
const baseline = process.env.BENCH_BASELINE ? resolve(process.env.BENCH_BASELINE) : undefined;
const baselineMessages = Number(process.env.BENCH_BASELINE_MESSAGES || 150_000);
const writeSeconds = Number(process.env.BENCH_SECONDS || 5);
const reads = Number(process.env.BENCH_READS || 300);
const conversationsPerOrg = 100;
const fillBatch = 1_000;
const mib = (bytes: number) => Math.round(bytes / 2 ** 20);

interface Fill {
  seconds: number;
  rssMiB: number;
  /** A team's first history read ever (page + count), once per organization at the end of the fill: p50 / p99 ms. */
  firstReadP50: number;
  firstReadP99: number;
}

interface Serve {
  restartMs: number;
  /** CPU time of one read (page and count) on average: what the reads cost without the machine's other load. */
  readCpuMs: number;
  listP50: number;
  listP99: number;
  threadP50: number;
  threadP99: number;
  sendsPerSecond: number;
  rssMiB: number;
  maxRssMiB: number;
  heapMiB: number;
}

async function openStore(dir: string, from: string | undefined): Promise<Store> {
  const mod = (await import(from ? join(from, 'src/store/embedded-store.ts') : '../src/store/embedded-store.ts')) as {
    EmbeddedStore: new (dir: string) => Store;
  };
  const store = new mod.EmbeddedStore(dir);
  await store.init();
  return store;
}

const orgId = (o: number) => `org_bench${String(o).padStart(3, '0')}`;
const teamId = (o: number) => `team_bench${String(o).padStart(3, '0')}`;
const start = Date.parse('2026-01-01T00:00:00.000Z');
const listScope = (o: number) => ({ tenantId: orgId(o), teamId: teamId(o) });
/** A team's history, as GET /messages reads it. */
const listFilter = { fanout: { $ne: true } };

function message(i: number, o: number, at: number): MessageDoc {
  const participant = `+1415555${String(((i / orgs) % conversationsPerOrg) | 0).padStart(4, '0')}`;
  const createdAt = new Date(at).toISOString();
  return {
    id: `msg_${String(i).padStart(8, '0')}_${o}`,
    tenantId: orgId(o),
    teamId: teamId(o),
    direction: 'sent',
    status: 'delivered',
    to: participant,
    from: null,
    participant,
    conversationId: `conv_${o}_${participant}`,
    body: 'x'.repeat(50),
    attachments: [],
    priority: 0,
    fromNumber: null,
    attempts: 1,
    lastError: null,
    relayId: 'relay_bench',
    queuedAt: createdAt,
    sentAt: createdAt,
    deliveredAt: createdAt,
    readAt: null,
    createdAt,
    updatedAt: createdAt,
  };
}

async function fill(dir: string, count: number, from: string | undefined): Promise<Fill> {
  const store = await openStore(dir, from);
  const db = messagingCollections(store);
  const began = performance.now();
  for (let i = 0; i < count;) {
    const o = ((i / fillBatch) % orgs) | 0;
    const docs: MessageDoc[] = [];
    for (let k = 0; k < fillBatch && i < count; k++, i++) docs.push(message(i, o, start + i * 10));
    await db.messages.insertMany({ tenantId: orgId(o), teamId: teamId(o) }, docs);
    if (i % 100_000 === 0) process.stderr.write(`filled ${i}\n`);
  }
  for (let o = 0; o < orgs; o++) {
    for (let c = 0; c < conversationsPerOrg; c++) {
      const participant = `+1415555${String(c).padStart(4, '0')}`;
      const at = new Date(start + count * 10).toISOString();
      await db.conversations.insertOne(
        { tenantId: orgId(o), teamId: teamId(o) },
        {
          id: `conv_${o}_${participant}`,
          tenantId: '',
          teamId: '',
          participant,
          isGroup: false,
          lastMessage: 'x',
          lastMessageAt: at,
          unreadCount: 0,
          createdAt: at,
          updatedAt: at,
        },
      );
    }
  }
  const seconds = (performance.now() - began) / 1000;
  const rssMiB = mib(process.memoryUsage().rss);
  // Each team reads its history once, as the teams of a running deployment have: the store keeps large counts from their first read on.
  const first: number[] = [];
  for (let o = 0; o < orgs; o++) {
    const t0 = performance.now();
    await Promise.all([
      db.messages.find(listScope(o), listFilter, { sort: historyOrder, limit: 50 }),
      db.messages.count(listScope(o), listFilter),
    ]);
    first.push(performance.now() - t0);
  }
  first.sort((a, b) => a - b);
  await store.close();
  return { seconds, rssMiB, firstReadP50: percentile(first, 0.5), firstReadP99: percentile(first, 0.99) };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;

async function serve(dir: string, count: number, from: string | undefined): Promise<Serve> {
  const began = performance.now();
  const store = await openStore(dir, from);
  const db = messagingCollections(store);
  await db.messages.findOne({ tenantId: orgId(0), teamId: teamId(0) }, { id: 'msg_00000000_0' });
  const restartMs = performance.now() - began;

  let readCpuUs = 0;
  const timed = async (work: () => Promise<unknown>): Promise<number> => {
    const t0 = performance.now();
    const cpu = process.cpuUsage();
    await work();
    const used = process.cpuUsage(cpu);
    readCpuUs += used.user + used.system;
    return performance.now() - t0;
  };
  const list: number[] = [];
  const thread: number[] = [];
  for (let r = 0; r < reads; r++) {
    const o = (r * 37) % orgs;
    const scope = listScope(o);
    list.push(
      await timed(() =>
        Promise.all([
          db.messages.find(scope, listFilter, { sort: historyOrder, limit: 50 }),
          db.messages.count(scope, listFilter),
        ]),
      ),
    );
    const conversation = {
      conversationId: `conv_${o}_+1415555${String(r % conversationsPerOrg).padStart(4, '0')}`,
      fanout: { $ne: true },
    };
    thread.push(
      await timed(() =>
        Promise.all([
          db.messages.find(scope, conversation, { sort: { createdAt: -1 }, limit: 50 }),
          db.messages.count(scope, conversation),
        ]),
      ),
    );
  }
  list.sort((a, b) => a - b);
  thread.sort((a, b) => a - b);
  const readCpuMs = readCpuUs / 1000 / (2 * reads);

  // What the accept path writes per batch of sends: the messages with their outbox, each conversation touched, the outbox cleared.
  let sent = 0;
  const run = Date.now().toString(36); // a DATA_DIR kept with BENCH_DATA_DIR is served again: each run's messages are new
  const until = performance.now() + writeSeconds * 1000;
  for (let i = count; performance.now() < until;) {
    const o = i % orgs;
    const scope = { tenantId: orgId(o), teamId: teamId(o) };
    const docs: MessageDoc[] = Array.from({ length: 64 }, () => ({
      ...message(i, o, Date.now()),
      id: `msg_${run}_${i++}`,
      status: 'queued',
      outboxAt: new Date().toISOString(),
      outbox: {
        [`evt_${i}`]: { id: `evt_${i}`, type: 'message.queued', data: { id: `msg_${i}` } },
      } as unknown as MessageDoc['outbox'],
    }));
    await db.messages.insertMany(scope, docs);
    await Promise.all(
      [...new Set(docs.map((d) => d.conversationId))].map((id) =>
        db.conversations.updateOne(
          scope,
          { id },
          { $set: { lastMessage: 'y', lastMessageAt: new Date().toISOString() }, $inc: { unreadCount: 0 } },
          { upsert: true },
        ),
      ),
    );
    await db.messages.updateMany(
      scope,
      { id: { $in: docs.map((d) => d.id) } },
      { $unset: { outbox: '', outboxAt: '' } },
    );
    sent += docs.length;
  }
  const sendsPerSecond = sent / writeSeconds;
  const memory = process.memoryUsage();
  const result = {
    restartMs,
    readCpuMs,
    listP50: percentile(list, 0.5),
    listP99: percentile(list, 0.99),
    threadP50: percentile(thread, 0.5),
    threadP99: percentile(thread, 0.99),
    sendsPerSecond,
    rssMiB: mib(memory.rss),
    maxRssMiB: Math.round(process.resourceUsage().maxRSS / 1024),
    heapMiB: mib(memory.heapUsed),
  };
  await store.close();
  return result;
}

interface Paging {
  fillSeconds: number;
  pages: number;
  /** The walk over every page by cursor: its seconds, each page's p50 / p99 ms, and whether it saw each message once, newest first. */
  walkSeconds: number;
  walkP50: number;
  walkP99: number;
  seen: number;
  inOrder: boolean;
  /** Medians, ms: page 1 as asked for without `after` (by offset, with its count), page 2 and the last page by cursor, the last page by offset (with its count). */
  first: number;
  secondByCursor: number;
  lastByCursor: number;
  lastByOffset: number;
}

/** Whether `a` comes before `b` in the history's order: newer, or as new with a greater id. */
const comesBefore = (a: MessageDoc, b: MessageDoc) =>
  a.createdAt > b.createdAt || (a.createdAt === b.createdAt && a.id > b.id);

async function paging(dir: string, count: number): Promise<Paging> {
  const store = await openStore(dir, undefined);
  const db = messagingCollections(store);
  const scope = listScope(0);
  const began = performance.now();
  for (let i = 0; i < count;) {
    const docs: MessageDoc[] = [];
    // Four messages a millisecond: pages end inside a millisecond, where the id orders them.
    for (let k = 0; k < fillBatch && i < count; k++, i++) docs.push(message(i, 0, start + Math.floor(i / 4)));
    await db.messages.insertMany(scope, docs);
    if (i % 100_000 === 0) process.stderr.write(`filled ${i} in one team\n`);
  }
  const fillSeconds = (performance.now() - began) / 1000;
  const read = (q: PageRequest) => readListPage(db.messages, scope, listFilter, historyOrder, q);
  const pages = Math.ceil(count / pageSize);

  const times: number[] = [];
  let after: SortKeys | undefined;
  let toSecond: SortKeys | undefined;
  let toLast: SortKeys | undefined;
  let seen = 0;
  let inOrder = true;
  let previous: MessageDoc | undefined;
  const walkBegan = performance.now();
  for (let n = 1; ; n++) {
    const t0 = performance.now();
    const page = await read({ page: 1, limit: pageSize, after });
    times.push(performance.now() - t0);
    for (const doc of page.data) {
      if (previous && !comesBefore(previous, doc)) inOrder = false;
      previous = doc;
      seen++;
    }
    if (!page.next) break;
    if (n === 1) toSecond = page.next;
    if (n === pages - 1) toLast = page.next;
    after = page.next;
  }
  const walkSeconds = (performance.now() - walkBegan) / 1000;
  times.sort((a, b) => a - b);

  const median = async (rounds: number, q: PageRequest): Promise<number> => {
    const took: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      await read(q);
      took.push(performance.now() - t0);
    }
    return took.sort((a, b) => a - b)[Math.floor(rounds / 2)]!;
  };
  const result: Paging = {
    fillSeconds,
    pages,
    walkSeconds,
    walkP50: percentile(times, 0.5),
    walkP99: percentile(times, 0.99),
    seen,
    inOrder,
    first: await median(21, { page: 1, limit: pageSize }),
    secondByCursor: await median(21, { page: 1, limit: pageSize, after: toSecond }),
    lastByCursor: await median(21, { page: 1, limit: pageSize, after: toLast }),
    lastByOffset: await median(5, { page: pages, limit: pageSize }),
  };
  await store.close();
  return result;
}

async function measurePaging(count: number): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-paging-bench-'));
  try {
    const p = await storePhase<Paging>('pages', dir, count, undefined);
    const ms = (v: number) => `${v.toFixed(2)} ms`;
    return [
      `\nOne team's history of ${count.toLocaleString('en')} messages, ${pageSize} a page (${p.pages.toLocaleString('en')} pages), filled in ${p.fillSeconds.toFixed(0)} s:\n`,
      `| page 1 (no after: by offset, with its count) | page 2 by cursor | page ${p.pages.toLocaleString('en')} by cursor | page ${p.pages.toLocaleString('en')} by offset (with its count) | every page by cursor: s, p50 / p99 per page | messages seen, each once in order |`,
      '|---|---|---|---|---|---|',
      `| ${ms(p.first)} | ${ms(p.secondByCursor)} | ${ms(p.lastByCursor)} | ${ms(p.lastByOffset)} | ${p.walkSeconds.toFixed(1)} s, ${p.walkP50.toFixed(2)} / ${p.walkP99.toFixed(2)} ms | ${p.seen.toLocaleString('en')}, ${p.inOrder && p.seen === count ? 'yes' : 'NO'} |`,
    ].join('\n');
  } catch (err) {
    return `paging: failed: ${(err as Error).message}`;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

interface StatsRun {
  writeSeconds: number;
  rollupWrites: number;
  /** The 24 h query's median ms: at 1m, at 1h, at 1m for one sender number. */
  minutes: number;
  minuteBuckets: number;
  hours: number;
  minutesByNumber: number;
  /** Accepted summed over the minute buckets: every message counted once. */
  counted: number;
  dataDirMiB: number;
}

const statsBatch = 64;
const dayMs = 86_400_000;

async function statistics(dir: string, count: number): Promise<StatsRun> {
  const store = await openStore(dir, undefined);
  const rollups = new MessageRollups(messagingCollections(store).rollups, createLogger('silent'));
  const org = orgId(0);
  const end = Math.floor(Date.now() / 60_000) * 60_000;
  const first = end - dayMs;
  const numbers = Array.from({ length: 10 }, (_, n) => `+1415555${String(9000 + n)}`);
  let rollupWrites = 0;
  const began = performance.now();
  for (let i = 0, batch = 0; i < count; batch++) {
    // A batch is a group commit of one sender line and relay; accept, sent and delivered are three writes, as on the send path.
    const dims = { phoneNumber: numbers[batch % numbers.length], relayId: `relay_bench${batch % 5}` };
    const [accepted, sent, delivered] = [new RollupTally(), new RollupTally(), new RollupTally()];
    for (let k = 0; k < statsBatch && i < count; k++, i++) {
      const at = first + Math.floor((i * dayMs) / count);
      const toSent = 200 + ((i * 7_919) % 3_000);
      accepted.add(org, 'accepted', at, { phoneNumber: dims.phoneNumber });
      sent.add(org, 'sent', at, dims, toSent);
      delivered.add(org, 'delivered', at, dims, toSent + 500 + ((i * 104_729) % 5_000));
    }
    for (const tally of [accepted, sent, delivered]) await rollups.write(tally);
    rollupWrites += 3;
    if (i % 100_000 < statsBatch) process.stderr.write(`statistics of ${i} messages written\n`);
  }
  const writeSeconds = (performance.now() - began) / 1000;
  const median = async (query: Parameters<MessageRollups['read']>[1]): Promise<number> => {
    const took: number[] = [];
    for (let r = 0; r < 21; r++) {
      const t0 = performance.now();
      await rollups.read(org, query);
      took.push(performance.now() - t0);
    }
    return took.sort((a, b) => a - b)[10]!;
  };
  const day = { fromMs: first, toMs: end };
  const minuteBuckets = await rollups.read(org, { ...day, interval: '1m' });
  const counted = minuteBuckets.reduce((sum, b) => sum + b.accepted, 0);
  const result: StatsRun = {
    writeSeconds,
    rollupWrites,
    counted,
    minuteBuckets: minuteBuckets.length,
    minutes: await median({ ...day, interval: '1m' }),
    hours: await median({ ...day, interval: '1h' }),
    minutesByNumber: await median({ ...day, interval: '1m', phoneNumber: numbers[0]! }),
    dataDirMiB: 0,
  };
  await store.close();
  return { ...result, dataDirMiB: sizeMiB(dir) };
}

async function measureStatistics(count: number): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-stats-bench-'));
  try {
    const s = await storePhase<StatsRun>('stats', dir, count, undefined);
    const ms = (v: number) => `${v.toFixed(2)} ms`;
    return [
      `\nMessage statistics of one organization: ${count.toLocaleString('en')} messages over 24 h, each accepted, sent and delivered, ${statsBatch} a batch; load average ${(
        await import('node:os')
      )
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}:\n`,
      `| rollups written: s, writes (msgs/s) | GET /api/v1/stats/messages 24 h at 1m (${s.minuteBuckets.toLocaleString('en')} buckets), median | at 1h, median | at 1m for one sender number, median | messages counted | DATA_DIR MiB |`,
      '|---|---|---|---|---|---|',
      `| ${s.writeSeconds.toFixed(1)} s, ${s.rollupWrites.toLocaleString('en')} (${Math.round(count / s.writeSeconds).toLocaleString('en')}) | ${ms(s.minutes)} | ${ms(s.hours)} | ${ms(s.minutesByNumber)} | ${s.counted.toLocaleString('en')}${s.counted === count ? '' : ' (NOT every message)'} | ${s.dataDirMiB} |`,
    ].join('\n');
  } catch (err) {
    return `statistics: failed: ${(err as Error).message}`;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function sizeMiB(dir: string): number {
  let bytes = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) bytes += statSync(join(entry.parentPath, entry.name)).size;
  return mib(bytes);
}

async function measure(name: string, count: number, from: string | undefined): Promise<string> {
  const kept = from ? undefined : process.env.BENCH_DATA_DIR;
  const dir = kept ?? (await mkdtemp(join(tmpdir(), 'relaybox-store-bench-')));
  try {
    const reuse = kept !== undefined && existsSync(join(kept, 'store.sqlite'));
    const filled = reuse
      ? { seconds: NaN, rssMiB: NaN, firstReadP50: NaN, firstReadP99: NaN }
      : await storePhase<Fill>('fill', dir, count, from);
    const size = sizeMiB(dir);
    // The fill leaves about a GiB for the OS to write back: the restart is measured once the disk has settled, as after a real stop.
    spawnSync('sync');
    const served = await storePhase<Serve>('serve', dir, count, from);
    const ms = (v: number) => v.toFixed(2);
    return `| ${name} | ${count.toLocaleString('en')} | ${Math.round(count / filled.seconds)} | ${filled.rssMiB} | ${size} | ${Math.round(served.restartMs)} | ${ms(filled.firstReadP50)} / ${ms(filled.firstReadP99)} | ${ms(served.listP50)} / ${ms(served.listP99)} | ${ms(served.threadP50)} / ${ms(served.threadP99)} | ${ms(served.readCpuMs)} | ${Math.round(served.sendsPerSecond)} | ${served.rssMiB} (max ${served.maxRssMiB}, heap ${served.heapMiB}) |`;
  } catch (err) {
    return `| ${name} | ${count.toLocaleString('en')} | failed: ${(err as Error).message} | | | | | | | | | |`;
  } finally {
    if (!kept) await rm(dir, { recursive: true, force: true });
  }
}

const [phase, dir, count, from] = process.argv.slice(2);
if (phase === 'fill' || phase === 'serve' || phase === 'pages' || phase === 'stats') {
  const result =
    phase === 'fill'
      ? await fill(dir!, Number(count), from || undefined)
      : phase === 'serve'
        ? await serve(dir!, Number(count), from || undefined)
        : phase === 'pages'
          ? await paging(dir!, Number(count))
          : await statistics(dir!, Number(count));
  process.stdout.write(JSON.stringify(result));
} else if (messages > 0) {
  const rows = [await measure('embedded store (this version)', messages, undefined)];
  if (baseline) rows.push(await measure(`embedded store of ${baseline}`, baselineMessages, baseline));
  console.log(
    `\n${orgs} organizations, ${reads} reads of each kind, ${writeSeconds} s of send writes; load average ${(
      await import('node:os')
    )
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}\n`,
  );
  console.log(
    '| store | messages | fill msgs/s | fill RSS MiB | DATA_DIR MiB | restart ms | first history read of a team ever p50 / p99 ms | history page + count p50 / p99 ms | thread + count p50 / p99 ms | CPU ms per read | send writes msgs/s | RSS MiB after reads and writes |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const row of rows) console.log(row);
}
if (!phase && pageMessages > 0) console.log(await measurePaging(pageMessages));
if (!phase && statsMessages > 0) console.log(await measureStatistics(statsMessages));

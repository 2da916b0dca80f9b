/**
 * GET /api/v1/events at scale on the embedded store: BENCH_MESSAGES
 * (50,000) messages of one organization, to 10,000 recipients, each made
 * as the service makes it (`sentMessage`) and stored in the messages
 * collection as the service declares it (its indexes and stored form),
 * accepted, then handed to its relay and sent, delivered and read through
 * the status path's own writes
 * (`Outbox.changeMany`, 1,000 messages a batch), so four status events and
 * its message.queued each, as the service stores them. Then the history as
 * the route reads it (`EventHistory.list`): its first page, a deep page, a
 * page of one type and a page by cursor from the middle, each with its
 * count, BENCH_READS (50) times; p50 and p99 in ms. Prints the fill's rate,
 * the store's size and how many event rows it holds.
 *
 *   npm run bench:events
 */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createEventLog } from '../src/events/index.ts';
import { changeEventId, domainEvent, messageEventData, type DomainEvent } from '../src/events/event-stream.ts';
import { Outbox } from '../src/events/outbox.ts';
import { StoreEventStream } from '../src/events/store-event-stream.ts';
import { eventCollection, type SubjectDoc } from '../src/events/stored-events.ts';
import { createLogger } from '../src/log.ts';
import { messagingCollections } from '../src/messages/message-store.ts';
import { sentMessage } from '../src/messages/send-service.ts';
import type { Principal } from '../src/roles.ts';
import { platformScope, type Collection } from '../src/store/collection.ts';
import { EmbeddedStore } from '../src/store/embedded-store.ts';

const messages = Number(process.env.BENCH_MESSAGES ?? 50_000);
const reads = Number(process.env.BENCH_READS ?? 50);
const batch = 1_000;
const tenantId = 'org_bench';
const scope = { tenantId };
const principal = { tenantId, teamId: 'team_bench' } as Principal;

type Message = SubjectDoc & { teamId: string; status: string; createdAt: string; attempts: number };

const dir = await mkdtemp(join(tmpdir(), 'relaybox-bench-events-'));
const store = new EmbeddedStore(dir);
try {
  // The messages collection as the service declares it: its indexes and its stored form.
  const subjects = messagingCollections(store).messages as unknown as Collection<SubjectDoc>;
  const history = { retentionDays: 30, subjects };
  const stream = new StoreEventStream(store, undefined, history);
  const { log } = createEventLog(store, stream, history);
  await store.init();
  await stream.ready();
  const outbox = new Outbox(stream, createLogger('silent'));

  const started = performance.now();
  for (let from = 0; from < messages; from += batch) {
    // As the service makes them: accepted (`sentMessage`), then handed to a relay.
    const now = new Date().toISOString();
    const docs = Array.from({ length: Math.min(batch, messages - from) }, (_, k) => {
      const to = `+1415555${String((from + k) % 10_000).padStart(4, '0')}`;
      return {
        ...sentMessage(principal, { to, body: 'Your code is 123456. Bye!', priority: 0 }, to, to, now),
        id: `msg_bench${String(from + k).padStart(8, '0')}`,
        status: 'processing',
        attempts: 1,
        relayId: 'relay_bench',
      } as unknown as Message;
    });
    await stream.insertQueued!(docs, (rows) => subjects.insertMany(scope, rows));
    const at = new Date().toISOString();
    const step = (m: Message, name: 'message.sent' | 'message.delivered' | 'message.read', status: string) =>
      domainEvent(
        name,
        m,
        {
          ...messageEventData({ ...m, status }),
          ...(name === 'message.sent' ? {} : { [name === 'message.read' ? 'readAt' : 'deliveredAt']: at }),
        },
        changeEventId(name, m.id),
      );
    const changes: Array<[string, string, (m: Message) => DomainEvent[]]> = [
      [
        'processing',
        'sent',
        (m) => [
          domainEvent(
            'message.checkpoint',
            m,
            { ...messageEventData({ ...m, status: 'processing' }), hop: 'handed_to_relay', at, attempt: 1 },
            changeEventId('message.checkpoint', `${m.id}:1:handed_to_relay`),
          ),
          step(m, 'message.sent', 'sent'),
        ],
      ],
      ['sent', 'delivered', (m) => [step(m, 'message.delivered', 'delivered')]],
      ['delivered', 'read', (m) => [step(m, 'message.read', 'delivered')]],
    ];
    for (const [status, next, eventsOf] of changes) {
      const read = (await subjects.find(scope, { id: { $in: docs.map((d) => d.id) } })) as unknown as Message[];
      await outbox.changeMany(
        subjects,
        scope,
        read.map((m) => ({
          filter: { id: m.id, status },
          update: { $set: { status: next === 'read' ? 'delivered' : next, updatedAt: at } },
          events: eventsOf(m),
          exclusive: true,
          carrier: m,
        })),
      );
      for (const m of read) m.status = next === 'read' ? 'delivered' : next;
    }
  }
  const fillSeconds = (performance.now() - started) / 1000;
  const eventRows = await eventCollection(store).count(platformScope, {});

  const timed = async (read: () => Promise<unknown>) => {
    const ms: number[] = [];
    for (let i = 0; i < reads; i++) {
      const t = performance.now();
      await read();
      ms.push(performance.now() - t);
    }
    ms.sort((a, b) => a - b);
    const at = (q: number) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))]!.toFixed(2);
    return `${at(0.5)} / ${at(0.99)}`;
  };
  const middle = await log.list(tenantId, { page: Math.floor((messages * 5) / 40), limit: 20 });
  const cursor = middle.data[0]?.cursor as string;
  const rows: Array<[string, () => Promise<unknown>]> = [
    ['first page, newest first', () => log.list(tenantId, { page: 1, limit: 20 })],
    ['page 1,000', () => log.list(tenantId, { page: 1_000, limit: 20 })],
    ['first page of message.delivered', () => log.list(tenantId, { type: 'message.delivered', page: 1, limit: 20 })],
    ['a page by cursor from the middle', () => log.list(tenantId, { after: cursor, page: 1, limit: 20 })],
  ];
  const total = (await log.list(tenantId, { page: 1, limit: 1 })).pagination.total;
  // The log folded back into the file, so its size is the store's, not the pages' history.
  store.first('PRAGMA wal_checkpoint(TRUNCATE)');
  const size = (
    await Promise.all(['store.sqlite', 'store.sqlite-wal'].map((f) => stat(join(dir, f)).catch(() => ({ size: 0 }))))
  ).reduce((sum, s) => sum + s.size, 0);
  console.log(
    `\n${messages.toLocaleString('en')} messages, ${Number(total).toLocaleString('en')} events in the history (${eventRows.toLocaleString('en')} event rows), filled in ${fillSeconds.toFixed(1)} s (${Math.round(messages / fillSeconds).toLocaleString('en')} messages/s with their four status changes), store ${(size / 1048576).toFixed(1)} MiB (${Math.round(size / messages).toLocaleString('en')} B a message)\n`,
  );
  console.log('| GET /api/v1/events, 20 a page, with its count | p50 / p99 ms |');
  console.log('|---|---|');
  for (const [name, read] of rows) console.log(`| ${name} | ${await timed(read)} |`);
} finally {
  await store.close();
  await rm(dir, { recursive: true, force: true });
}

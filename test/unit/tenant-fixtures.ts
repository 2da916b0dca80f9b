import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { LinePacing } from '../../src/actors/tenant/line-pacing.ts';
import { PagedQueue } from '../../src/actors/tenant/queue-pages.ts';
import type { TenantState } from '../../src/actors/tenant/tenant-state.ts';
import { Outbox } from '../../src/events/outbox.ts';
import { StoreEventStream } from '../../src/events/store-event-stream.ts';
import { jobCollections } from '../../src/jobs/job-store.ts';
import { createLogger } from '../../src/log.ts';
import { MessageRollups } from '../../src/messages/message-rollups.ts';
import { messagingCollections, type MessageDoc } from '../../src/messages/message-store.ts';
import { relayCollections, type RelayDoc } from '../../src/relays/relay-store.ts';
import type { ActorContext } from '../../src/runtime/types.ts';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';

/** The line-health rules out of the way, for tests of the pace alone. */
export const healthOff = {
  unansweredCap: 1_000_000,
  followUpsPerDay: 1_000_000,
  jitterMs: 0,
  quietHours: false as const,
  timeZone: 'UTC',
};

export const config = {
  messageRetryBaseMs: 1_000,
  messageMaxAttempts: 3,
  messageSendTimeoutMs: 60_000,
  tenantSweepMs: 30_000,
  undeliveredAfterMs: 600_000,
  tenantQueueWindow: 500,
  pacing: { perSecond: 1_000_000, burst: 1_000_000, newContactsPerDay: 1_000_000, ...healthOff },
};
export const org = 'org_dispatch';
export const scope = { tenantId: org };
export const phone = '+14155550100';

let clock = Date.UTC(2026, 0, 1);
/** A queued single send; each one created after the one before. */
export const message = (id: string, fields: Partial<MessageDoc> = {}): MessageDoc => {
  const at = new Date(clock++).toISOString();
  return {
    id,
    tenantId: org,
    teamId: 'team_1',
    direction: 'sent',
    status: 'queued',
    to: '+14155550199',
    from: null,
    participant: '+14155550199',
    conversationId: 'conv_1',
    body: id,
    attachments: [],
    priority: 0,
    fromNumber: null,
    attempts: 0,
    lastError: null,
    relayId: null,
    queuedAt: at,
    sentAt: null,
    deliveredAt: null,
    readAt: null,
    createdAt: at,
    updatedAt: at,
    ...fields,
  };
};

/** An online relay on its first session. */
export const relay = (id: string, capacity: number, phoneNumbers: string[] = []): RelayDoc => ({
  id,
  tenantId: org,
  teamId: 'team_1',
  name: id,
  status: 'online',
  node: 'node_1',
  capacity,
  phoneNumbers,
  lastHeartbeat: null,
  systemInfo: { hostOsVersion: '14.5', hostname: id },
  health: null,
  secretHash: 'hash',
  inboundCursor: 0,
  session: 1,
  registeredAt: '2026-01-01T00:00:00.000Z',
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
});

/** An embedded store of the test's own, removed after it, holding these relays and messages of `org`. */
export async function tenantStore(t: TestContext, relays: RelayDoc[] = [], stored: MessageDoc[] = []) {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-dispatch-'));
  const store = new EmbeddedStore(dir);
  const db = { ...messagingCollections(store), ...relayCollections(store), ...jobCollections(store) };
  const events = new StoreEventStream(store);
  await store.init();
  t.after(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  if (relays.length > 0) await db.relays.insertMany(scope, relays);
  if (stored.length > 0) await db.messages.insertMany(scope, stored);
  const log = createLogger('silent');
  return { db, events, log, outbox: new Outbox(events, log), rollups: new MessageRollups(db.rollups, log) };
}

/** What a handler sent: to which actor type and key, the message and its delay. */
export interface Sent {
  type: string;
  key: string;
  msg: { kind: string; [field: string]: unknown };
  delayMs?: number;
  workClass?: number;
}

/** A stand-in for an actor's context (the tenant actor on `org` unless `at` says another), holding `state`, that records what is sent. */
export function recordingContext<S = TenantState>(
  state: S,
  at: { type: string; key: string } = { type: 'tenant', key: org },
) {
  const sent: Sent[] = [];
  const ctx: ActorContext<S> = {
    ...at,
    id: 'am_0',
    delivery: 1,
    log: createLogger('silent'),
    state,
    send: async (to, key, msg, opts) => {
      sent.push({ type: to.type, key, msg: msg as Sent['msg'], delayMs: opts?.delayMs, workClass: opts?.workClass });
      return `${ctx.id}:${sent.length}`;
    },
    derivedId: (label) => `${ctx.id}:${label}`,
    deactivate: () => {},
    owned: new AbortController().signal,
  };
  return { ctx, sent };
}

/** A tenant actor's state in memory: these relays online on session 1 (epoch `epoch_<id>`), lines paced at 1 a second and 2 new contacts a day. */
export function tenantState(relays: Array<{ id: string; credits: number; phoneNumbers?: string[] }> = []): TenantState {
  return {
    queue: new PagedQueue(500),
    awaitingDelivery: new Map(),
    smsFallbackDue: new Map(),
    lineRelays: new Map(),
    undeliveredAfterMs: 600_000,
    relays: new Map(
      relays.map((r) => [
        r.id,
        {
          id: r.id,
          session: 1,
          epoch: `epoch_${r.id}`,
          capacity: 10,
          phoneNumbers: r.phoneNumbers ?? [],
          credits: r.credits,
        },
      ]),
    ),
    sweepChain: undefined,
    fresh: true,
    closedSources: new Set(),
    pacing: new LinePacing({ perSecond: 1, burst: 1, newContactsPerDay: 2, ...healthOff }),
  };
}

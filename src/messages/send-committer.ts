import type { Outbox, Outboxed } from '../events/outbox.ts';
import { stageDuration } from '../http/metrics.ts';
import type { Logger } from '../log.ts';
import type { Transport } from '../runtime/types.ts';
import { sentTouch, touchConversations, type ConversationTouch } from './conversation-writer.ts';
import { countMessages } from './message-metrics.ts';
import { RollupTally, type MessageRollups } from './message-rollups.ts';
import type { Scope } from '../store/collection.ts';
import type { MessageDoc, MessagingCollections } from './message-store.ts';
import { queueItemOf, tenantProtocol } from '../actors/tenant/protocol.ts';
import { actorClient } from '../runtime/actor.ts';
import { nextTurn } from '../runtime/ahead-of-bulk.ts';

interface Submission {
  docs: MessageDoc[];
  done(err?: unknown): void;
}

/**
 * Group commits under way at once. While they run the next batch gathers, so
 * batches grow as the database slows; against a remote database more than
 * one lets the next write start while the last one's answer travels back
 * (pipelining), which is what keeps its round trip from bounding the rate.
 * The embedded store writes in the caller's turn and commits once per turn,
 * so there one at a time makes the fewest, largest transactions.
 */
const flushesInFlight = { remote: 3, embedded: 1 };
const persistStage = stageDuration.labels('/api/v1/messages', 'persist');
const enqueueStage = stageDuration.labels('/api/v1/messages', 'enqueue');

/**
 * Group commit of accepted messages: everything submitted while writes are
 * under way goes in the next one, so under load one database round trip per
 * collection, one event append and one actor message per tenant carry a
 * whole batch. A submission resolves once its messages are stored with their
 * message.queued events (durable together) and those events' append to the
 * stream has answered; clearing them from the outbox and putting the
 * messages on their tenant's queue follow in the background, in that order,
 * so a status event never precedes its message.queued.
 */
export class SendCommitter {
  private pending: Submission[] = [];
  private pendingDocs = 0;
  private flushing = 0;
  private scheduled = false;
  private conversationWrites: Promise<void> = Promise.resolve();
  /** Who waits for every submission to be committed, published and queued (a stopping process). */
  private idleWaiters: Array<() => void> = [];
  private readonly tenants;
  private readonly maxFlushesInFlight: number;

  constructor(
    private readonly deps: {
      db: MessagingCollections;
      runtime: Transport;
      outbox: Outbox;
      rollups: MessageRollups;
      log: Logger;
    },
    private readonly batchMax: number,
  ) {
    this.tenants = actorClient(deps.runtime, tenantProtocol);
    this.maxFlushesInFlight = deps.outbox.commitsWithStore ? flushesInFlight.embedded : flushesInFlight.remote;
  }

  submit(docs: MessageDoc[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ docs, done: (err) => (err ? reject(err) : resolve()) });
      this.pendingDocs += docs.length;
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.flushing >= this.maxFlushesInFlight || this.pending.length === 0) return;
    this.scheduled = true;
    // Ahead of a bulk step queued before it: another organization's job does not hold back a single send here.
    void nextTurn().then(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private take(): Submission[] {
    const batch: Submission[] = [];
    let size = 0;
    while (this.pending.length > 0 && (batch.length === 0 || size + this.pending[0]!.docs.length <= this.batchMax)) {
      const next = this.pending.shift()!;
      size += next.docs.length;
      batch.push(next);
    }
    this.pendingDocs -= size;
    return batch;
  }

  /** One group commit; its slot is held until its events are published and its messages queued, so the background work never outruns the writes. */
  private async flush(): Promise<void> {
    const batch = this.take();
    if (batch.length === 0) return;
    this.flushing++;
    this.schedule();
    const docs = batch.flatMap((s) => s.docs);
    try {
      const started = performance.now();
      let unpublished: Array<{ scope: Scope; entries: Outboxed[] }>;
      try {
        unpublished = await this.persist(docs);
      } catch (err) {
        for (const s of batch) s.done(err);
        return;
      }
      const persisted = performance.now();
      countMessages('accepted', docs.filter((d) => !d.fanout).length);
      // The answer waits for the events' append (not for their outbox to be cleared): a frontend that dies just
      // after answering leaves the events in the stream, where only the tenant's sweep would otherwise find them,
      // and that sweep runs only while something (a relay, a later send) keeps the tenant active.
      const { appended, published } = this.publish(unpublished);
      await appended;
      for (const s of batch) s.done();
      await published;
      await this.enqueue(docs);
      // Once per batch: every message in it waited the same time.
      persistStage.observe((persisted - started) / 1000);
      enqueueStage.observe((performance.now() - persisted) / 1000);
    } finally {
      this.flushing--;
      this.schedule();
      if (this.flushing === 0 && this.pending.length === 0) for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  /** Settles once nothing submitted is still being committed, published or queued: a stopping process waits for it before its runtime and store close. */
  idle(): Promise<void> {
    if (this.flushing === 0 && this.pending.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Each message is stored with its message.queued event
   * (Outbox.insertQueued: on the embedded store the message's row carries
   * it, one row; else the event in the message's outbox), each conversation shows its latest message (one bulk write), and
   * the statistics count them accepted (one upsert per bucket, in the same
   * turn: one transaction with the messages on the embedded store).
   * Returns the events still to publish, by scope.
   */
  private async persist(docs: MessageDoc[]): Promise<Array<{ scope: Scope; entries: Outboxed[] }>> {
    const { messages, conversations } = this.deps.db;
    const tally = new RollupTally();
    for (const d of docs)
      if (!d.fanout) tally.add(d.tenantId, 'accepted', Date.parse(d.createdAt), { phoneNumber: d.fromNumber });
    // Messages and their conversations are written side by side: neither needs the other first.
    const [written] = await Promise.all([
      Promise.all(
        [...groupBy(docs, (d) => `${d.tenantId}\u0000${d.teamId}`).values()].map(async (group) => {
          const scope = { tenantId: group[0]!.tenantId, teamId: group[0]!.teamId };
          return { scope, entries: await this.deps.outbox.insertQueued(messages, scope, group) };
        }),
      ),
      this.touchInTurn(docs.filter((d) => !d.fanout).map(sentTouch)),
      this.deps.rollups.write(tally),
    ]);
    return written.filter((w) => w.entries.length > 0);
  }

  /**
   * Conversations are written by one group commit at a time, even while
   * several are in flight: two of them would otherwise race to create the
   * same new conversation (a conflict, and on FerretDB 1.x a connection it
   * never gives back).
   */
  private touchInTurn(touches: ConversationTouch[]): Promise<void> {
    const { conversations } = this.deps.db;
    const mine = this.conversationWrites.then(() => touchConversations(conversations, touches));
    this.conversationWrites = mine.catch(() => undefined);
    return mine;
  }

  /**
   * A failed publish leaves the events in their messages' outboxes, where the tenant's sweep publishes them.
   * `appended` settles once every scope's append has answered (failed or not), `published` once their outboxes are
   * cleared too.
   */
  private publish(unpublished: Array<{ scope: Scope; entries: Outboxed[] }>): {
    appended: Promise<void>;
    published: Promise<void>;
  } {
    const tells: Array<() => void> = [];
    const appended = Promise.all(unpublished.map(() => new Promise<void>((resolve) => tells.push(resolve))));
    const published = Promise.all(
      unpublished.map((u, i) => this.deps.outbox.publish(this.deps.db.messages, u.scope, u.entries, tells[i])),
    );
    return { appended: appended.then(() => undefined), published: published.then(() => undefined) };
  }

  /**
   * After this the messages are on their tenant's queue. A failure here
   * leaves them stored as queued, where the tenant's sweep finds them: the
   * request still succeeds, nothing is lost. The actor message carries the
   * trace of the batch's first message (each message keeps its own in its
   * document, for its relay send and its events).
   */
  private async enqueue(docs: MessageDoc[]): Promise<void> {
    const sendable = docs.filter((d) => !d.fanout);
    try {
      await Promise.all(
        [...groupBy(sendable, (d) => d.tenantId)].map(([tenantId, group]) =>
          this.tenants.send(
            tenantId,
            {
              kind: 'enqueue',
              items: group.map((d) => queueItemOf(d, 'taken')),
            },
            { trace: group[0] },
          ),
        ),
      );
    } catch (err) {
      this.deps.log.warn(
        { err, messages: sendable.length },
        'could not notify the send queue; the sweep will pick the messages up',
      );
    }
  }
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = groups.get(k);
    if (list) list.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

import { AppError, validationError } from '../errors.ts';
import { phoneNumberRule } from '../phone-number.ts';
import type { Principal } from '../roles.ts';
import { paginate, pageWindow, readListPage, type PageRequest } from '../http/pagination.ts';
import type { Filter, Scope, Sort } from '../store/collection.ts';
import {
  publicMessage,
  statusRecord,
  type ConversationDoc,
  type MessageDoc,
  type MessageStatus,
  type MessagingCollections,
  type Waiting,
  type WaitingReason,
} from './message-store.ts';
import { normalizeParticipant } from './recipients.ts';
import type { ContactLookup } from './send-service.ts';

const teamScope = (p: Principal): Scope => ({ tenantId: p.tenantId, teamId: p.teamId });

/** The orders of the lists, each served by an index on both stores (`messagingCollections`): the newest message first, the conversation with the latest activity first. */
export const historyOrder: Sort = { createdAt: -1, id: -1 };
const latestActivityFirst: Sort = { lastMessageAt: -1, id: -1 };

/** A participant filter: a phone number must be a valid one (and is matched as E.164); other values are matched as given. */
function participantOf(raw: string): string {
  const normalized = normalizeParticipant(raw);
  if (normalized) return normalized;
  if (raw.trim().startsWith('+'))
    throw validationError('/participant', `is not a valid phone number: use ${phoneNumberRule}`);
  return raw.trim();
}

/** The read side of messages and conversations, always within the caller's team. */
export class MessageQueries {
  constructor(
    private readonly deps: {
      db: MessagingCollections;
      contacts: ContactLookup;
      /** What the dispatch says a queued message waits for (from its memory, no store read), or null when it does not count it. */
      waiting?: (
        tenantId: string,
        message: Pick<MessageDoc, 'id' | 'fromNumber' | 'to'>,
      ) => Promise<{ waitingFor: WaitingReason; notBefore?: number } | null>;
    },
  ) {}

  /** A team's history, newest first, narrowed by direction, participant, status, bulk job and creation time. */
  async list(
    p: Principal,
    q: PageRequest & {
      direction?: 'sent' | 'received';
      participant?: string;
      status?: MessageStatus;
      jobId?: string;
      since?: string;
      until?: string;
    },
  ) {
    const filter: Filter = { fanout: { $ne: true } };
    if (q.direction) filter.direction = q.direction;
    if (q.participant) filter.participant = participantOf(q.participant);
    if (q.status) filter.status = q.status;
    if (q.jobId) filter.jobId = q.jobId;
    // Stored times are toISOString() strings, so a normalized bound compares in time order.
    const createdAt: Record<string, string> = {};
    if (q.since) createdAt.$gte = new Date(q.since).toISOString();
    if (q.until) createdAt.$lt = new Date(q.until).toISOString();
    if (q.since || q.until) filter.createdAt = createdAt;
    const page = await readListPage(this.deps.db.messages, teamScope(p), filter, historyOrder, q);
    return { ...page, data: page.data.map(publicMessage) };
  }

  private async page(scope: Scope, filter: Filter, page: number, limit: number) {
    const { skip } = pageWindow(page, limit);
    const [docs, total] = await Promise.all([
      this.deps.db.messages.find(scope, filter, { sort: { createdAt: -1 }, skip, limit }),
      this.deps.db.messages.count(scope, filter),
    ]);
    return paginate(docs.map(publicMessage), total, page, limit);
  }

  async one(p: Principal, id: string): Promise<MessageDoc> {
    const doc = await this.deps.db.messages.findOne(teamScope(p), { id });
    if (!doc) throw new AppError('not_found', 'message not found');
    return doc;
  }

  /** One message of the caller's team, as the history lists it. */
  async view(p: Principal, id: string) {
    return publicMessage(await this.one(p, id));
  }

  /** For a signed download link, which names its organization itself. */
  oneInOrg(tenantId: string, id: string): Promise<MessageDoc | null> {
    return this.deps.db.messages.findOne({ tenantId }, { id });
  }

  /** A group send reports the furthest state all its members' messages have reached. */
  async status(p: Principal, id: string) {
    const doc = await this.one(p, id);
    if (!doc.fanout) return statusRecord(doc, await this.waitingOf(p.tenantId, doc));
    const children: MessageDoc[] = [];
    for await (const page of this.deps.db.messages.scan(
      teamScope(p),
      { parentId: id },
      { sort: { createdAt: 1, id: 1 } },
    ))
      children.push(...page);
    const order = ['failed', 'queued', 'processing', 'sent', 'delivered'] as const;
    const least = children.reduce(
      (acc, c) => (order.indexOf(c.status) < order.indexOf(acc) ? c.status : acc),
      'delivered' as MessageDoc['status'],
    );
    const latest = (field: 'sentAt' | 'deliveredAt') =>
      children.every((c) => c[field])
        ? children
            .map((c) => c[field]!)
            .sort()
            .pop()!
        : null;
    return {
      ...statusRecord(doc),
      status: children.length ? least : doc.status,
      attempts: Math.max(0, ...children.map((c) => c.attempts)),
      lastError: children.find((c) => c.lastError)?.lastError ?? null,
      sentAt: latest('sentAt'),
      deliveredAt: latest('deliveredAt'),
      recipients: children.map((c) => ({ id: c.id, to: c.to, status: c.status })),
    };
  }

  /** A queued message's wait: its retry's backoff from the store, anything else from the dispatch; unknown (null) when the dispatch does not answer. */
  private async waitingOf(tenantId: string, doc: MessageDoc): Promise<Waiting> {
    const none = { waitingFor: null, notBefore: null };
    if (doc.status !== 'queued') return none;
    if (doc.nextAttemptAt && Date.parse(doc.nextAttemptAt) > Date.now())
      return {
        waitingFor: doc.failoverCheck?.waitingSince ? 'relay_failover_check' : 'retry_backoff',
        notBefore: doc.nextAttemptAt,
      };
    const hold = await this.deps.waiting?.(tenantId, doc).catch(() => null);
    if (!hold) return none;
    return {
      waitingFor: hold.waitingFor,
      notBefore: hold.notBefore === undefined ? null : new Date(hold.notBefore).toISOString(),
    };
  }

  /**
   * Queue counts of the caller's whole organization, in two commands: one count grouped by status, on the queue's
   * status index (a received message is stored `delivered`, so no direction is asked: asking one would make the
   * embedded store read every matching document), and the dead-lettered among the failed.
   */
  async queueStats(p: Principal) {
    const scope = { tenantId: p.tenantId };
    const notFanout = { fanout: { $ne: true } };
    const [groups, deadLetter] = await Promise.all([
      this.deps.db.messages.countBy(scope, { status: { $in: ['queued', 'processing', 'failed'] }, ...notFanout }, [
        'status',
      ]),
      this.deps.db.messages.count(scope, { status: 'failed', deadLettered: true, direction: 'sent', ...notFanout }),
    ]);
    const of = (status: MessageStatus) => groups.find((g) => g.values[0] === status)?.count ?? 0;
    return { pending: of('queued'), processing: of('processing'), failed: of('failed'), deadLetter };
  }

  async conversations(p: Principal, q: PageRequest & { search?: string }) {
    const scope = teamScope(p);
    let filter: Filter = {};
    if (q.search) {
      // Names live with contacts: a search matches participants directly or through the contacts whose name matches.
      const needle = q.search.trim().toLowerCase();
      const ids: string[] = [];
      for await (const page of this.deps.db.conversations.scan(scope, {}, { sort: latestActivityFirst })) {
        const names = await this.deps.contacts.namesFor(
          scope,
          page.map((c) => c.participant),
        );
        for (const c of page)
          if (
            c.participant.toLowerCase().includes(needle) ||
            (names.get(c.participant) ?? '').toLowerCase().includes(needle)
          )
            ids.push(c.id);
      }
      filter = { id: { $in: ids } };
    }
    const page = await readListPage(this.deps.db.conversations, scope, filter, latestActivityFirst, q);
    return { ...page, data: await this.withNames(scope, page.data) };
  }

  /** One conversation with a page of its messages, newest first; reading it marks it read. */
  async conversation(p: Principal, id: string, q: { page: number; limit: number }) {
    const scope = teamScope(p);
    const doc = await this.deps.db.conversations.updateOne(scope, { id }, { $set: { unreadCount: 0 } });
    if (!doc) throw new AppError('not_found', 'conversation not found');
    const withName = await this.withName(scope, doc);
    const messages = await this.page(scope, { conversationId: id, fanout: { $ne: true } }, q.page, q.limit);
    return { ...withName, messages: messages.data, pagination: messages.pagination };
  }

  async lookup(p: Principal, participant: string) {
    const scope = teamScope(p);
    const doc = await this.deps.db.conversations.findOne(scope, { participant: participantOf(participant) });
    if (!doc) throw new AppError('not_found', 'no conversation with this participant');
    return this.withName(scope, doc);
  }

  private async withName(scope: Scope, doc: ConversationDoc) {
    return (await this.withNames(scope, [doc]))[0]!;
  }

  /** Conversations as the API shows them: with their participant's name, without the dispatch's reply counts (line-pacing.ts). */
  private async withNames(scope: Scope, docs: ConversationDoc[]) {
    const names = await this.deps.contacts.namesFor(
      scope,
      docs.map((d) => d.participant),
    );
    return docs.map(({ tenantId: _t, lastInboundAt: _in, sentSinceReply: _sent, ...c }) => ({
      ...c,
      participantName: names.get(c.participant) ?? null,
    }));
  }
}

import type { WebhookConfig } from '../config.ts';
import { notFound, validationError } from '../errors.ts';
import { paginate, pageWindow, readListPage, type ListPage, type Page, type PageRequest } from '../http/pagination.ts';
import { newId, nowIso } from '../ids.ts';
import type { Logger } from '../log.ts';
import { webhookProtocol } from '../actors/webhook/protocol.ts';
import { actorClient } from '../runtime/actor.ts';
import type { Transport } from '../runtime/types.ts';
import { platformScope, type Filter } from '../store/collection.ts';
import { parseWebhookUrl, resolveTarget, targetRefusal } from './address-guard.ts';
import type { DeliveryAttempts } from './delivery-attempts.ts';
import type { SecretBox } from './secret-box.ts';
import { retryShape } from './retry-schedule.ts';
import { newDelivery } from './webhook-router.ts';
import {
  testEventName,
  type DeliveryView,
  type RetryPolicy,
  type RotatedSecret,
  type WebhookCreate,
  type WebhookUpdate,
  type WebhookView,
} from './webhook-schemas.ts';
import { newSecret, secretFormat, secretProblem } from './webhook-signing.ts';
import {
  orgScope,
  type DeliveryDoc,
  type DeliveryStatus,
  type PreviousSecret,
  type WebhookCollections,
  type WebhookDoc,
} from './webhook-store.ts';

/** How long a change waits for the webhook's actor to drop what it cached; past it, the actor's 1 s cache bounds the delay. */
const changeNoticeMs = 1_000;

export function webhookView(d: WebhookDoc): WebhookView {
  return {
    id: d.id,
    url: d.url,
    events: d.events,
    enabled: d.enabled,
    hasSecret: d.secretSealed !== null,
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
  };
}

export function deliveryView(d: DeliveryDoc): DeliveryView {
  return {
    id: d.id,
    event: d.event,
    eventId: d.eventId,
    status: d.status,
    attempts: d.attempts,
    responseStatus: d.responseStatus,
    lastError: d.lastError,
    nextAttemptAt: d.nextAttemptAt,
    createdAt: d.createdAt,
  };
}

/** Spec 4.7: an organization's webhooks, their delivery log, test deliveries and manual retries. */
export class WebhookService {
  private readonly webhooks;

  constructor(
    private readonly deps: {
      db: WebhookCollections;
      box: SecretBox;
      attempts: DeliveryAttempts;
      runtime: Transport;
      config: WebhookConfig;
      log: Logger;
    },
  ) {
    this.webhooks = actorClient(deps.runtime, webhookProtocol);
  }

  async create(tenantId: string, body: WebhookCreate): Promise<WebhookView> {
    await this.checkUrl(body.url);
    const now = nowIso();
    const doc: WebhookDoc = {
      id: newId('whk'),
      tenantId,
      url: body.url,
      events: body.events,
      enabled: true,
      ...this.sealedSecret(body.secret ?? null),
      activeSince: now,
      createdAt: now,
      updatedAt: now,
    };
    await this.deps.db.webhooks.insertOne(orgScope(tenantId), doc);
    await this.deps.db.index.insertOne(platformScope, {
      id: doc.id,
      tenantId: platformScope.tenantId,
      orgId: tenantId,
    });
    return webhookView(doc);
  }

  async list(tenantId: string, q: { page: number; limit: number }): Promise<Page<WebhookView>> {
    const { skip, limit } = pageWindow(q.page, q.limit);
    const [docs, total] = await Promise.all([
      this.deps.db.webhooks.find(orgScope(tenantId), {}, { sort: { createdAt: 1 }, skip, limit }),
      this.deps.db.webhooks.count(orgScope(tenantId), {}),
    ]);
    return paginate(docs.map(webhookView), total, q.page, q.limit);
  }

  async get(tenantId: string, id: string): Promise<WebhookView> {
    return webhookView(await this.doc(tenantId, id));
  }

  async update(tenantId: string, id: string, body: WebhookUpdate): Promise<WebhookView> {
    await this.doc(tenantId, id);
    if (body.url !== undefined) await this.checkUrl(body.url);
    const set: Partial<WebhookDoc> = { updatedAt: nowIso() };
    if (body.url !== undefined) set.url = body.url;
    if (body.events !== undefined) set.events = body.events;
    // A secret set here replaces the current one at once; rotateSecret is the change without a gap.
    if (body.secret !== undefined) Object.assign(set, this.sealedSecret(body.secret), { previousSecret: null });
    const doc = await this.deps.db.webhooks.updateOne(orgScope(tenantId), { id }, { $set: set });
    if (!doc) throw notFound('webhook');
    await this.noticeChange(tenantId, id);
    return webhookView(doc);
  }

  /** Deliveries stop at once: the actor forgets the webhook before this answers, and no attempt finds it any more. */
  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await this.deps.db.webhooks.deleteOne(orgScope(tenantId), { id }))) throw notFound('webhook');
    await this.noticeChange(tenantId, id);
    await this.deps.db.deliveries.deleteMany(orgScope(tenantId), { webhookId: id });
    await this.deps.db.index.deleteOne(platformScope, { id });
  }

  /** Enabling again starts from now: what happened while it was disabled is not delivered. */
  async toggle(tenantId: string, id: string): Promise<WebhookView> {
    const current = await this.doc(tenantId, id);
    const now = nowIso();
    const set: Partial<WebhookDoc> = current.enabled
      ? { enabled: false, updatedAt: now }
      : { enabled: true, activeSince: now, updatedAt: now };
    const scope = orgScope(tenantId);
    const doc = await this.deps.db.webhooks.updateOne(scope, { id, enabled: current.enabled }, { $set: set });
    if (!doc) return this.toggle(tenantId, id);
    await this.noticeChange(tenantId, id);
    return webhookView(doc);
  }

  /**
   * A new `whsec_` secret, answered only here. The one it replaces keeps
   * signing beside it for `secretGraceMs`, then it is dropped: when the
   * webhook is next loaded after that, at the latest by the timer set here.
   * A rotation during a grace period drops the older secret at once.
   */
  async rotateSecret(tenantId: string, id: string): Promise<RotatedSecret> {
    const current = await this.doc(tenantId, id);
    const secret = newSecret();
    const until = new Date(Date.now() + this.deps.config.secretGraceMs).toISOString();
    const previous: PreviousSecret | null =
      current.secretSealed === null
        ? null
        : { sealed: current.secretSealed, format: current.secretFormat ?? 'raw', until };
    const set: Partial<WebhookDoc> = { ...this.sealedSecret(secret), previousSecret: previous, updatedAt: nowIso() };
    // Compare-and-set on the sealed secret: of two rotations at once, the second keeps the first's secret as its previous one.
    const doc = await this.deps.db.webhooks.updateOne(
      orgScope(tenantId),
      { id, secretSealed: current.secretSealed },
      { $set: set },
    );
    if (!doc) return this.rotateSecret(tenantId, id);
    await this.noticeChange(tenantId, id);
    if (previous)
      await this.webhooks.send(id, { kind: 'changed', tenantId }, { delayMs: this.deps.config.secretGraceMs });
    return { ...webhookView(doc), secret, previousSecretExpiresAt: previous?.until ?? null };
  }

  /** Newest first, on the index over (webhookId, createdAt, id). */
  /** How failed deliveries are tried again, as configured. */
  retryPolicy(): RetryPolicy {
    const { maxAttempts, retryBaseMs, retryCapMs } = this.deps.config;
    return { maxAttempts, firstRetryMs: retryBaseMs, maxDelayMs: retryCapMs, ...retryShape };
  }

  async deliveries(
    tenantId: string,
    id: string,
    q: PageRequest & { status?: DeliveryStatus; event?: string; eventId?: string },
  ): Promise<ListPage<DeliveryView>> {
    await this.doc(tenantId, id);
    const filter: Filter = { webhookId: id };
    if (q.status) filter.status = q.status;
    if (q.event) filter.event = q.event;
    if (q.eventId) filter.eventId = q.eventId;
    const page = await readListPage(this.deps.db.deliveries, orgScope(tenantId), filter, { createdAt: -1, id: 1 }, q);
    return { ...page, data: page.data.map(deliveryView) };
  }

  /** A signed `webhook.test` delivery, made now and recorded with its outcome; it is not retried. */
  async test(tenantId: string, id: string): Promise<DeliveryView> {
    const hook = await this.loaded(tenantId, id);
    const now = nowIso();
    const delivery = newDelivery(
      hook.doc,
      { id: newId('evt'), event: testEventName, timestamp: now, data: { webhookId: id } },
      now,
    );
    const result = await this.deps.attempts.send(hook, delivery);
    const doc: DeliveryDoc = {
      ...delivery,
      status: result.ok ? 'succeeded' : 'failed',
      attempts: 1,
      responseStatus: result.responseStatus,
      lastError: result.error,
      nextAttemptAt: null,
      updatedAt: nowIso(),
    };
    await this.deps.db.deliveries.insertOne(orgScope(tenantId), doc);
    if (result.responseStatus === 410) await this.deps.attempts.disable(hook.doc);
    return deliveryView(doc);
  }

  /** One more attempt now, signed with the current secret and a fresh timestamp, under the same webhook-id. */
  async retry(tenantId: string, id: string, deliveryId: string): Promise<DeliveryView> {
    const hook = await this.loaded(tenantId, id);
    const delivery = await this.deps.db.deliveries.findOne(orgScope(tenantId), { id: deliveryId, webhookId: id });
    if (!delivery) throw notFound('delivery');
    const { doc } = await this.deps.attempts.attempt(hook, delivery, { manual: true });
    if (!doc) throw notFound('delivery');
    return deliveryView(doc);
  }

  private async doc(tenantId: string, id: string): Promise<WebhookDoc> {
    const doc = await this.deps.db.webhooks.findOne(orgScope(tenantId), { id });
    if (!doc) throw notFound('webhook');
    return doc;
  }

  private async loaded(tenantId: string, id: string) {
    const hook = await this.deps.attempts.loadWebhook(tenantId, id);
    if (!hook) throw notFound('webhook');
    return hook;
  }

  /** The stored form of a secret set now; a `whsec_` value that is not a Standard Webhooks key is refused (400). */
  private sealedSecret(secret: string | null): Pick<WebhookDoc, 'secretSealed' | 'secretFormat'> {
    if (secret === null) return { secretSealed: null };
    const problem = secretProblem(secret);
    if (problem) throw validationError('/secret', problem);
    return { secretSealed: this.deps.box.seal(secret), secretFormat: secretFormat(secret) };
  }

  /** Refused at once (400) rather than at every delivery: not http(s), or a host that is not a public address. */
  private async checkUrl(raw: string): Promise<void> {
    const parsed = parseWebhookUrl(raw);
    if (!parsed.ok) throw validationError('/url', parsed.reason);
    const target = await resolveTarget(parsed.url, this.deps.config.allowPrivate);
    if (!target.ok) throw validationError('/url', targetRefusal(target));
  }

  private async noticeChange(tenantId: string, id: string): Promise<void> {
    try {
      await this.webhooks.ask(id, { kind: 'changed', tenantId }, changeNoticeMs);
    } catch (err) {
      this.deps.log.warn(
        { err, webhookId: id },
        'webhook actor did not confirm a change; its cache expires within a second',
      );
    }
  }
}

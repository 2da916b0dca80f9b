import type { ReadEvent } from '../events/event-stream.ts';
import { nowIso } from '../ids.ts';
import { livemodeOf } from '../test-mode.ts';
import { webhookProtocol, type PendingDelivery } from '../actors/webhook/protocol.ts';
import { actorClient } from '../runtime/actor.ts';
import type { Transport } from '../runtime/types.ts';
import { insertNew } from '../store/insert-new.ts';
import { deliveryId, orgScope, type DeliveryDoc, type WebhookCollections, type WebhookDoc } from './webhook-store.ts';
import { platformScope } from '../store/collection.ts';
import { chunks } from '../chunks.ts';
import { copyTrace, type TraceCarrier } from '../tracing/trace-context.ts';
import { deliveryPayload } from './delivery-payload.ts';

/** Deliveries per actor message, so one message stays small on the wire. */
const acceptChunk = 200;

/** A delivery of event `e`, carrying its trace context when it has one. */
export function newDelivery(
  hook: Pick<WebhookDoc, 'id' | 'tenantId'>,
  e: { id: string; event: string; timestamp: string; data: Record<string, unknown> } & TraceCarrier,
  at: string,
): DeliveryDoc {
  return copyTrace<DeliveryDoc>(
    {
      id: deliveryId(hook.id, e.id),
      tenantId: hook.tenantId,
      webhookId: hook.id,
      event: e.event,
      eventId: e.id,
      status: 'pending',
      attempts: 0,
      responseStatus: null,
      lastError: null,
      nextAttemptAt: at,
      payload: deliveryPayload(e, livemodeOf(hook.tenantId)),
      createdAt: at,
      updatedAt: at,
    },
    e,
  );
}

/**
 * Turns a batch of the event stream into deliveries: for each event, one per
 * enabled webhook of its organization that subscribes to it and was active
 * when it happened (events from before a webhook existed, or from while it
 * was disabled, are not delivered). Deliveries are stored first, under ids
 * derived from webhook and event, then handed to their webhook's actor. A
 * batch read again after a crash stores nothing twice; what it finds stored
 * already is left to the webhook's sweep, which attempts only what is still
 * pending, so nothing settled is sent again.
 */
export class WebhookRouter {
  private readonly webhooks;

  constructor(private readonly deps: { db: WebhookCollections; runtime: Transport }) {
    this.webhooks = actorClient(deps.runtime, webhookProtocol);
  }

  async route(batch: ReadEvent[]): Promise<void> {
    const byOrg = new Map<string, ReadEvent['event'][]>();
    for (const { event } of batch) {
      const list = byOrg.get(event.tenantId);
      if (list) list.push(event);
      else byOrg.set(event.tenantId, [event]);
    }
    await Promise.all([...byOrg].map(([tenantId, events]) => this.routeOrg(tenantId, events)));
  }

  private async routeOrg(tenantId: string, events: ReadEvent['event'][]): Promise<void> {
    const hooks = await this.deps.db.webhooks.find(orgScope(tenantId), { enabled: true });
    if (hooks.length === 0) return;
    const now = nowIso();
    const perHook = new Map<string, DeliveryDoc[]>();
    for (const hook of hooks) {
      const docs = events
        .filter((e) => hook.events.includes(e.event) && e.timestamp >= hook.activeSince)
        .map((e) => newDelivery(hook, e, now));
      if (docs.length > 0) perHook.set(hook.id, docs);
    }
    const all = [...perHook.values()].flat();
    const inserted = new Set((await insertNew(this.deps.db.deliveries, orgScope(tenantId), all)).map((d) => d.id));
    await Promise.all(
      [...perHook].flatMap(([hookId, docs]) => {
        const fresh = docs.filter((d) => inserted.has(d.id));
        const sends = chunks(fresh, acceptChunk).map((chunk) =>
          this.webhooks.send(hookId, { kind: 'accept', tenantId, deliveries: chunk as PendingDelivery[] }),
        );
        if (fresh.length < docs.length) sends.push(this.webhooks.send(hookId, { kind: 'sweep', tenantId }));
        return sends;
      }),
    );
  }

  /** When a worker starts: every webhook looks for deliveries a dead worker left behind. */
  async sweepAll(): Promise<void> {
    const index = await this.deps.db.index.find(platformScope, {});
    await Promise.all(index.map((entry) => this.webhooks.send(entry.id, { kind: 'sweep', tenantId: entry.orgId })));
  }
}

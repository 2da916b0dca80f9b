import type { WebhookConfig } from '../config.ts';
import { nowIso } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { Filter } from '../store/collection.ts';
import { nextStep, type NextStep } from './retry-schedule.ts';
import type { AttemptResult } from './webhook-sender.ts';
import type { SecretBox } from './secret-box.ts';
import { deliveryAttempts, deliveryDuration, observeFirstAttempt } from './webhook-metrics.ts';
import type { WebhookSender } from './webhook-sender.ts';
import type { DeliveryLog } from './delivery-log.ts';
import { deliveryPayloadTime } from './delivery-payload.ts';
import { deliveryHeaders, signingKey } from './webhook-signing.ts';
import { endSpan, outgoingTrace, SpanKind, startSpan, tracingOn } from '../tracing/spans.ts';
import { copyTrace } from '../tracing/trace-context.ts';
import { orgScope, type DeliveryDoc, type WebhookCollections, type WebhookDoc } from './webhook-store.ts';

/** A webhook as an attempt needs it: its secrets opened once into HMAC keys, kept only in memory. */
export interface LoadedWebhook {
  doc: WebhookDoc;
  /** The current secret's key; null: deliveries are unsigned. */
  key: Buffer | null;
  /** The key a rotation replaced and when (ms) it stops signing. */
  previous: { key: Buffer; until: number } | null;
}

/** The keys that sign at `now`: the current one first, the previous one only within its grace period. */
function keysAt(hook: LoadedWebhook, now: number): Buffer[] {
  const keys = hook.key ? [hook.key] : [];
  if (hook.previous && hook.previous.until > now) keys.push(hook.previous.key);
  return keys;
}

export interface AttemptOutcome {
  /**
   * The delivery as stored after the attempt, when there is something to
   * follow up (a retry); null when another attempt recorded first (it is not
   * ours to follow up) or a scheduled attempt succeeded (recorded in a batch).
   */
  doc: DeliveryDoc | null;
  step: NextStep;
}

/** Makes one attempt of a delivery and records it; the caller schedules what follows. */
export class DeliveryAttempts {
  constructor(
    private readonly deps: {
      db: WebhookCollections;
      deliveryLog: DeliveryLog;
      box: SecretBox;
      sender: WebhookSender;
      config: WebhookConfig;
      log: Logger;
    },
  ) {}

  async loadWebhook(tenantId: string, webhookId: string): Promise<LoadedWebhook | null> {
    const doc = await this.deps.db.webhooks.findOne(orgScope(tenantId), { id: webhookId });
    if (!doc) return null;
    const key =
      doc.secretSealed === null ? null : signingKey(this.deps.box.open(doc.secretSealed), doc.secretFormat ?? 'raw');
    const previous = doc.previousSecret;
    if (!previous) return { doc, key, previous: null };
    const until = Date.parse(previous.until);
    if (until <= Date.now()) {
      // Its grace period is over: the previous secret is dropped, not merely left unused (compare-and-set, a newer rotation stays).
      await this.deps.db.webhooks.updateOne(
        orgScope(tenantId),
        { id: webhookId, 'previousSecret.until': previous.until },
        { $set: { previousSecret: null } },
      );
      return { doc: { ...doc, previousSecret: null }, key, previous: null };
    }
    return { doc, key, previous: { key: signingKey(this.deps.box.open(previous.sealed), previous.format), until } };
  }

  /**
   * `manual`: a retry asked for through the API. It is one extra attempt:
   * a pending delivery keeps its schedule when it fails, a settled one stays
   * failed; it signs with the webhook's keys as they are now (both during a
   * rotation) and a fresh timestamp.
   */
  /**
   * `onSent` is called once the endpoint answered (or failed to), before the
   * outcome is recorded: the endpoint is free for the next attempt then.
   */
  async attempt(
    hook: LoadedWebhook,
    delivery: DeliveryDoc,
    opts: { manual?: boolean; onSent?: () => void } = {},
  ): Promise<AttemptOutcome> {
    if (!opts.manual && delivery.attempts === 0) observeFirstAttempt(deliveryPayloadTime(delivery.payload));
    const result = await this.send(hook, delivery);
    opts.onSent?.();
    const attempts = delivery.attempts + 1;
    const { step, status, nextAttemptAt } = opts.manual
      ? afterManual(result, delivery)
      : afterScheduled(result, attempts, this.deps.config);
    let doc: DeliveryDoc | null = null;
    if (!opts.manual && status === 'succeeded') {
      // The common case, recorded with the other successes of the moment in one write (delivery-log.ts).
      await this.deps.deliveryLog.succeeded(delivery, result.responseStatus);
    } else {
      // Compare-and-set on the attempt count: a duplicate attempt (a worker taken over mid-flight) records nothing twice.
      const filter: Filter = opts.manual
        ? { id: delivery.id }
        : { id: delivery.id, status: 'pending', attempts: delivery.attempts };
      doc = await this.deps.db.deliveries.updateOne(orgScope(delivery.tenantId), filter, {
        $set: {
          status,
          responseStatus: result.responseStatus,
          lastError: result.error,
          nextAttemptAt,
          updatedAt: nowIso(),
        },
        $inc: { attempts: 1 },
      });
    }
    deliveryAttempts.inc({ outcome: status === 'pending' ? 'retrying' : status });
    if (step.kind === 'gone') await this.disable(hook.doc);
    if (!result.ok)
      this.deps.log.info(
        { webhookId: hook.doc.id, deliveryId: delivery.id, attempts, status, error: result.error },
        'webhook attempt failed',
      );
    return { doc, step };
  }

  /**
   * The HTTP request of an attempt, recorded nowhere (a test delivery is
   * stored with its outcome in one write). It continues the event's trace
   * (`traceparent`, `tracestate`) with a span id of its own: a client span
   * while tracing is on.
   */
  async send(
    hook: LoadedWebhook,
    delivery: Pick<DeliveryDoc, 'eventId' | 'event' | 'payload' | 'traceparent' | 'tracestate'>,
  ): Promise<AttemptResult> {
    const span = tracingOn()
      ? startSpan('webhook POST', SpanKind.CLIENT, delivery, {
          'http.request.method': 'POST',
          'relaybox.webhook_id': hook.doc.id,
          'relaybox.event': delivery.event,
          'relaybox.event_id': delivery.eventId,
        })
      : undefined;
    const headers = copyTrace(
      deliveryHeaders({ webhookId: delivery.eventId, body: delivery.payload, keys: keysAt(hook, Date.now()) }),
      outgoingTrace(span, delivery),
    );
    const result = await this.deps.sender.attempt(hook.doc.url, headers, delivery.payload);
    deliveryDuration.observe(result.durationMs / 1000);
    if (span) {
      if (result.responseStatus !== null) span.setAttribute('http.response.status_code', result.responseStatus);
      endSpan(span, result.ok ? undefined : result.error);
    }
    return result;
  }

  /** The endpoint answered 410: it is gone, so nothing more is sent to it until someone enables it again. */
  async disable(doc: WebhookDoc): Promise<void> {
    await this.deps.db.webhooks.updateOne(
      orgScope(doc.tenantId),
      { id: doc.id, enabled: true },
      { $set: { enabled: false, updatedAt: nowIso() } },
    );
    this.deps.log.warn({ webhookId: doc.id }, 'webhook disabled: its endpoint answered 410 Gone');
  }

  /** Settles a delivery that can no longer be made (its webhook was disabled). */
  async abandon(delivery: DeliveryDoc, reason: string): Promise<void> {
    await this.deps.db.deliveries.updateOne(
      orgScope(delivery.tenantId),
      { id: delivery.id, status: 'pending' },
      {
        $set: { status: 'failed', lastError: reason, nextAttemptAt: null, updatedAt: nowIso() },
      },
    );
  }
}

interface Settlement {
  step: NextStep;
  status: DeliveryDoc['status'];
  nextAttemptAt: string | null;
}

function afterScheduled(result: AttemptResult, attempts: number, config: WebhookConfig): Settlement {
  const step = nextStep(result, attempts, config);
  if (step.kind === 'retry')
    return { step, status: 'pending', nextAttemptAt: new Date(Date.now() + step.delayMs).toISOString() };
  return { step, status: step.kind === 'succeeded' ? 'succeeded' : 'failed', nextAttemptAt: null };
}

/** A manual retry that fails leaves a pending delivery on its schedule and a settled one failed. */
function afterManual(result: AttemptResult, delivery: DeliveryDoc): Settlement {
  if (result.ok) return { step: { kind: 'succeeded' }, status: 'succeeded', nextAttemptAt: null };
  if (result.responseStatus === 410) return { step: { kind: 'gone' }, status: 'failed', nextAttemptAt: null };
  if (delivery.status === 'pending')
    return { step: { kind: 'failed' }, status: 'pending', nextAttemptAt: delivery.nextAttemptAt };
  return { step: { kind: 'failed' }, status: 'failed', nextAttemptAt: null };
}

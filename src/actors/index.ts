import type { Config } from '../config.ts';
import type { EventStream } from '../events/event-stream.ts';
import type { Outbox } from '../events/outbox.ts';
import type { Logger } from '../log.ts';
import type { JobCollections } from '../jobs/job-store.ts';
import type { MessagingCollections } from '../messages/message-store.ts';
import type { MessageRollups } from '../messages/message-rollups.ts';
import type { RelayLink } from '../relays/relay-link.ts';
import type { RelayCollections } from '../relays/relay-store.ts';
import { actorClient } from '../runtime/actor.ts';
import type { ActorDefinition, Transport } from '../runtime/types.ts';
import type { AutomationActions } from '../automations/automation-actions.ts';
import type { AutomationCollections } from '../automations/automation-store.ts';
import type { DeliveryAttempts } from '../webhooks/delivery-attempts.ts';
import { exposePendingDeliveries } from '../webhooks/webhook-metrics.ts';
import type { WebhookCollections } from '../webhooks/webhook-store.ts';
import { automationActor } from './automation/automation.actor.ts';
import { AutomationRunner } from './automation/automation-runner.ts';
import { jobActor } from './job/job.actor.ts';
import { JobTracker } from './job/job-tracker.ts';
import { jobProtocol } from './job/protocol.ts';
import { InboundRecorder } from './relay/inbound-recorder.ts';
import { relayActor } from './relay/relay.actor.ts';
import { RelaySends } from './relay/relay-sends.ts';
import { RelaySessions } from './relay/relay-sessions.ts';
import { tenantActor } from './tenant/tenant.actor.ts';
import { TenantDispatcher } from './tenant/tenant-dispatcher.ts';
import { webhookActor } from './webhook/webhook.actor.ts';
import { WebhookLanes } from './webhook/webhook-lanes.ts';

export interface ActorDeps {
  config: Config;
  log: Logger;
  db: MessagingCollections & RelayCollections & JobCollections;
  webhookDb: WebhookCollections;
  automationDb: AutomationCollections;
  runtime: Transport;
  events: EventStream;
  /** Status changes written with their events (shared with the send path). */
  outbox: Outbox;
  /** Message statistics, counted with the status changes (shared with the send path). */
  rollups: MessageRollups;
  /** Frames to the frontend that holds a relay's socket. */
  link: RelayLink;
  /** One HTTP attempt of a webhook delivery (the webhooks feature's). */
  attempts: DeliveryAttempts;
  /** What an automation's actions do (the automations feature's). */
  actions: AutomationActions;
  /** The organization's cancelled bulk jobs whose messages the dispatch must not hand out; `closed` are those it has closed already. */
  closedSources: (orgId: string, closed: string[]) => Promise<string[]>;
}

/** Every actor type, built over its stores and the ports it is given: every role registers them all (senders need each type's shards and schemas). */
export function createActors(deps: ActorDeps) {
  const { config, db, outbox, link, rollups } = deps;
  const dispatcher = new TenantDispatcher({ config, db, outbox, rollups, closedSources: deps.closedSources });
  const sends = new RelaySends({ db, link, sendTimeoutMs: config.messageSendTimeoutMs });
  const sessions = new RelaySessions({ db, outbox, sends, heartbeatTimeoutMs: config.relayHeartbeatTimeoutMs });
  const inbound = new InboundRecorder({ db, outbox, rollups, link });
  const jobsLog = deps.log.child({ component: 'jobs' });
  const tracker = new JobTracker({
    db,
    events: deps.events,
    jobs: actorClient(deps.runtime, jobProtocol),
    log: jobsLog,
    trackMs: config.jobTrackMs,
  });
  const lanes = new WebhookLanes({
    attempts: deps.attempts,
    db: deps.webhookDb,
    runtime: deps.runtime,
    config: config.webhook,
    log: deps.log.child({ component: 'webhooks' }),
  });
  exposePendingDeliveries(() => lanes.size);
  const runner = new AutomationRunner({
    db: deps.automationDb,
    actions: deps.actions,
    webhook: config.webhook,
    log: deps.log.child({ component: 'automations' }),
  });
  const definitions: ActorDefinition[] = [
    tenantActor(dispatcher),
    relayActor(sessions, sends, inbound),
    jobActor(tracker),
    webhookActor(lanes),
    automationActor(runner),
  ];
  return {
    definitions,
    /** After the runtime starts consuming: a transport without durable timers lost the bulk jobs' timers with the last process. */
    async recoverTimers(): Promise<void> {
      if (deps.runtime.name !== 'local') return;
      const count = await tracker.recoverTimers();
      if (count > 0) jobsLog.info({ jobs: count }, 'bulk job timers set again after a start');
    },
    /** After the runtime stopped handing them messages: webhook deliveries still running are let go. */
    async close(): Promise<void> {
      await lanes.stop();
    },
  };
}

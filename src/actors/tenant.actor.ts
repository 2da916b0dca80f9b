import type { QueuedMessage } from '../messages/send-queue.ts';
import { tenantActorType, type RelayReport, type StatusReport, type TenantDispatcher } from '../messages/tenant-dispatcher.ts';
import type { InboundReport, InboundRecorder } from '../messages/inbound-recorder.ts';
import type { ActorDefinition } from '../runtime/types.ts';

/** Messages of the tenant actor (`tenant:<orgId>`), by kind. */
export interface TenantMessages {
  enqueue: { kind: 'enqueue'; items: QueuedMessage[] };
  sweep: { kind: 'sweep'; chain: string };
  'relay-online': { kind: 'relay-online' } & RelayReport;
  'relay-ready': { kind: 'relay-ready'; capacity: number } & RelayReport;
  'relay-check': { kind: 'relay-check' } & RelayReport;
  'relay-offline': { kind: 'relay-offline'; reason: string } & RelayReport;
  status: { kind: 'status' } & StatusReport;
  'send-timeout': { kind: 'send-timeout'; messageId: string; relayId: string; attempt: number };
  retry: { kind: 'retry'; messageId: string };
  inbound: { kind: 'inbound' } & InboundReport;
}

type Handlers = { [K in keyof TenantMessages]: (ctx: Parameters<ActorDefinition['handlers'][string]>[0], msg: TenantMessages[K]) => unknown };

/** One actor per organization: its send queue, its relays' credits, and what its relays report. */
export function tenantActor(dispatcher: TenantDispatcher, inbound: InboundRecorder): ActorDefinition {
  const handlers: Handlers = {
    enqueue: (ctx, m) => dispatcher.enqueue(ctx, ctx.key, m.items),
    sweep: (ctx, m) => dispatcher.sweep(ctx, ctx.key, m.chain),
    'relay-online': (ctx, m) => dispatcher.relayOnline(ctx, ctx.key, m.relayId, m.session),
    'relay-ready': (ctx, m) => dispatcher.relayReady(ctx, ctx.key, m),
    'relay-check': (ctx, m) => dispatcher.relayCheck(ctx, ctx.key, m),
    'relay-offline': (ctx, m) => dispatcher.relayOffline(ctx, ctx.key, m, m.reason),
    status: (ctx, m) => dispatcher.status(ctx, ctx.key, m),
    'send-timeout': (ctx, m) => dispatcher.sendTimeout(ctx, ctx.key, m.messageId, m.relayId, m.attempt),
    retry: (ctx, m) => dispatcher.retry(ctx, ctx.key, m.messageId),
    inbound: (ctx, m) => inbound.record(ctx.key, m),
  };
  return { type: tenantActorType, handlers: handlers as ActorDefinition['handlers'] };
}

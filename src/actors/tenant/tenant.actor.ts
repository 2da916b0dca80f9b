import { defineActor, type ActorContext } from '../../runtime/actor.ts';
import { reportsOf, tenantProtocol } from './protocol.ts';
import type { TenantDispatcher } from './tenant-dispatcher.ts';
import type { TenantState } from './tenant-state.ts';

/** One actor per organization: its send queue, and the dispatch of it to its online relays within the credits they grant. */
export function tenantActor(dispatcher: TenantDispatcher) {
  // After its first message, nothing in the state is fresh any more.
  const settled =
    <M, R>(handle: (ctx: ActorContext<TenantState>, m: M) => Promise<R>) =>
    async (ctx: ActorContext<TenantState>, m: M) => {
      try {
        return await handle(ctx, m);
      } finally {
        ctx.state.fresh = false;
      }
    };
  return defineActor<typeof tenantProtocol, TenantState>(tenantProtocol, {
    activate: (ctx) => dispatcher.activate(ctx),
    handlers: {
      enqueue: settled((ctx, m) => dispatcher.enqueue(ctx, m.items)),
      sweep: settled((ctx, m) => dispatcher.sweep(ctx, m.chain)),
      'relay-online': settled((ctx, m) => dispatcher.relayOnline(ctx, m.relayId, m.session)),
      'relay-offline': settled((ctx, m) => dispatcher.relayOffline(ctx, m, m.reason)),
      grant: settled((ctx, m) => dispatcher.grant(ctx, m)),
      returned: settled((ctx, m) => dispatcher.returned(ctx, m.items)),
      status: settled((ctx, m) => dispatcher.status(ctx, m)),
      statuses: settled((ctx, m) => dispatcher.statuses(ctx, reportsOf(m))),
      'send-timeout': settled((ctx, m) => dispatcher.sendTimeout(ctx, m.messageId, m.relayId, m.attempt)),
      retry: settled((ctx, m) => dispatcher.retry(ctx, m.messageId, m.attempts)),
      'close-source': settled((ctx, m) => dispatcher.closeSource(ctx, m.source)),
      pace: settled((ctx) => dispatcher.paceTimer(ctx)),
      'pacing-changed': settled((ctx) => dispatcher.pacingChanged(ctx)),
      inbound: settled((ctx, m) => dispatcher.inbound(ctx, m.from, m.at)),
      waiting: settled((ctx, m) => dispatcher.waiting(ctx, m.messageId, m)),
      usage: settled((ctx, m) => dispatcher.usage(ctx, m.line)),
      estimate: settled((ctx, m) => dispatcher.estimate(ctx, m.source)),
      forecast: settled((ctx, m) => dispatcher.forecast(ctx, m)),
    },
    // A burst of relay reports: one read and one write for all of them.
    batches: {
      status: settled((ctx, ms) => dispatcher.statuses(ctx, ms)),
      statuses: settled((ctx, ms) => dispatcher.statuses(ctx, ms.flatMap(reportsOf))),
    },
  });
}

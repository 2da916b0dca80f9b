/**
 * Type-level checks of the actor API, run by `npm run typecheck` (never
 * executed): each `@ts-expect-error` fails the typecheck if the line below it
 * compiles, so a client that accepts a wrong kind or field is caught.
 */
import { relayProtocol } from '../../src/actors/relay/protocol.ts';
import { tenantProtocol } from '../../src/actors/tenant/protocol.ts';
import { actorClient, defineActor, type ActorContext } from '../../src/runtime/actor.ts';
import type { Transport } from '../../src/runtime/types.ts';

export function clientChecks(runtime: Transport): void {
  const tenants = actorClient(runtime, tenantProtocol);
  const relays = actorClient(runtime, relayProtocol);

  void tenants.send('org_1', { kind: 'retry', messageId: 'msg_1' });
  void tenants.send('org_1', { kind: 'sweep', chain: 'c' }, { delayMs: 1_000 });
  void relays.send('relay_1', { kind: 'ready', tenantId: 'org_1', session: 2, capacity: 5 });

  // @ts-expect-error a kind the tenant actor does not have
  void tenants.send('org_1', { kind: 'retyr', messageId: 'msg_1' });
  // @ts-expect-error a field the message does not have
  void tenants.send('org_1', { kind: 'retry', messageId: 'msg_1', priority: 3 });
  // @ts-expect-error a field of the wrong type
  void tenants.send('org_1', { kind: 'retry', messageId: 42 });
  // @ts-expect-error a required field missing
  void relays.send('relay_1', { kind: 'ready', tenantId: 'org_1', session: 2 });
  void tenants.send('org_1', {
    // @ts-expect-error a relay message sent to the tenant actor
    kind: 'heartbeat',
    tenantId: 'org_1',
    session: 1,
    health: { cpuPercent: 1, memoryUsedBytes: 1, memoryTotalBytes: 1, messagesPerMinute: 1, queueDepth: 0 },
  });
}

export function handlerChecks(ctx: ActorContext<{ n: number }>): void {
  void ctx.send(tenantProtocol, 'org_1', { kind: 'retry', messageId: 'msg_1' });
  // @ts-expect-error ctx.send is typed by the protocol it is given
  void ctx.send(tenantProtocol, 'org_1', { kind: 'connect', tenantId: 'org_1' });

  defineActor(tenantProtocol, {
    // @ts-expect-error every kind needs a handler: this map lacks all but one
    handlers: { retry: (_ctx, msg) => void msg.messageId },
  });
}

import { Type } from '@sinclair/typebox';
import { defineRoute, named, type RouteDef } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import type { RelayRegistry } from './relay-registry.ts';

const relay = named(
  'Relay',
  Type.Object({
    id: Type.String(),
    name: Type.String(),
    status: Type.Union([Type.Literal('online'), Type.Literal('offline')]),
    lastHeartbeat: Type.Union([Type.String(), Type.Null()]),
    systemInfo: Type.Object({ hostOsVersion: Type.String(), hostname: Type.String() }),
    registeredAt: Type.String(),
    teamId: Type.String(),
    phoneNumbers: Type.Array(Type.String()),
    capacity: Type.Integer(),
    /** Why an online relay cannot send (its Messages app writes no rows; it takes no new sends meanwhile); null when it can. */
    degraded: Type.Union([Type.String(), Type.Null()]),
  }),
);
const health = Type.Union([
  Type.Null(),
  named(
    'RelayHealth',
    Type.Object({
      cpuPercent: Type.Number(),
      memoryUsedBytes: Type.Integer(),
      memoryTotalBytes: Type.Integer(),
      messagesPerMinute: Type.Number(),
      queueDepth: Type.Integer(),
      reportedAt: Type.String(),
    }),
  ),
]);

/** Spec 4.6: registration tokens and the organization's relays. */
export function relayRoutes(registry: RelayRegistry): RouteDef[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/tenants/:tenantId/relay-tokens',
      summary: 'A relay registration token: valid 30 minutes, usable once',
      tags: ['relays'],
      minRole: 'admin',
      operationId: 'createRelayToken',
      schema: {
        params: strictObject({ tenantId: Type.String({ minLength: 1, maxLength: 64 }) }),
        body: strictObject({}),
        response: { 201: Type.Object({ token: Type.String(), expiresAt: Type.String() }) },
      },
      handler: async (ctx) => ({ status: 201, body: await registry.createToken(ctx.principal, ctx.params.tenantId) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/relays',
      summary: "The organization's relays",
      tags: ['relays'],
      operationId: 'listRelays',
      schema: { response: { 200: Type.Object({ data: Type.Array(relay) }) } },
      handler: async (ctx) => ({ status: 200, body: { data: await registry.list(ctx.principal) } }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/relays/:id',
      summary: 'One relay with its health: CPU, memory, throughput, queue depth',
      tags: ['relays'],
      operationId: 'getRelay',
      schema: {
        params: strictObject({ id: Type.String({ minLength: 1, maxLength: 64 }) }),
        response: { 200: Type.Object({ ...relay.properties, health }) },
      },
      handler: async (ctx) => ({ status: 200, body: await registry.one(ctx.principal, ctx.params.id) }),
    }),
  ];
}

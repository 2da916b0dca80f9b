import { Type } from '@sinclair/typebox';
import { defineRoute, type RouteDef } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import type { HandleAvailability } from './handle-availability.ts';

const availabilitySchema = Type.Object(
  {
    handle: Type.String({ description: 'the handle as looked up: E.164, or an email lower-cased' }),
    imessage: Type.Union([Type.Boolean(), Type.Null()], {
      description: 'whether the handle is reached on iMessage; null when the relay could not tell (not kept)',
    }),
    checkedAt: Type.String({ format: 'date-time', description: "when the relay's agent answered" }),
    source: Type.String({
      description:
        "how the agent knows: `history` (the service of the newest message with the handle in the Mac's Messages), `simulator`",
    }),
    relayId: Type.String({ description: 'the relay whose agent answered' }),
    cached: Type.Boolean({ description: 'answered from an earlier lookup, within the cache time; no relay was asked' }),
  },
  {
    examples: [
      {
        handle: '+14155550100',
        imessage: true,
        checkedAt: '2026-11-29T16:00:00.000Z',
        source: 'history',
        relayId: 'rly_2Hc8kQ',
        cached: false,
      },
    ],
  },
);

const availabilityParams = strictObject({
  handle: Type.String({
    minLength: 1,
    maxLength: 320,
    description: 'a phone number in E.164 or an email address, URL-encoded (`%2B14155550100`)',
    examples: ['+14155550100'],
  }),
});

const availabilityQuery = strictObject({
  from: Type.Optional(
    Type.String({
      maxLength: 32,
      description: 'ask through the relay that sends from this number (E.164); any online relay otherwise',
    }),
  ),
  refresh: Type.Optional(
    Type.Union([Type.Literal('true'), Type.Literal('false')], {
      description: 'true: ask a relay even when a kept answer is fresh',
    }),
  ),
});

/** Capability lookups (docs/handles.md). */
export function handleRoutes(availability: HandleAvailability): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/handles/:handle/availability',
      summary:
        "Whether a handle is reached on iMessage, asked through an online relay and kept 7 days; each relay's lookups are limited (429 with Retry-After)",
      tags: ['handles'],
      operationId: 'handleAvailability',
      errors: ['conflict', 'rate_limited', 'service_unavailable'],
      schema: { params: availabilityParams, query: availabilityQuery, response: { 200: availabilitySchema } },
      handler: async (ctx) => ({
        status: 200,
        body: await availability.check(ctx.principal.tenantId, ctx.params.handle, {
          ...(ctx.query.from !== undefined ? { from: ctx.query.from } : {}),
          refresh: ctx.query.refresh === 'true',
        }),
      }),
    }),
  ];
}

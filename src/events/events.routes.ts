import { livemodeOf } from '../test-mode.ts';
import { Type } from '@sinclair/typebox';
import { pageSchema, paginationQuery } from '../http/pagination.ts';
import { defineRoute, type RouteDef } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import { cursorPattern } from './event-cursor.ts';
import type { EventHistory } from './event-log.ts';
import { eventNames } from './event-stream.ts';

const eventSchema = Type.Object({
  id: Type.String(),
  event: Type.String(),
  timestamp: Type.String(),
  livemode: Type.Boolean({ description: "false for the events of the organization's test data (a test key's)" }),
  data: Type.Record(Type.String(), Type.Unknown()),
  cursor: Type.String({
    description:
      'Pass as `after` to read the events that came later. Opaque: it orders nothing by itself and means nothing to another organization',
  }),
});

export const eventListQuery = strictObject({
  ...paginationQuery,
  type: Type.Optional(Type.Union(eventNames.map((n) => Type.Literal(n)))),
  after: Type.Optional(Type.String({ minLength: 22, maxLength: 22, pattern: cursorPattern })),
});

/** The organization's events of the last EVENT_RETENTION_DAYS (30 by default). */
export function eventRoutes(log: EventHistory): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/events',
      tags: ['events'],
      summary:
        "The organization's events, newest first; with `after=<cursor>` the ones after it, oldest first (catching up). Kept 30 days",
      schema: { query: eventListQuery, response: { 200: pageSchema(eventSchema) } },
      handler: async (ctx) => {
        const page = await log.list(ctx.principal.tenantId, ctx.query);
        const livemode = livemodeOf(ctx.principal.tenantId);
        return { status: 200, body: { ...page, data: page.data.map((e) => ({ ...e, livemode })) } };
      },
    }),
  ];
}

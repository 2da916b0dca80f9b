import { Type } from '@sinclair/typebox';
import { maxCursorChars, cursorCharacters, type ListCursors } from '../http/list-cursors.ts';
import { listAnswer, listReply, paginationQuery } from '../http/pagination.ts';
import { defineRoute, named, type RouteDef } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import type { Collection } from '../store/collection.ts';
import type { RequestChunkDoc } from './request-chunks.ts';
import { readRequestLog } from './request-reader.ts';

const isoTime = Type.String({ format: 'date-time', maxLength: 40 });
const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export const requestIdPattern = '^[A-Za-z0-9._-]{1,128}$';

export const requestLogEntrySchema = named(
  'RequestLogEntry',
  Type.Object(
    {
      id: Type.String({ description: 'the entry in this log (not the request id)' }),
      at: Type.String({ format: 'date-time', description: 'when the request arrived' }),
      method: Type.String(),
      route: Type.String({ description: 'the route template, e.g. /api/v1/messages/:id' }),
      path: Type.String({ description: 'the path without its query string' }),
      status: Type.Integer(),
      keyId: Type.Union([Type.String(), Type.Null()], {
        description: "the API key's id; null for a user's access token (the dashboard)",
      }),
      requestId: Type.String({ description: 'the X-Request-Id of the answer' }),
      durationMs: Type.Number({ description: 'from the request to the end of its answer' }),
      error: Type.Union([Type.String(), Type.Null()], {
        description: 'the error code of an error answer (validation_error, rate_limited...)',
      }),
    },
    {
      examples: [
        {
          id: 'rqc_3q2xVb8mKk1pZr0aQx7WnA.17',
          at: '2030-01-01T09:00:00.125Z',
          method: 'POST',
          route: '/api/v1/messages',
          path: '/api/v1/messages',
          status: 400,
          keyId: 'key_7Hn2c0Qd9sLxWm4ePa1bZg',
          requestId: '0f8a3b1e-5d47-4c2a-9e61-2b7c4d9a8e10',
          durationMs: 2.4,
          error: 'validation_error',
        },
      ],
    },
  ),
);

export const requestLogQuery = strictObject({
  limit: paginationQuery.limit,
  after: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: maxCursorChars,
      pattern: cursorCharacters,
      description: 'a nextCursor as a page of this list gave it: the page after that one',
    }),
  ),
  status: Type.Optional(
    Type.String({
      pattern: '^[1-5]([0-9]{2}|xx)$',
      maxLength: 3,
      description: 'an exact status (404) or a class (4xx, 5xx)',
    }),
  ),
  method: Type.Optional(Type.Unsafe<(typeof methods)[number]>({ type: 'string', enum: [...methods] })),
  path: Type.Optional(
    Type.String({ minLength: 1, maxLength: 512, pattern: '^/', description: 'the path starts with this' }),
  ),
  keyId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: "an API key's id" })),
  requestId: Type.Optional(
    Type.String({ pattern: requestIdPattern, maxLength: 128, description: 'the X-Request-Id of an answer' }),
  ),
  since: Type.Optional({ ...isoTime, description: 'requests that arrived at this time or later' }),
  until: Type.Optional({ ...isoTime, description: 'requests that arrived before this time' }),
});

/** The organization's API requests of the last 7 days; every role reads it, as the events and the delivery log. */
export function requestLogRoutes(
  chunks: Collection<RequestChunkDoc>,
  cursors: ListCursors,
  now: () => number,
): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/request-log',
      tags: ['request-log'],
      summary:
        "The organization's API requests of the last 7 days, newest first; listed about a second after their answer",
      schema: { query: requestLogQuery, response: { 200: listAnswer(requestLogEntrySchema) } },
      handler: (ctx) =>
        listReply(ctx, cursors, (after) =>
          readRequestLog(chunks, ctx.principal.tenantId, { ...ctx.query, after }, now()),
        ),
    }),
  ];
}

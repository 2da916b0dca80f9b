import { Type } from '@sinclair/typebox';
import { pointer, validationError } from '../errors.ts';
import { defineRoute, type RouteDef } from '../http/route.ts';
import type { ListCursors } from '../http/list-cursors.ts';
import { keysetPaginationQuery, listAnswer, listReply, pageOrAfter } from '../http/pagination.ts';
import { strictObject } from '../http/validation.ts';
import type { MessageQueries } from './message-queries.ts';
import { messageStatuses } from './message-store.ts';
import {
  messageSchema,
  queueStatsSchema,
  singleSendBody,
  sentMessageSchema,
  statusRecordSchema,
} from './message-schemas.ts';
import type { SendService } from './send-service.ts';

const id = strictObject({ id: Type.String({ minLength: 1, maxLength: 64 }) });
/** The field of an answer repeated for an idempotency key, the same every time. */
const replayedFields: Record<string, string> = Object.freeze({ 'idempotent-replayed': 'true' });

/** Spec 4.1 (all but bulk and attachments): send, history, delivery status, queue statistics. */
export function messageRoutes(deps: { send: SendService; queries: MessageQueries; cursors: ListCursors }): RouteDef[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/messages',
      summary: 'Send a message: stored, queued, answered 201',
      tags: ['messages'],
      teamScoped: true,
      operationId: 'sendMessage',
      idempotent: true,
      traced: true,
      errors: ['recipient_opted_out'],
      schema: { body: singleSendBody, response: { 201: sentMessageSchema } },
      async handler(ctx) {
        const answer = await deps.send.send(ctx.principal, ctx.body, ctx.headers['idempotency-key'], ctx.trace);
        return answer.replayed
          ? { status: answer.status, body: answer.body, headers: replayedFields }
          : { status: answer.status, body: answer.body };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/messages',
      summary: 'Sent and received messages, newest first',
      tags: ['messages'],
      teamScoped: true,
      operationId: 'listMessages',
      schema: {
        query: strictObject(
          {
            ...keysetPaginationQuery,
            direction: Type.Optional(Type.Union([Type.Literal('sent'), Type.Literal('received')])),
            participant: Type.Optional(
              Type.String({ minLength: 1, maxLength: 320, description: 'phone number or email' }),
            ),
            status: Type.Optional(
              Type.Union(
                messageStatuses.map((s) => Type.Literal(s)),
                { description: 'current status' },
              ),
            ),
            jobId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'a bulk job' })),
            since: Type.Optional(
              Type.String({ format: 'date-time', maxLength: 40, description: 'created at or after' }),
            ),
            until: Type.Optional(Type.String({ format: 'date-time', maxLength: 40, description: 'created before' })),
          },
          pageOrAfter,
        ),
        response: { 200: listAnswer(messageSchema) },
      },
      handler(ctx) {
        const { since, until } = ctx.query;
        if (since !== undefined && until !== undefined && !(Date.parse(since) < Date.parse(until)))
          throw validationError(pointer('until'), 'must be after `since`');
        return listReply(ctx, deps.cursors, (after) => deps.queries.list(ctx.principal, { ...ctx.query, after }));
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/messages/queue/stats',
      summary: "The organization's send queue: pending, processing, failed, deadLetter",
      tags: ['messages'],
      operationId: 'getQueueStats',
      schema: { response: { 200: queueStatsSchema } },
      handler: async (ctx) => ({ status: 200, body: await deps.queries.queueStats(ctx.principal) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/messages/:id',
      summary: 'One message: recipient, sender, body, conversation, attachments, priority and job',
      tags: ['messages'],
      teamScoped: true,
      operationId: 'getMessage',
      schema: { params: id, response: { 200: messageSchema } },
      handler: async (ctx) => ({ status: 200, body: await deps.queries.view(ctx.principal, ctx.params.id) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/messages/:id/status',
      summary: 'Delivery status of a message',
      tags: ['messages'],
      teamScoped: true,
      operationId: 'getMessageStatus',
      schema: { params: id, response: { 200: statusRecordSchema } },
      handler: async (ctx) => ({ status: 200, body: await deps.queries.status(ctx.principal, ctx.params.id) }),
    }),
  ];
}

import { Type } from '@sinclair/typebox';
import { defineRoute, type RouteDef } from '../http/route.ts';
import type { ListCursors } from '../http/list-cursors.ts';
import { keysetPaginationQuery, listAnswer, listReply, pageOrAfter, paginationQuery } from '../http/pagination.ts';
import { strictObject } from '../http/validation.ts';
import type { MessageQueries } from './message-queries.ts';
import { conversationSchema, conversationWithMessagesSchema } from './message-schemas.ts';

/** Spec 4.4: conversations, kept up to date by every sent and received message. */
export function conversationRoutes(queries: MessageQueries, cursors: ListCursors): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/conversations',
      summary: 'Conversations, most recent activity first',
      tags: ['conversations'],
      teamScoped: true,
      operationId: 'listConversations',
      schema: {
        query: strictObject(
          {
            ...keysetPaginationQuery,
            search: Type.Optional(
              Type.String({ minLength: 1, maxLength: 200, description: 'participant name, phone or email' }),
            ),
          },
          pageOrAfter,
        ),
        response: { 200: listAnswer(conversationSchema) },
      },
      handler: (ctx) =>
        listReply(ctx, cursors, (after) => queries.conversations(ctx.principal, { ...ctx.query, after })),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/conversations/lookup',
      summary: 'The conversation with a participant; 404 when there is none',
      tags: ['conversations'],
      teamScoped: true,
      operationId: 'lookUpConversation',
      schema: {
        query: strictObject({
          participant: Type.String({ minLength: 1, maxLength: 320, description: 'phone number or email' }),
        }),
        response: { 200: conversationSchema },
      },
      handler: async (ctx) => ({ status: 200, body: await queries.lookup(ctx.principal, ctx.query.participant) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/conversations/:id',
      summary: 'A conversation with a page of its messages (newest first); marks it read',
      tags: ['conversations'],
      teamScoped: true,
      operationId: 'getConversation',
      schema: {
        params: strictObject({ id: Type.String({ minLength: 1, maxLength: 64 }) }),
        query: strictObject(paginationQuery),
        response: { 200: conversationWithMessagesSchema },
      },
      handler: async (ctx) => ({
        status: 200,
        body: await queries.conversation(ctx.principal, ctx.params.id, ctx.query),
      }),
    }),
  ];
}

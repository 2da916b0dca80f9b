import { Type } from '@sinclair/typebox';
import { AppError } from '../errors.ts';
import { defineRoute, type RouteDef } from '../http/route.ts';
import { paginationQuery } from '../http/pagination.ts';
import { strictObject } from '../http/validation.ts';
import type { AttachmentLinks } from './attachment-links.ts';
import type { MessageQueries } from './message-queries.ts';
import { messageStatuses } from './message-store.ts';
import { e164Pattern } from './recipients.ts';
import type { SendService } from './send-service.ts';

export const maxBodyChars = 10_000;

const id = strictObject({ id: Type.String({ minLength: 1, maxLength: 64 }) });
const status = Type.Union(messageStatuses.map((s) => Type.Literal(s)));
const nullableString = Type.Union([Type.String(), Type.Null()]);

export const sendBody = strictObject({
  to: Type.String({ minLength: 1, maxLength: 320, description: 'E.164 number, email address, group:<contact group id> or chat:<group chat guid>' }),
  body: Type.Optional(Type.String({ maxLength: maxBodyChars, description: 'required unless attachments are given' })),
  attachments: Type.Optional(Type.Array(Type.String({ format: 'uri', pattern: '^https?://', maxLength: 2048 }), { maxItems: 10 })),
  priority: Type.Integer({ minimum: 0, maximum: 100, default: 0, description: 'higher is sent first' }),
  fromNumber: Type.Optional(Type.String({ pattern: e164Pattern, maxLength: 16, description: 'an active registered phone number of the organization' })),
});

const message = Type.Object({
  id: Type.String(), status, direction: Type.Union([Type.Literal('sent'), Type.Literal('received')]), to: Type.String(), from: nullableString,
  body: Type.String(), priority: Type.Integer(), attachments: Type.Array(Type.String()), fromNumber: nullableString, conversationId: Type.String(),
  attempts: Type.Integer(), lastError: nullableString, relayId: nullableString, teamId: Type.String(),
  queuedAt: nullableString, sentAt: nullableString, deliveredAt: nullableString, readAt: nullableString, createdAt: Type.String(), updatedAt: Type.String(),
});

const statusRecord = Type.Object({
  id: Type.String(), status, attempts: Type.Integer(), lastError: nullableString,
  queuedAt: nullableString, sentAt: nullableString, deliveredAt: nullableString, readAt: nullableString,
});

/** Spec 4.1 (all but bulk): send, history, delivery status, attachments, queue statistics. */
export function messageRoutes(deps: { send: SendService; queries: MessageQueries; links: AttachmentLinks; publicBaseUrl(ctxHost: string | undefined): string }): RouteDef[] {
  return [
    defineRoute({
      method: 'POST', path: '/api/v1/messages', summary: 'Send a message: stored, queued, answered 201', tags: ['messages'], teamScoped: true,
      schema: { body: sendBody, response: { 201: message } },
      async handler(ctx) {
        const answer = await deps.send.send(ctx.principal, ctx.body, ctx.headers['idempotency-key']);
        const headers: Record<string, string> = answer.replayed ? { 'idempotent-replayed': 'true' } : {};
        return { status: answer.status, body: answer.body, headers };
      },
    }),
    defineRoute({
      method: 'GET', path: '/api/v1/messages', summary: 'Sent and received messages, newest first', tags: ['messages'], teamScoped: true,
      schema: {
        query: strictObject({
          ...paginationQuery,
          direction: Type.Optional(Type.Union([Type.Literal('sent'), Type.Literal('received')])),
          participant: Type.Optional(Type.String({ minLength: 1, maxLength: 320, description: 'phone number or email' })),
        }),
      },
      handler: async (ctx) => ({ status: 200, body: await deps.queries.list(ctx.principal, ctx.query) }),
    }),
    defineRoute({
      method: 'GET', path: '/api/v1/messages/queue/stats', summary: "The organization's send queue: pending, processing, failed, deadLetter", tags: ['messages'],
      schema: { response: { 200: Type.Object({ pending: Type.Integer(), processing: Type.Integer(), failed: Type.Integer(), deadLetter: Type.Integer() }) } },
      handler: async (ctx) => ({ status: 200, body: await deps.queries.queueStats(ctx.principal) }),
    }),
    defineRoute({
      method: 'GET', path: '/api/v1/messages/:id/status', summary: 'Delivery status of a message', tags: ['messages'], teamScoped: true,
      schema: { params: id, response: { 200: statusRecord } },
      handler: async (ctx) => ({ status: 200, body: await deps.queries.status(ctx.principal, ctx.params.id) }),
    }),
    defineRoute({
      method: 'GET', path: '/api/v1/messages/:id/attachments', summary: 'Attachments of a message with signed download URLs (valid 1 hour)', tags: ['messages'], teamScoped: true,
      schema: { params: id },
      async handler(ctx) {
        const doc = await deps.queries.one(ctx.principal, ctx.params.id);
        return { status: 200, body: { data: deps.links.entries(deps.publicBaseUrl(ctx.headers.host), ctx.principal.orgId, doc.id, doc.attachments) } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/api/v1/attachments/:token', summary: 'Download an attachment through its signed link', tags: ['messages'], auth: false,
      schema: { params: strictObject({ token: Type.String({ minLength: 1, maxLength: 1024 }) }) },
      async handler(ctx) {
        const claims = deps.links.verify(ctx.params.token);
        if (!claims) throw new AppError('not_found', 'this download link is unknown or expired');
        const doc = await deps.queries.oneInOrg(claims.o, claims.m);
        const source = doc?.attachments[claims.i];
        if (!source) throw new AppError('not_found', 'attachment not found');
        return { status: 302, headers: { location: source, 'cache-control': 'private, no-store' } };
      },
    }),
  ];
}

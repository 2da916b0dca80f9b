import { Type } from '@sinclair/typebox';
import type { ListCursors } from '../http/list-cursors.ts';
import { listAnswer, listReply, pageSchema, paginationQuery } from '../http/pagination.ts';
import { defineRoute, noContent, type RouteDef } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import type { Principal } from '../roles.ts';
import {
  deliveryListQuery,
  deliveryParams,
  deliverySchema,
  retryPolicySchema,
  rotatedSecretSchema,
  webhookCreateBody,
  webhookIdParams,
  webhookSchema,
  webhookUpdateBody,
} from './webhook-schemas.ts';
import type { WebhookService } from './webhook-service.ts';

const tags = ['webhooks'];
const org = (p: Principal) => p.tenantId;

/** Spec 4.7 with the delivery log: admins and owners write, every role reads. Webhooks belong to the organization. */
export function webhookRoutes(service: WebhookService, cursors: ListCursors): RouteDef[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/webhooks',
      summary: 'Register a webhook; its URL must be http(s) to a public address',
      tags,
      minRole: 'admin',
      schema: { body: webhookCreateBody, response: { 201: webhookSchema } },
      handler: async (ctx) => ({ status: 201, body: await service.create(org(ctx.principal), ctx.body) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/webhooks',
      summary: "The organization's webhooks (never their secrets)",
      tags,
      schema: { query: strictObject(paginationQuery), response: { 200: pageSchema(webhookSchema) } },
      handler: async (ctx) => ({ status: 200, body: await service.list(org(ctx.principal), ctx.query) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/webhooks/retry-policy',
      summary: 'How a failed delivery is tried again: attempts, first wait, growth, longest wait, jitter',
      tags,
      operationId: 'getWebhookRetryPolicy',
      schema: { response: { 200: retryPolicySchema } },
      handler: () => ({ status: 200 as const, body: service.retryPolicy() }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/webhooks/:id',
      summary: 'One webhook',
      tags,
      schema: { params: webhookIdParams, response: { 200: webhookSchema } },
      handler: async (ctx) => ({ status: 200, body: await service.get(org(ctx.principal), ctx.params.id) }),
    }),
    defineRoute({
      method: 'PUT',
      path: '/api/v1/webhooks/:id',
      summary: 'Change the URL, events or secret (at once; null removes it)',
      tags,
      minRole: 'admin',
      schema: { params: webhookIdParams, body: webhookUpdateBody, response: { 200: webhookSchema } },
      handler: async (ctx) => ({
        status: 200,
        body: await service.update(org(ctx.principal), ctx.params.id, ctx.body),
      }),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/api/v1/webhooks/:id',
      summary: 'Delete a webhook and its delivery log; no attempt starts after this answers',
      tags,
      minRole: 'admin',
      schema: { params: webhookIdParams, response: { 204: noContent } },
      handler: async (ctx) => {
        await service.delete(org(ctx.principal), ctx.params.id);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/webhooks/:id/rotate-secret',
      tags,
      minRole: 'admin',
      summary:
        'Replace the secret with a new whsec_ key, answered only here; the previous one keeps signing beside it for WEBHOOK_SECRET_GRACE_MS (24 h)',
      schema: { params: webhookIdParams, body: strictObject({}), response: { 200: rotatedSecretSchema } },
      handler: async (ctx) => ({ status: 200, body: await service.rotateSecret(org(ctx.principal), ctx.params.id) }),
    }),
    defineRoute({
      method: 'PATCH',
      path: '/api/v1/webhooks/:id/toggle',
      summary: 'Switch between enabled and disabled; events while disabled are not delivered',
      tags,
      minRole: 'admin',
      schema: { params: webhookIdParams, body: strictObject({}), response: { 200: webhookSchema } },
      handler: async (ctx) => ({ status: 200, body: await service.toggle(org(ctx.principal), ctx.params.id) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/webhooks/:id/deliveries',
      summary: 'The delivery log, newest first; filter by status and event',
      tags,
      schema: { params: webhookIdParams, query: deliveryListQuery, response: { 200: listAnswer(deliverySchema) } },
      handler: (ctx) =>
        listReply(ctx, cursors, (after) =>
          service.deliveries(org(ctx.principal), ctx.params.id, { ...ctx.query, after }),
        ),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/webhooks/:id/deliveries/:deliveryId/retry',
      tags,
      minRole: 'admin',
      summary: 'Send a delivery again now: signed as deliveries are now, fresh timestamp, same webhook-id',
      schema: { params: deliveryParams, body: strictObject({}), response: { 200: deliverySchema } },
      handler: async (ctx) => ({
        status: 200,
        body: await service.retry(org(ctx.principal), ctx.params.id, ctx.params.deliveryId),
      }),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/webhooks/:id/test',
      summary: 'Send a signed webhook.test delivery now; it is recorded in the delivery log',
      tags,
      minRole: 'admin',
      schema: { params: webhookIdParams, body: strictObject({}), response: { 200: deliverySchema } },
      handler: async (ctx) => ({ status: 200, body: await service.test(org(ctx.principal), ctx.params.id) }),
    }),
  ];
}

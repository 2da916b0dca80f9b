import type { ListCursors } from '../http/list-cursors.ts';
import { listAnswer, listReply, pageSchema, paginationQuery } from '../http/pagination.ts';
import { defineRoute, noContent, type RouteDef } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import type { Principal } from '../roles.ts';
import {
  automationBody,
  automationDetailSchema,
  automationIdParams,
  automationSchema,
  executionListQuery,
  executionSchema,
  testBody,
  testResultSchema,
} from './automation-schemas.ts';
import type { AutomationService } from './automation-service.ts';

const tags = ['automations'];
const org = (p: Principal) => p.tenantId;

/** Spec 4.8: admins and owners write, every role reads. Automations belong to the organization and run on every team's messages. */
export function automationRoutes(service: AutomationService, cursors: ListCursors): RouteDef[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/automations',
      summary: 'Create an automation (at most 100 per organization)',
      tags,
      minRole: 'admin',
      schema: { body: automationBody, response: { 201: automationSchema } },
      handler: async (ctx) => ({ status: 201, body: await service.create(org(ctx.principal), ctx.body) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/automations',
      summary: "The organization's automations, oldest first",
      tags,
      schema: { query: strictObject(paginationQuery), response: { 200: pageSchema(automationSchema) } },
      handler: async (ctx) => ({ status: 200, body: await service.list(org(ctx.principal), ctx.query) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/automations/:id',
      summary: 'One automation with its 20 most recent executions',
      tags,
      schema: { params: automationIdParams, response: { 200: automationDetailSchema } },
      handler: async (ctx) => ({ status: 200, body: await service.get(org(ctx.principal), ctx.params.id) }),
    }),
    defineRoute({
      method: 'PUT',
      path: '/api/v1/automations/:id',
      summary: 'Replace an automation whole: the body is the same as for create',
      tags,
      minRole: 'admin',
      schema: { params: automationIdParams, body: automationBody, response: { 200: automationSchema } },
      handler: async (ctx) => ({
        status: 200,
        body: await service.replace(org(ctx.principal), ctx.params.id, ctx.body),
      }),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/api/v1/automations/:id',
      summary: 'Delete an automation and its execution log',
      tags,
      minRole: 'admin',
      schema: { params: automationIdParams, response: { 204: noContent } },
      handler: async (ctx) => {
        await service.delete(org(ctx.principal), ctx.params.id);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'PATCH',
      path: '/api/v1/automations/:id/toggle',
      summary: 'Switch between enabled and disabled; it takes effect for the next message',
      tags,
      minRole: 'admin',
      schema: { params: automationIdParams, body: strictObject({}), response: { 200: automationSchema } },
      handler: async (ctx) => ({ status: 200, body: await service.toggle(org(ctx.principal), ctx.params.id) }),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/automations/:id/test',
      summary: 'Dry run on a sample message: what a real run would match and do; nothing is sent, created or called',
      tags,
      minRole: 'viewer',
      schema: { params: automationIdParams, body: testBody, response: { 200: testResultSchema } },
      handler: async (ctx) => ({
        status: 200,
        body: await service.test(org(ctx.principal), ctx.params.id, ctx.body.message),
      }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/automations/:id/executions',
      summary: 'The execution log, newest first',
      tags,
      schema: { params: automationIdParams, query: executionListQuery, response: { 200: listAnswer(executionSchema) } },
      handler: (ctx) =>
        listReply(ctx, cursors, (after) =>
          service.executions(org(ctx.principal), ctx.params.id, { ...ctx.query, after }),
        ),
    }),
  ];
}

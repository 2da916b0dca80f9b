import { defineRoute, type RouteDef } from '../http/route.ts';
import type { ListCursors } from '../http/list-cursors.ts';
import { listAnswer, listReply, pageSchema } from '../http/pagination.ts';
import type { JobQueries } from './job-queries.ts';
import {
  acceptedJob,
  bulkBody,
  jobDetail,
  jobIdParams,
  jobListQuery,
  jobResult,
  jobSummary,
  resultsQuery,
} from './job-schemas.ts';
import type { JobService } from './job-service.ts';

/** Spec 4.1, bulk: create (now or scheduled), list, detail with progress, per-recipient results, cancel. */
export function jobRoutes(deps: {
  service: JobService;
  queries: JobQueries;
  cursors: ListCursors;
  maxBodyBytes: number;
}): RouteDef[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/messages/bulk',
      summary:
        'Create a bulk job: 1 to 10,000 messages, now or at scheduledAt; all entries valid or nothing is created',
      tags: ['bulk'],
      teamScoped: true,
      operationId: 'createBulkJob',
      idempotent: true,
      traced: true,
      maxBodyBytes: deps.maxBodyBytes,
      schema: { body: bulkBody, response: { 201: acceptedJob } },
      async handler(ctx) {
        const answer = await deps.service.accept(ctx.principal, ctx.body, ctx.headers['idempotency-key'], ctx.trace);
        const headers: Record<string, string> = answer.replayed ? { 'idempotent-replayed': 'true' } : {};
        return { status: answer.status, body: answer.body, headers };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/messages/bulk',
      summary: "The team's bulk jobs, newest first",
      tags: ['bulk'],
      teamScoped: true,
      operationId: 'listBulkJobs',
      schema: { query: jobListQuery, response: { 200: pageSchema(jobSummary) } },
      handler: async (ctx) => ({ status: 200, body: await deps.queries.list(ctx.principal, ctx.query) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/messages/bulk/:jobId',
      summary: 'A bulk job with its counts, progress and estimated completion',
      tags: ['bulk'],
      teamScoped: true,
      operationId: 'getBulkJob',
      schema: { params: jobIdParams, response: { 200: jobDetail } },
      handler: async (ctx) => ({ status: 200, body: await deps.queries.detail(ctx.principal, ctx.params.jobId) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/messages/bulk/:jobId/results',
      summary: 'Per-recipient results of a bulk job, in request order, so far',
      tags: ['bulk'],
      teamScoped: true,
      operationId: 'listBulkJobResults',
      schema: { params: jobIdParams, query: resultsQuery, response: { 200: listAnswer(jobResult) } },
      handler: (ctx) =>
        listReply(ctx, deps.cursors, (after) =>
          deps.queries.results(ctx.principal, ctx.params.jobId, { ...ctx.query, after }),
        ),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/messages/bulk/:jobId/cancel',
      summary: 'Cancel a bulk job: nothing more is handed to a relay; 409 once completed',
      tags: ['bulk'],
      teamScoped: true,
      operationId: 'cancelBulkJob',
      schema: { params: jobIdParams, response: { 200: jobSummary } },
      handler: async (ctx) => ({ status: 200, body: await deps.service.cancel(ctx.principal, ctx.params.jobId) }),
    }),
  ];
}

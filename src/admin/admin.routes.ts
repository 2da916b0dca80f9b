import { Type } from '@sinclair/typebox';
import { pointer, validationError } from '../errors.ts';
import { defineRoute, named, type RouteDef } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import {
  figureWindows,
  tenantFigures,
  topTenants,
  type FigureWindow,
  type TenantFigureName,
  type TenantTopSources,
} from './tenant-top.ts';

const enumOf = <T extends string>(values: readonly T[], description: string) =>
  Type.Unsafe<T>({ type: 'string', enum: [...values], description });

const unit = Type.Unsafe<'messages' | 'seconds'>({ type: 'string', enum: ['messages', 'seconds'] });

const windows = Object.keys(figureWindows) as FigureWindow[];

const tenantTop = named(
  'TenantTop',
  Type.Object({
    by: enumOf(tenantFigures, 'the figure'),
    unit,
    window: Type.Union([enumOf(windows, 'sent, failed'), Type.Null()]),
    from: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'the first bucket counted (sent, failed)',
    }),
    at: Type.String({ format: 'date-time' }),
    data: Type.Array(
      Type.Object({
        organization: Type.Object({ id: Type.String(), name: Type.Union([Type.String(), Type.Null()]) }),
        value: Type.Number(),
        unit,
      }),
      { maxItems: 100, description: 'largest first; none at 0' },
    ),
  }),
);

/** The routes of platform operators: what the platform sees across organizations, reached with a platform-admin key only. */
export function adminRoutes(sources: TenantTopSources): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/admin/tenants/top',
      summary: 'Top organizations by queued, sent or failed messages or webhook lag',
      tags: ['admin'],
      operationId: 'getTopTenants',
      platform: true,
      schema: {
        query: strictObject({
          by: enumOf(tenantFigures, 'queued, sent, failed (messages), webhook_lag (oldest pending delivery, seconds)'),
          limit: Type.Optional(
            Type.Integer({ minimum: 1, maximum: 100, default: 10, description: 'organizations answered' }),
          ),
          window: Type.Optional(enumOf(windows, 'sent and failed only; default 1h (the last 60 one-minute buckets)')),
        }),
        response: { 200: tenantTop },
      },
      async handler(ctx) {
        const q = ctx.query as { by: TenantFigureName; limit: number; window?: FigureWindow };
        if (q.window !== undefined && q.by !== 'sent' && q.by !== 'failed')
          throw validationError(pointer('window'), `applies to by=sent and by=failed only, not by=${q.by}`);
        const body = await topTenants(sources, { by: q.by, limit: q.limit, window: q.window ?? '1h' });
        return { status: 200, body };
      },
    }),
  ];
}

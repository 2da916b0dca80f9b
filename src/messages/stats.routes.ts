import { Type } from '@sinclair/typebox';
import { pointer, validationError } from '../errors.ts';
import { defineRoute, named, type RouteDef } from '../http/route.ts';
import { phoneNumberField, strictObject } from '../http/validation.ts';
import {
  bucketStart,
  maxStatsBuckets,
  rollupIntervals,
  type MessageRollups,
  type RollupInterval,
} from './message-rollups.ts';

const isoTime = Type.String({ format: 'date-time', maxLength: 40 });
const intervalSchema = Type.Unsafe<RollupInterval>({ type: 'string', enum: Object.keys(rollupIntervals) });
const ms = Type.Union([Type.Integer(), Type.Null()]);
const percentiles = named(
  'LatencyPercentiles',
  Type.Object(
    { p50: ms, p95: ms, p99: ms },
    {
      description: 'ms from acceptance (null: no sample), at most 9 % over the true value',
    },
  ),
);
const count = Type.Integer();
const bucket = named(
  'MessageStatsBucket',
  Type.Object({
    start: Type.String({ format: 'date-time' }),
    accepted: count,
    sent: count,
    delivered: count,
    read: count,
    failed: count,
    received: count,
    latency: Type.Object({ sent: percentiles, delivered: percentiles }),
  }),
);
const messageStats = named(
  'MessageStats',
  Type.Object({
    from: Type.String({ format: 'date-time' }),
    to: Type.String({ format: 'date-time' }),
    interval: intervalSchema,
    buckets: Type.Array(bucket, { maxItems: maxStatsBuckets }),
  }),
);

const defaultSpanMs = 24 * 3_600_000;

/**
 * Message statistics of the organization: counts by outcome and latency
 * percentiles per bucket, from the rollups the writes keep (never a read of
 * the messages).
 */
export function statsRoutes(rollups: MessageRollups): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/stats/messages',
      summary: 'Message counts and latency percentiles per minute, hour or day',
      tags: ['messages'],
      operationId: 'getMessageStats',
      schema: {
        query: strictObject({
          from: Type.Optional({ ...isoTime, description: 'default: `to` - 24 h' }),
          to: Type.Optional({ ...isoTime, description: 'default: now' }),
          interval: Type.Optional({ ...intervalSchema, description: 'default: 1h' }),
          phoneNumber: Type.Optional(phoneNumberField('sent from or received on this number')),
          relayId: Type.Optional(
            Type.String({ minLength: 1, maxLength: 64, description: 'through this relay (accepted: 0)' }),
          ),
        }),
        response: { 200: messageStats },
      },
      async handler(ctx) {
        const { phoneNumber, relayId } = ctx.query as { phoneNumber?: string; relayId?: string };
        const interval: RollupInterval = ctx.query.interval ?? '1h';
        const toMs = ctx.query.to === undefined ? Date.now() : Date.parse(ctx.query.to);
        const fromMs = ctx.query.from === undefined ? toMs - defaultSpanMs : Date.parse(ctx.query.from);
        if (!(fromMs < toMs)) throw validationError(pointer('from'), 'must be before `to`');
        if (phoneNumber !== undefined && relayId !== undefined)
          throw validationError(pointer('relayId'), 'give phoneNumber or relayId, not both');
        const buckets = Math.ceil((toMs - bucketStart(fromMs, interval)) / rollupIntervals[interval]);
        if (buckets > maxStatsBuckets) {
          throw validationError(
            pointer('from'),
            `the range holds ${buckets} buckets of ${interval}; at most ${maxStatsBuckets} are answered: shorten it or choose a longer interval`,
          );
        }
        const data = await rollups.read(ctx.principal.tenantId, {
          fromMs,
          toMs,
          interval,
          ...(phoneNumber ? { phoneNumber } : {}),
          ...(relayId ? { relayId } : {}),
        });
        return {
          status: 200,
          body: { from: new Date(fromMs).toISOString(), to: new Date(toMs).toISOString(), interval, buckets: data },
        };
      },
    }),
  ];
}

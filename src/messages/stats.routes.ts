import { Type } from '@sinclair/typebox';
import { pointer, validationError } from '../errors.ts';
import { defineRoute, named, type RouteDef } from '../http/route.ts';
import { phoneNumberField, strictObject } from '../http/validation.ts';
import { bucketStart, maxStatsBuckets, rollupIntervals, type MessageRollups, type RollupInterval } from './message-rollups.ts';

const isoTime = Type.String({ format: 'date-time', maxLength: 40 });
const ms = Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], { description: 'milliseconds; null when the bucket has no sample' });
const percentiles = Type.Object({ p50: ms, p95: ms, p99: ms });
const bucket = named('MessageStatsBucket', Type.Object({
  start: Type.String({ format: 'date-time', description: 'the bucket\'s start; it lasts one interval' }),
  accepted: Type.Integer({ minimum: 0, description: 'messages stored by a send or a bulk job' }),
  sent: Type.Integer({ minimum: 0 }),
  delivered: Type.Integer({ minimum: 0 }),
  read: Type.Integer({ minimum: 0 }),
  failed: Type.Integer({ minimum: 0, description: 'failed after the last attempt (retries are not counted)' }),
  received: Type.Integer({ minimum: 0, description: 'inbound messages' }),
  latency: Type.Object({
    sent: percentiles,
    delivered: percentiles,
  }, { description: 'from acceptance to sent and to delivered, of the messages that reached it in this bucket; each percentile is its histogram bin\'s upper bound, at most 9 % (or 1 ms) above the true value' }),
}));
const messageStats = named('MessageStats', Type.Object({
  from: Type.String({ format: 'date-time' }),
  to: Type.String({ format: 'date-time' }),
  interval: Type.Union([Type.Literal('1m'), Type.Literal('1h'), Type.Literal('1d')]),
  buckets: Type.Array(bucket, { maxItems: maxStatsBuckets }),
}));

const defaultSpanMs = 24 * 3_600_000;

/**
 * Message statistics of the organization: counts by outcome and latency
 * percentiles per bucket, from the rollups the writes keep (never a read of
 * the messages).
 */
export function statsRoutes(rollups: MessageRollups): RouteDef[] {
  return [
    defineRoute({
      method: 'GET', path: '/api/v1/stats/messages', summary: 'Message counts by outcome and latency percentiles, per minute, hour or day', tags: ['messages'],
      operationId: 'getMessageStats',
      schema: {
        query: strictObject({
          from: Type.Optional({ ...isoTime, description: 'ISO 8601; default `to` minus 24 h; the first bucket starts at its floor' }),
          to: Type.Optional({ ...isoTime, description: 'ISO 8601, after `from`; default now' }),
          interval: Type.Optional(Type.Union([Type.Literal('1m'), Type.Literal('1h'), Type.Literal('1d')], { description: 'bucket length, default 1h' })),
          phoneNumber: Type.Optional(phoneNumberField('only the messages of this sender number (E.164): sent from it, or received on it')),
          relayId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'only the messages of this relay (accepted is 0: a message has no relay until it is handed to one)' })),
        }),
        response: { 200: messageStats },
      },
      async handler(ctx) {
        const { phoneNumber, relayId } = ctx.query as { phoneNumber?: string; relayId?: string };
        const interval: RollupInterval = ctx.query.interval ?? '1h';
        const toMs = ctx.query.to === undefined ? Date.now() : Date.parse(ctx.query.to);
        const fromMs = ctx.query.from === undefined ? toMs - defaultSpanMs : Date.parse(ctx.query.from);
        if (!(fromMs < toMs)) throw validationError(pointer('from'), 'must be before `to`');
        if (phoneNumber !== undefined && relayId !== undefined) throw validationError(pointer('relayId'), 'give phoneNumber or relayId, not both');
        const buckets = Math.ceil((toMs - bucketStart(fromMs, interval)) / rollupIntervals[interval]);
        if (buckets > maxStatsBuckets) {
          throw validationError(pointer('from'), `the range holds ${buckets} buckets of ${interval}; at most ${maxStatsBuckets} are answered: shorten it or choose a longer interval`);
        }
        const data = await rollups.read(ctx.principal.orgId, { fromMs, toMs, interval, ...(phoneNumber ? { phoneNumber } : {}), ...(relayId ? { relayId } : {}) });
        return { status: 200, body: { from: new Date(fromMs).toISOString(), to: new Date(toMs).toISOString(), interval, buckets: data } };
      },
    }),
  ];
}

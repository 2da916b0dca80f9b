import { Type, type Static } from '@sinclair/typebox';
import { AppError } from '../errors.ts';
import { metadataSchema } from '../http/metadata.ts';
import { defineRoute, named, type RouteDef } from '../http/route.ts';
import { defineFormat, phoneNumberField, strictObject } from '../http/validation.ts';
import { isTimeZone } from '../time-zone.ts';
import type { Principal } from '../roles.ts';
import { newId, nowIso } from '../ids.ts';
import type { Collection } from '../store/collection.ts';
import type { MessagingCollections, OrgPacingDoc, PhoneNumberDoc } from './message-store.ts';
import type { tenantProtocol } from '../actors/tenant/protocol.ts';
import type { ActorClient } from '../runtime/actor.ts';

const label = Type.String({ maxLength: 200 });
const timeZoneFormat = 'iana-time-zone';
defineFormat(
  timeZoneFormat,
  isTimeZone,
  (v) => `"${v}" is not an IANA time zone (such as Europe/Paris)`,
  'Europe/Paris',
);
const clock = Type.String({ pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$', description: 'local time, HH:MM (24 h)' });
/** Quiet hours, or `false` for none (docs/pacing.md#quiet-hours). */
const quietHours = Type.Union(
  [
    Type.Object({ start: clock, end: clock }, { additionalProperties: false }),
    Type.Literal(false, { description: 'no quiet hours' }),
  ],
  {
    description:
      "local hours in the recipient's time zone when nothing is sent to them (past midnight when start is later than end); false turns them off",
    examples: [{ start: '21:00', end: '08:00' }, false],
  },
);
/** The line-health rules of a pace, as set and as they apply. */
const healthFields = {
  unansweredCap: Type.Integer({
    minimum: 1,
    maximum: 100_000,
    description: 'messages to a recipient who has not replied since, before the line waits for their reply (default 5)',
    examples: [5],
  }),
  followUpsPerDay: Type.Integer({
    minimum: 0,
    maximum: 100_000,
    description:
      'recipients per rolling 24 h the line may write to again while they have not answered its last message (default 200)',
    examples: [200],
  }),
  jitterMs: Type.Integer({
    minimum: 0,
    maximum: 600_000,
    description: 'the most random spacing (ms) between first messages to new recipients; 0 for none (default 2000)',
    examples: [2000],
  }),
  quietHours,
  timeZone: Type.String({
    format: timeZoneFormat,
    maxLength: 64,
    description: 'the zone of a recipient whose number does not tell its zone (default UTC)',
    examples: ['America/New_York'],
  }),
};
/** A pace as set on an organization or a number; what it leaves out comes from the level above (number, organization, defaults). */
const paceSetting = named(
  'PaceSetting',
  Type.Object(
    {
      perSecond: Type.Optional(
        Type.Number({ exclusiveMinimum: 0, maximum: 1000, description: 'messages a second the line sends at most' }),
      ),
      burst: Type.Optional(
        Type.Integer({ minimum: 1, maximum: 1000, description: 'messages the line may send at once after a pause' }),
      ),
      newContactsPerDay: Type.Optional(
        Type.Integer({
          minimum: 0,
          maximum: 100_000,
          description: 'first messages to recipients the line never wrote to, per rolling 24 h',
        }),
      ),
      unansweredCap: Type.Optional(healthFields.unansweredCap),
      followUpsPerDay: Type.Optional(healthFields.followUpsPerDay),
      jitterMs: Type.Optional(healthFields.jitterMs),
      quietHours: Type.Optional(healthFields.quietHours),
      timeZone: Type.Optional(healthFields.timeZone),
    },
    {
      additionalProperties: false,
      examples: [
        { perSecond: 2, newContactsPerDay: 100, unansweredCap: 3, quietHours: { start: '20:00', end: '09:00' } },
        { jitterMs: 0, quietHours: false, timeZone: 'Europe/Paris' },
      ],
    },
  ),
);
/** The organization's undelivered window (actors/tenant/undelivered-watch.ts). */
const deliverySetting = named(
  'DeliverySetting',
  Type.Object(
    {
      undeliveredAfterSeconds: Type.Integer({
        minimum: 1,
        maximum: 604_800,
        description: 'a message sent and not delivered within this many seconds is undelivered (default 600)',
        examples: [600],
      }),
    },
    { additionalProperties: false },
  ),
);
/** A pace as it applies (the deployment's defaults may lie outside what a setting accepts). */
const pace = Type.Object({
  perSecond: Type.Number(),
  burst: Type.Integer(),
  newContactsPerDay: Type.Integer(),
  unansweredCap: Type.Integer(),
  followUpsPerDay: Type.Integer(),
  jitterMs: Type.Integer(),
  quietHours,
  timeZone: Type.String(),
});
type Pace = Static<typeof pace>;
const usage = named(
  'LineUsage',
  Type.Object({
    number: Type.String(),
    pace,
    sentLastMinute: Type.Integer(),
    newContactsToday: Type.Integer({ description: 'first messages to new recipients in the last 24 h' }),
    followUpsToday: Type.Integer({
      description: 'recipients the line wrote to again in the last 24 h while they had not answered its last message',
    }),
    awaitingReply: Type.Integer({
      description: 'recipients the line sent its unanswered cap to: it waits for their reply',
    }),
    nextSlotAt: Type.String({ format: 'date-time', description: 'when the line may send its next message' }),
    nextNewContactSlotAt: Type.String({
      format: 'date-time',
      description: 'when the line may write to a new recipient (its cap and its spacing between first messages)',
    }),
    nextFollowUpSlotAt: Type.String({
      format: 'date-time',
      description: 'when the line may write again to a recipient who has not answered (its follow-up cap)',
    }),
  }),
);
const metadata = metadataSchema;
const phoneNumber = named(
  'PhoneNumber',
  Type.Object({
    id: Type.String(),
    number: Type.String(),
    label: Type.Union([Type.String(), Type.Null()]),
    metadata: Type.Record(Type.String(), Type.String()),
    status: Type.Union([Type.Literal('active'), Type.Literal('deactivated')]),
    deactivatedAt: Type.Union([Type.String(), Type.Null()]),
    pacing: Type.Optional(
      Type.Union([paceSetting, Type.Null()], { description: "this number's own pace, over the organization's" }),
    ),
    createdAt: Type.String(),
    updatedAt: Type.String(),
  }),
);

const show = ({ tenantId: _t, ...doc }: PhoneNumberDoc) => doc;
const orgScope = (p: Principal) => ({ tenantId: p.tenantId });

/**
 * A slow enough pace (`perSecond` may be any positive number, `newContactsPerDay` 0) puts a line's next slot
 * beyond what a date can hold, or never: shown as the last instant of year 9999, which a date-time's four-digit
 * year can say.
 */
const latestSlotMs = Date.parse('9999-12-31T23:59:59.999Z');

/** Spec 4.5 and 3.6: registered sender numbers; delete deactivates, keeping the number and its history. Each number's pace and usage, and the organization's pace and undelivered window. */
export function phoneNumberRoutes(
  db: Pick<MessagingCollections, 'phoneNumbers' | 'orgPacing'>,
  tenants: ActorClient<typeof tenantProtocol>,
  defaultUndeliveredAfterMs: number,
): RouteDef[] {
  const numbers: Collection<PhoneNumberDoc> = db.phoneNumbers;
  /** Stores a setting in the organization's settings document; its tenant actor reads them again (pace and window). */
  const saveSetting = async (principal: Principal, setting: Pick<OrgPacingDoc, 'pacing' | 'delivery'>) => {
    await db.orgPacing.updateOne(
      orgScope(principal),
      { id: principal.tenantId },
      { $set: { ...setting, updatedAt: nowIso() } },
      { upsert: true },
    );
    await tenants.send(principal.tenantId, { kind: 'pacing-changed' });
  };
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/phone-numbers',
      summary: 'Register a sender phone number (a deactivated one is reactivated)',
      tags: ['phone-numbers'],
      minRole: 'admin',
      operationId: 'registerPhoneNumber',
      schema: {
        body: strictObject({ number: phoneNumberField(), label: Type.Optional(label) }),
        response: { 201: phoneNumber },
      },
      async handler(ctx) {
        const now = nowIso();
        const scope = orgScope(ctx.principal);
        const revived = await numbers.updateOne(
          scope,
          { number: ctx.body.number, status: 'deactivated' },
          {
            $set: {
              status: 'active',
              deactivatedAt: null,
              updatedAt: now,
              ...(ctx.body.label !== undefined ? { label: ctx.body.label } : {}),
            },
          },
        );
        if (revived) return { status: 201, body: show(revived) };
        const doc: PhoneNumberDoc = {
          id: newId('pn'),
          tenantId: ctx.principal.tenantId,
          number: ctx.body.number,
          label: ctx.body.label ?? null,
          metadata: {},
          status: 'active',
          deactivatedAt: null,
          createdAt: now,
          updatedAt: now,
        };
        await numbers.insertOne(scope, doc);
        return { status: 201, body: show(doc) };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/phone-numbers',
      summary: 'All registered numbers, active and deactivated',
      tags: ['phone-numbers'],
      operationId: 'listPhoneNumbers',
      schema: { response: { 200: Type.Object({ data: Type.Array(phoneNumber) }) } },
      handler: async (ctx) => ({
        status: 200,
        body: {
          data: (await numbers.find(orgScope(ctx.principal), {}, { sort: { createdAt: 1 }, limit: 1000 })).map(show),
        },
      }),
    }),
    defineRoute({
      method: 'PUT',
      path: '/api/v1/phone-numbers/:id',
      summary: 'Change the label or metadata of a number',
      tags: ['phone-numbers'],
      minRole: 'admin',
      operationId: 'updatePhoneNumber',
      schema: {
        params: strictObject({ id: Type.String({ maxLength: 64 }) }),
        body: strictObject(
          {
            label: Type.Optional(label),
            metadata: Type.Optional(metadata),
            pacing: Type.Optional(Type.Union([paceSetting, Type.Null()])),
          },
          { minProperties: 1 },
        ),
        response: { 200: phoneNumber },
      },
      async handler(ctx) {
        const doc = await numbers.updateOne(
          orgScope(ctx.principal),
          { id: ctx.params.id },
          { $set: { ...ctx.body, updatedAt: nowIso() } },
        );
        if (!doc) throw new AppError('not_found', 'phone number not found');
        if (ctx.body.pacing !== undefined) await tenants.send(ctx.principal.tenantId, { kind: 'pacing-changed' });
        return { status: 200, body: show(doc) };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/phone-numbers/:id/usage',
      summary: "A number's pace, what it sent, its new contacts and follow-ups today and its next free slots",
      tags: ['phone-numbers'],
      operationId: 'phoneNumberUsage',
      schema: { params: strictObject({ id: Type.String({ maxLength: 64 }) }), response: { 200: usage } },
      async handler(ctx) {
        const doc = await numbers.findOne(orgScope(ctx.principal), { id: ctx.params.id });
        if (!doc) throw new AppError('not_found', 'phone number not found');
        const line = await tenants.ask<{
          pace: Pace;
          sentLastMinute: number;
          newContactsToday: number;
          followUpsToday: number;
          awaitingReply: number;
          nextSlotAt: number;
          nextNewContactSlotAt: number;
          nextFollowUpSlotAt: number;
        }>(ctx.principal.tenantId, { kind: 'usage', line: doc.number });
        // Never (Infinity, which the actor's JSON answer carries as null) is the latest slot too.
        const iso = (ms: number) =>
          new Date(Number.isFinite(ms) ? Math.min(ms, latestSlotMs) : latestSlotMs).toISOString();
        return {
          status: 200,
          body: {
            number: doc.number,
            ...line,
            nextSlotAt: iso(line.nextSlotAt),
            nextNewContactSlotAt: iso(line.nextNewContactSlotAt),
            nextFollowUpSlotAt: iso(line.nextFollowUpSlotAt),
          },
        };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/organization/pacing',
      summary: "The organization's pace for its sender lines (a number's own pace goes over it)",
      tags: ['phone-numbers'],
      operationId: 'getOrganizationPacing',
      schema: { response: { 200: paceSetting } },
      handler: async (ctx) => ({
        status: 200,
        body: (await db.orgPacing.findOne(orgScope(ctx.principal), { id: ctx.principal.tenantId }))?.pacing ?? {},
      }),
    }),
    defineRoute({
      method: 'PUT',
      path: '/api/v1/organization/pacing',
      summary: "Set the organization's pace for its sender lines; what it leaves out is the default",
      tags: ['phone-numbers'],
      minRole: 'admin',
      operationId: 'setOrganizationPacing',
      schema: { body: paceSetting, response: { 200: paceSetting } },
      async handler(ctx) {
        await saveSetting(ctx.principal, { pacing: ctx.body });
        return { status: 200, body: ctx.body };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/organization/delivery',
      summary: "The organization's undelivered window",
      tags: ['messages'],
      operationId: 'getOrganizationDelivery',
      schema: { response: { 200: deliverySetting } },
      async handler(ctx) {
        const doc = await db.orgPacing.findOne(orgScope(ctx.principal), { id: ctx.principal.tenantId });
        return {
          status: 200,
          body: doc?.delivery ?? { undeliveredAfterSeconds: Math.round(defaultUndeliveredAfterMs / 1000) },
        };
      },
    }),
    defineRoute({
      method: 'PUT',
      path: '/api/v1/organization/delivery',
      summary: "Set the organization's undelivered window",
      tags: ['messages'],
      minRole: 'admin',
      operationId: 'setOrganizationDelivery',
      schema: { body: deliverySetting, response: { 200: deliverySetting } },
      async handler(ctx) {
        await saveSetting(ctx.principal, { delivery: ctx.body });
        return { status: 200, body: ctx.body };
      },
    }),
    defineRoute({
      method: 'DELETE',
      path: '/api/v1/phone-numbers/:id',
      summary: 'Deactivate a number: kept with its history, no longer used to send',
      tags: ['phone-numbers'],
      minRole: 'admin',
      operationId: 'deactivatePhoneNumber',
      schema: { params: strictObject({ id: Type.String({ maxLength: 64 }) }), response: { 200: phoneNumber } },
      async handler(ctx) {
        const scope = orgScope(ctx.principal);
        const now = nowIso();
        const doc =
          (await numbers.updateOne(
            scope,
            { id: ctx.params.id, status: 'active' },
            { $set: { status: 'deactivated', deactivatedAt: now, updatedAt: now } },
          )) ?? (await numbers.findOne(scope, { id: ctx.params.id }));
        if (!doc) throw new AppError('not_found', 'phone number not found');
        return { status: 200, body: show(doc) };
      },
    }),
  ];
}

import { Type, type Static } from '@sinclair/typebox';
import { AppError, pointer, validationError } from '../errors.ts';
import { metadataSchema } from '../http/metadata.ts';
import { defineRoute, named, type RouteDef } from '../http/route.ts';
import { phoneNumberField, strictObject } from '../http/validation.ts';
import { paceSetting, usage, type Pace } from './pacing-schemas.ts';
import type { Logger } from '../log.ts';
import type { Principal } from '../roles.ts';
import { newId, nowIso } from '../ids.ts';
import type { Collection } from '../store/collection.ts';
import type { MessagingCollections, OrgPacingDoc, PhoneNumberDoc } from './message-store.ts';
import type { tenantProtocol } from '../actors/tenant/protocol.ts';
import type { ActorClient } from '../runtime/actor.ts';
import type { RelayCollections } from '../relays/relay-store.ts';

const label = Type.String({ maxLength: 200 });
/** Relays in a line's chain at most: its primary and three standbys. */
export const maxLineRelays = 4;
const lineRelays = Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
  maxItems: maxLineRelays,
  uniqueItems: true,
  description:
    'the relays that send from this number: the primary first, then its standbys in order (docs/relay-agent.md, "Standby relays"); empty: any relay that owns the number',
});
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
    relays: Type.Optional(lineRelays),
    failedOverTo: Type.Optional(
      Type.Union([Type.String(), Type.Null()], {
        description:
          'the standby sending for this number while its primary is offline (relay.failover); null on the primary',
      }),
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

/** How long a pacing change waits for the dispatch to read it before its answer. */
const settingAskMs = 2_000;

/** Spec 4.5 and 3.6: registered sender numbers; delete deactivates, keeping the number and its history. Each number's pace and usage, and the organization's pace and undelivered window. */
export function phoneNumberRoutes(
  db: Pick<MessagingCollections, 'phoneNumbers' | 'orgPacing'> & Pick<RelayCollections, 'relays'>,
  tenants: ActorClient<typeof tenantProtocol>,
  defaultUndeliveredAfterMs: number,
): RouteDef[] {
  const numbers: Collection<PhoneNumberDoc> = db.phoneNumbers;
  /**
   * The dispatch reads its lines' paces and relay chains again before the answer, so that a usage asked next
   * (a query, answered ahead of the messages waiting for the actor) shows the change. When the dispatch does not
   * answer in time, the change is still read in its turn; the answer does not wait longer.
   */
  const reread = async (log: Logger, tenantId: string) => {
    try {
      await tenants.ask(tenantId, { kind: 'pacing-changed' }, settingAskMs);
    } catch (err) {
      log.warn({ err }, 'the dispatch did not confirm a pacing change in time; it reads it in its turn');
    }
  };
  /** Stores a setting in the organization's settings document; its tenant actor reads them again (pace and window). */
  const saveSetting = async (log: Logger, principal: Principal, setting: Pick<OrgPacingDoc, 'pacing' | 'delivery'>) => {
    await db.orgPacing.updateOne(
      orgScope(principal),
      { id: principal.tenantId },
      { $set: { ...setting, updatedAt: nowIso() } },
      { upsert: true },
    );
    await reread(log, principal.tenantId);
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
      summary: 'Change the label, metadata, pace or relays (primary and standbys) of a number',
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
            relays: Type.Optional(lineRelays),
          },
          { minProperties: 1 },
        ),
        response: { 200: phoneNumber },
      },
      async handler(ctx) {
        if (ctx.body.relays?.length) await knownRelays(db.relays, ctx.principal, ctx.body.relays);
        const doc = await numbers.updateOne(
          orgScope(ctx.principal),
          { id: ctx.params.id },
          // A new chain starts on its primary.
          { $set: { ...ctx.body, ...(ctx.body.relays ? { failedOverTo: null } : {}), updatedAt: nowIso() } },
        );
        if (!doc) throw new AppError('not_found', 'phone number not found');
        // The dispatch reads its lines' paces and relay chains again.
        if (ctx.body.pacing !== undefined || ctx.body.relays !== undefined)
          await reread(ctx.log, ctx.principal.tenantId);
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
          health: Static<typeof usage>['health'];
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
        await saveSetting(ctx.log, ctx.principal, { pacing: ctx.body });
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
        await saveSetting(ctx.log, ctx.principal, { delivery: ctx.body });
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

/** A line's relays must be the organization's own (in this mode): the first one that is not is named, 400. */
async function knownRelays(relays: RelayCollections['relays'], p: Principal, ids: string[]): Promise<void> {
  const found = new Set(
    (await relays.find(orgScope(p), { id: { $in: ids } }, { limit: maxLineRelays })).map((r) => r.id),
  );
  const missing = ids.findIndex((id) => !found.has(id));
  if (missing >= 0)
    throw validationError(pointer('relays', missing), `relay ${ids[missing]} not found in this organization`);
}

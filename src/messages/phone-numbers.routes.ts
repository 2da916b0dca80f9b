import { Type } from '@sinclair/typebox';
import { AppError } from '../errors.ts';
import { metadataSchema } from '../http/metadata.ts';
import { defineRoute, named, type RouteDef } from '../http/route.ts';
import { phoneNumberField, strictObject } from '../http/validation.ts';
import type { Principal } from '../roles.ts';
import { newId, nowIso } from '../ids.ts';
import type { Collection } from '../store/collection.ts';
import type { PhoneNumberDoc } from './message-store.ts';

const label = Type.String({ maxLength: 200 });
const metadata = metadataSchema;
const phoneNumber = named('PhoneNumber', Type.Object({
  id: Type.String(), number: Type.String(), label: Type.Union([Type.String(), Type.Null()]), metadata: Type.Record(Type.String(), Type.String()),
  status: Type.Union([Type.Literal('active'), Type.Literal('deactivated')]), deactivatedAt: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String(), updatedAt: Type.String(),
}));

const show = ({ tenantId: _t, ...doc }: PhoneNumberDoc) => doc;
const orgScope = (p: Principal) => ({ tenantId: p.orgId });

/** Spec 4.5 and 3.6: registered sender numbers; delete deactivates, keeping the number and its history. */
export function phoneNumberRoutes(numbers: Collection<PhoneNumberDoc>): RouteDef[] {
  return [
    defineRoute({
      method: 'POST', path: '/api/v1/phone-numbers', summary: 'Register a sender phone number (a deactivated one is reactivated)', tags: ['phone-numbers'], minRole: 'admin',
      operationId: 'registerPhoneNumber',
      schema: { body: strictObject({ number: phoneNumberField(), label: Type.Optional(label) }), response: { 201: phoneNumber } },
      async handler(ctx) {
        const now = nowIso();
        const scope = orgScope(ctx.principal);
        const revived = await numbers.updateOne(scope, { number: ctx.body.number, status: 'deactivated' }, {
          $set: { status: 'active', deactivatedAt: null, updatedAt: now, ...(ctx.body.label !== undefined ? { label: ctx.body.label } : {}) },
        });
        if (revived) return { status: 201, body: show(revived) };
        const doc: PhoneNumberDoc = { id: newId('pn'), tenantId: ctx.principal.orgId, number: ctx.body.number, label: ctx.body.label ?? null, metadata: {}, status: 'active', deactivatedAt: null, createdAt: now, updatedAt: now };
        await numbers.insertOne(scope, doc);
        return { status: 201, body: show(doc) };
      },
    }),
    defineRoute({
      method: 'GET', path: '/api/v1/phone-numbers', summary: 'All registered numbers, active and deactivated', tags: ['phone-numbers'],
      operationId: 'listPhoneNumbers',
      schema: { response: { 200: Type.Object({ data: Type.Array(phoneNumber) }) } },
      handler: async (ctx) => ({ status: 200, body: { data: (await numbers.find(orgScope(ctx.principal), {}, { sort: { createdAt: 1 }, limit: 1000 })).map(show) } }),
    }),
    defineRoute({
      method: 'PUT', path: '/api/v1/phone-numbers/:id', summary: 'Change the label or metadata of a number', tags: ['phone-numbers'], minRole: 'admin',
      operationId: 'updatePhoneNumber',
      schema: { params: strictObject({ id: Type.String({ maxLength: 64 }) }), body: strictObject({ label: Type.Optional(label), metadata: Type.Optional(metadata) }, { minProperties: 1 }), response: { 200: phoneNumber } },
      async handler(ctx) {
        const doc = await numbers.updateOne(orgScope(ctx.principal), { id: ctx.params.id }, { $set: { ...ctx.body, updatedAt: nowIso() } });
        if (!doc) throw new AppError('not_found', 'phone number not found');
        return { status: 200, body: show(doc) };
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/api/v1/phone-numbers/:id', summary: 'Deactivate a number: kept with its history, no longer used to send', tags: ['phone-numbers'], minRole: 'admin',
      operationId: 'deactivatePhoneNumber',
      schema: { params: strictObject({ id: Type.String({ maxLength: 64 }) }), response: { 200: phoneNumber } },
      async handler(ctx) {
        const scope = orgScope(ctx.principal);
        const now = nowIso();
        const doc = (await numbers.updateOne(scope, { id: ctx.params.id, status: 'active' }, { $set: { status: 'deactivated', deactivatedAt: now, updatedAt: now } }))
          ?? (await numbers.findOne(scope, { id: ctx.params.id }));
        if (!doc) throw new AppError('not_found', 'phone number not found');
        return { status: 200, body: show(doc) };
      },
    }),
  ];
}

import { Type } from '@sinclair/typebox';
import { defineRoute, noContent, type RouteDef } from '../http/route.ts';
import type { ContactGroups } from './contact-groups.ts';
import {
  groupCreateBody,
  groupSchema,
  groupWithMembersSchema,
  idParams,
  memberBody,
  memberParams,
} from './contact-schemas.ts';
import { teamScope } from './contact-store.ts';

const tags = ['contact-groups'];

/** Contact groups of the caller's team (spec 4.3); a group or contact of another team is a 404. */
export function contactGroupRoutes(groups: ContactGroups): RouteDef[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/contact-groups',
      summary: 'Create a contact group',
      tags,
      teamScoped: true,
      operationId: 'createContactGroup',
      schema: { body: groupCreateBody, response: { 201: groupSchema } },
      handler: async (ctx) => ({ status: 201, body: await groups.create(teamScope(ctx.principal), ctx.body) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/contact-groups',
      summary: 'All contact groups of the team, with their member counts',
      tags,
      teamScoped: true,
      operationId: 'listContactGroups',
      schema: { response: { 200: Type.Object({ data: Type.Array(groupSchema) }) } },
      handler: async (ctx) => ({ status: 200, body: { data: await groups.list(teamScope(ctx.principal)) } }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/contact-groups/:id',
      summary: 'A contact group with its member contacts',
      tags,
      teamScoped: true,
      operationId: 'getContactGroup',
      schema: { params: idParams, response: { 200: groupWithMembersSchema } },
      handler: async (ctx) => ({ status: 200, body: await groups.get(teamScope(ctx.principal), ctx.params.id) }),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/contact-groups/:id/members',
      summary: 'Add a contact to a group: 201 when added, 200 when it already was a member',
      tags,
      teamScoped: true,
      operationId: 'addContactGroupMember',
      schema: { params: idParams, body: memberBody, response: { 200: groupSchema, 201: groupSchema } },
      handler: async (ctx) => {
        const { group, added } = await groups.addMember(teamScope(ctx.principal), ctx.params.id, ctx.body.contactId);
        return { status: added ? 201 : 200, body: group };
      },
    }),
    defineRoute({
      method: 'DELETE',
      path: '/api/v1/contact-groups/:id/members/:contactId',
      summary: 'Remove a contact from a group (404 when it is not a member)',
      tags,
      teamScoped: true,
      operationId: 'removeContactGroupMember',
      schema: { params: memberParams, response: { 204: noContent } },
      handler: async (ctx) => {
        await groups.removeMember(teamScope(ctx.principal), ctx.params.id, ctx.params.contactId);
        return { status: 204 };
      },
    }),
  ];
}

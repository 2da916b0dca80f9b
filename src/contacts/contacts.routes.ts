import { Type } from '@sinclair/typebox';
import type { ListCursors } from '../http/list-cursors.ts';
import { listAnswer, listReply } from '../http/pagination.ts';
import { defineRoute, noContent, type RouteDef } from '../http/route.ts';
import { contactGroupRoutes } from './contact-groups.routes.ts';
import type { ContactGroups } from './contact-groups.ts';
import { exportContacts } from './contact-export.ts';
import type { ContactImporter } from './contact-import.ts';
import { importRows } from './contact-import-rows.ts';
import {
  contactCreateBody,
  contactExportAnswer,
  contactExportQuery,
  contactListQuery,
  contactSchema,
  contactUpdateBody,
  idParams,
  importResultSchema,
  parseTagFilter,
} from './contact-schemas.ts';
import type { ContactService } from './contact-service.ts';
import { teamScope } from './contact-store.ts';
import { importBodyMaxBytes, readImportUpload } from './contact-upload.ts';

export interface ContactsDeps {
  contacts: ContactService;
  groups: ContactGroups;
  importer: ContactImporter;
  cursors: ListCursors;
}

const tags = ['contacts'];

/** Contacts, their import and export (spec 4.2), and contact groups (4.3). Everything belongs to the caller's team. */
export function contactRoutes(deps: ContactsDeps): RouteDef[] {
  const { contacts, importer } = deps;
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/contacts',
      summary: 'Create a contact',
      tags,
      teamScoped: true,
      operationId: 'createContact',
      schema: { body: contactCreateBody, response: { 201: contactSchema } },
      handler: async (ctx) => ({ status: 201, body: await contacts.create(teamScope(ctx.principal), ctx.body) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/contacts',
      summary: 'List contacts; search is literal and case-insensitive, tags must all match',
      tags,
      teamScoped: true,
      operationId: 'listContacts',
      schema: { query: contactListQuery, response: { 200: listAnswer(contactSchema) } },
      handler: (ctx) =>
        listReply(ctx, deps.cursors, (after) =>
          contacts.list(teamScope(ctx.principal), {
            search: ctx.query.search,
            tags: parseTagFilter(ctx.query.tags),
            page: ctx.query.page,
            limit: ctx.query.limit,
            after,
          }),
        ),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/contacts/export',
      tags,
      teamScoped: true,
      operationId: 'exportContacts',
      summary:
        'Export contacts as a streamed CSV (the import columns, lists joined with ";", formula cells prefixed with \') or JSON array',
      schema: { query: contactExportQuery, response: { 200: contactExportAnswer } },
      handler: (ctx) =>
        exportContacts(contacts, teamScope(ctx.principal), {
          format: ctx.query.format,
          search: ctx.query.search,
          tags: parseTagFilter(ctx.query.tags),
        }),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/contacts/import',
      tags,
      teamScoped: true,
      operationId: 'importContacts',
      summary:
        'Import a CSV or JSON file (multipart/form-data, field "file", up to 10 MiB); a row matching a phone number or email updates that contact',
      bodyTypes: 'any',
      maxBodyBytes: importBodyMaxBytes,
      uploadField: 'file',
      // No body schema: the body is multipart, read from ctx.rawBody.
      schema: { response: { 200: importResultSchema } },
      handler: async (ctx) => {
        const upload = await readImportUpload(ctx.rawBody, ctx.headers['content-type']);
        const result = await importer.importRows(teamScope(ctx.principal), importRows(upload.format, upload.open()));
        return { status: 200, body: result };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/contacts/:id',
      summary: 'Get a contact',
      tags,
      teamScoped: true,
      operationId: 'getContact',
      schema: { params: idParams, response: { 200: contactSchema } },
      handler: async (ctx) => ({ status: 200, body: await contacts.get(teamScope(ctx.principal), ctx.params.id) }),
    }),
    defineRoute({
      method: 'PUT',
      path: '/api/v1/contacts/:id',
      summary: 'Update a contact: only the given fields change',
      tags,
      teamScoped: true,
      operationId: 'updateContact',
      schema: { params: idParams, body: contactUpdateBody, response: { 200: contactSchema } },
      handler: async (ctx) => ({
        status: 200,
        body: await contacts.update(teamScope(ctx.principal), ctx.params.id, ctx.body),
      }),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/api/v1/contacts/:id',
      summary: 'Delete a contact and its group memberships',
      tags,
      teamScoped: true,
      operationId: 'deleteContact',
      schema: { params: idParams, response: { 204: noContent } },
      handler: async (ctx) => {
        await contacts.delete(teamScope(ctx.principal), ctx.params.id);
        return { status: 204 };
      },
    }),
    ...contactGroupRoutes(deps.groups),
  ];
}

import { readImportUpload } from '../contacts/contact-upload.ts';
import { AppError } from '../errors.ts';
import { pageSchema } from '../http/pagination.ts';
import { defineRoute, noContent, type RouteDef } from '../http/route.ts';
import { importBodyMaxBytes } from '../contacts/contact-upload.ts';
import {
  handleParams,
  optOutSettingsBody,
  optOutSettingsSchema,
  suppressionBody,
  suppressionImportResult,
  suppressionListQuery,
  suppressionSchema,
} from './suppression-schemas.ts';
import type { SuppressionService } from './suppression-service.ts';

const tags = ['suppressions'];

/**
 * The organization's suppression list and opt-out settings (docs/opt-outs.md).
 * Every role reads; members add (it only ever stops sends); admins and
 * owners take a handle off the list (it lets sends reach someone who opted
 * out) and change the settings.
 */
export function suppressionRoutes(service: SuppressionService): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/suppressions',
      summary: "The organization's suppression list, newest first",
      tags,
      operationId: 'listSuppressions',
      schema: { query: suppressionListQuery, response: { 200: pageSchema(suppressionSchema) } },
      handler: async (ctx) => ({ status: 200, body: await service.list(ctx.principal.tenantId, ctx.query) }),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/suppressions',
      summary: 'Put a handle on the suppression list: no send reaches it (201; 200 when it was on it already)',
      tags,
      operationId: 'addSuppression',
      schema: { body: suppressionBody, response: { 200: suppressionSchema, 201: suppressionSchema } },
      handler: (ctx) => service.add(ctx.principal.tenantId, ctx.body),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/suppressions/import',
      summary:
        'Import a CSV file of handles (multipart/form-data, field "file", up to 10 MiB; a header row naming handle and, optionally, reason)',
      tags,
      operationId: 'importSuppressions',
      bodyTypes: 'any',
      maxBodyBytes: importBodyMaxBytes,
      uploadField: 'file',
      schema: { response: { 200: suppressionImportResult } },
      handler: async (ctx) => {
        const upload = await readImportUpload(ctx.rawBody, ctx.headers['content-type']);
        if (upload.format !== 'csv')
          throw new AppError('unsupported_media_type', 'the file must be CSV (.csv, text/csv) with a header row');
        const chunks: Buffer[] = [];
        for await (const chunk of upload.open()) chunks.push(chunk as Buffer);
        return { status: 200, body: await service.importCsv(ctx.principal.tenantId, Buffer.concat(chunks)) };
      },
    }),
    defineRoute({
      method: 'DELETE',
      path: '/api/v1/suppressions/:handle',
      summary: 'Take a handle off the suppression list: sends reach it again',
      tags,
      minRole: 'admin',
      operationId: 'removeSuppression',
      schema: { params: handleParams, response: { 204: noContent } },
      handler: async (ctx) => {
        await service.remove(ctx.principal.tenantId, ctx.params.handle);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/organization/opt-outs',
      summary: "The organization's own stop keywords and its answer to HELP",
      tags,
      operationId: 'getOptOutSettings',
      schema: { response: { 200: optOutSettingsSchema } },
      handler: async (ctx) => ({ status: 200, body: await service.settings(ctx.principal.tenantId) }),
    }),
    defineRoute({
      method: 'PUT',
      path: '/api/v1/organization/opt-outs',
      summary: 'Change the stop keywords or the answer to HELP: only the given fields change',
      tags,
      minRole: 'admin',
      operationId: 'updateOptOutSettings',
      schema: { body: optOutSettingsBody, response: { 200: optOutSettingsSchema } },
      handler: async (ctx) => ({ status: 200, body: await service.saveSettings(ctx.principal.tenantId, ctx.body) }),
    }),
  ];
}

import { Type } from '@sinclair/typebox';
import { AppError } from '../errors.ts';
import { BodyAborted } from '../http/body-stream.ts';
import { defineRoute, type RouteDef } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import { attachmentUploadPath, frameLimits } from '../relay-protocol/frames.ts';
import { mimeTypeOf } from './attachment-links.ts';
import type { AttachmentService } from './attachment-service.ts';
import { attachmentListSchema, uploadedAttachmentSchema } from './message-schemas.ts';

const id = strictObject({ id: Type.String({ minLength: 1, maxLength: 64 }) });

/** A file name as a Content-Disposition parameter (RFC 6266): an ASCII fallback and the name itself, encoded. */
function disposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

/** Received attachments: the relay's upload, the list with signed links, the download through a link. */
export function attachmentRoutes(deps: {
  attachments: AttachmentService;
  publicBaseUrl(ctxHost: string | undefined): string;
}): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/api/v1/messages/:id/attachments',
      summary: 'Attachments of a message with signed download URLs (valid 1 hour)',
      tags: ['messages'],
      teamScoped: true,
      operationId: 'listMessageAttachments',
      schema: { params: id, response: { 200: attachmentListSchema } },
      async handler(ctx) {
        const base = deps.publicBaseUrl(ctx.headers.host);
        return { status: 200, body: { data: await deps.attachments.list(ctx.principal, ctx.params.id, base) } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/attachments/:token',
      summary: 'Download an attachment through its signed link',
      tags: ['messages'],
      auth: false,
      operationId: 'downloadAttachment',
      errors: ['forbidden', 'conflict'],
      schema: {
        params: strictObject({ token: Type.String({ minLength: 1, maxLength: 1024 }) }),
        response: {
          200: {
            description: 'the file',
            content: { 'application/octet-stream': Type.String({ format: 'binary' }) },
            headers: { 'content-disposition': { description: 'with the file name', required: true } },
          },
          302: {
            description: "a sent message's: its URL",
            headers: { location: { description: 'where the attachment is downloaded from', required: true } },
          },
        },
      },
      async handler(ctx) {
        const found = await deps.attachments.download(ctx.params.token);
        const headers: Record<string, string> = { 'cache-control': 'private, no-store' };
        if (found.kind === 'url') return { status: 302, headers: { ...headers, location: found.url } };
        headers['content-type'] = found.doc.mimeType ?? mimeTypeOf(found.doc.filename);
        headers['content-disposition'] = disposition(found.doc.filename);
        headers['x-content-type-options'] = 'nosniff';
        return { status: 200, stream: found.chunks, length: found.size, headers };
      },
    }),
    defineRoute({
      method: 'PUT',
      path: `${attachmentUploadPath}/:guid`,
      summary: 'A relay uploads a received attachment (relay credential)',
      tags: ['relays'],
      auth: false,
      limitPerAddress: true,
      streamBody: true,
      bodyTypes: 'any',
      operationId: 'uploadRelayAttachment',
      errors: ['unauthorized', 'payload_too_large', 'conflict'],
      schema: {
        params: strictObject({ guid: Type.String({ minLength: 1, maxLength: frameLimits.guidLength }) }),
        response: { 200: uploadedAttachmentSchema },
      },
      async handler(ctx) {
        const relay = await deps.attachments.relayOf(ctx.headers.authorization);
        if (!ctx.bodyStream) throw new AppError('bad_request', 'the body is the file');
        try {
          const stored = await deps.attachments.upload(
            relay,
            ctx.params.guid,
            ctx.headers['content-length'],
            ctx.bodyStream,
            ctx.headers['x-relaybox-unavailable'],
          );
          return { status: 200, body: stored };
        } catch (err) {
          // The relay went away mid-body: nothing was kept, and it uploads again. Not the server's failure.
          if (err instanceof BodyAborted) throw new AppError('bad_request', err.message);
          throw err;
        }
      },
    }),
  ];
}

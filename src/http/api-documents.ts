import { asyncApiDocument } from './asyncapi.ts';
import { errorPageRoutes } from './errors-page.ts';
import { openApiDocument, type DocumentOptions } from './openapi.ts';
import { Type } from '@sinclair/typebox';
import { anyObject, defineRoute, type AnswerSpec, type RouteDef } from './route.ts';
import { strictObject } from './validation.ts';

const jsonType = { 'content-type': 'application/json; charset=utf-8' };
const document = (description: string) =>
  ({ description, content: { 'application/json': anyObject } }) satisfies AnswerSpec;

/**
 * The routes that serve the API's own descriptions: OpenAPI for REST (these
 * two routes included), AsyncAPI for the relay WebSocket, and the pages the
 * error answers' problem types resolve to. Each document is made once, at
 * start.
 */
export function apiDocumentRoutes(routes: RouteDef[], opts: DocumentOptions): RouteDef[] {
  let openapi = '';
  let withSamples = '';
  const documents: RouteDef[] = [
    defineRoute({
      method: 'GET',
      path: '/api/v1/openapi.json',
      summary: 'This API description (OpenAPI 3.1)',
      tags: ['meta'],
      auth: false,
      operationId: 'getOpenApiDocument',
      schema: {
        query: strictObject({
          codeSamples: Type.Boolean({
            default: false,
            description: 'adds a curl and a TypeScript sample to each operation (x-codeSamples), as /docs shows them',
          }),
        }),
        response: { 200: document('the OpenAPI document') },
      },
      handler: (ctx) => ({ status: 200, body: ctx.query.codeSamples ? withSamples : openapi, headers: jsonType }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/asyncapi.json',
      summary: 'The relay WebSocket protocol and its frames (AsyncAPI 3.0)',
      tags: ['meta'],
      auth: false,
      operationId: 'getAsyncApiDocument',
      schema: { response: { 200: document('the AsyncAPI document') } },
      handler: (_ctx) => ({ status: 200, body: asyncapi, headers: jsonType }),
    }),
  ];
  const asyncapi = JSON.stringify(asyncApiDocument());
  const described = [...routes.filter((r) => r.path.startsWith('/api/')), ...documents];
  openapi = JSON.stringify(openApiDocument(described, opts));
  // The samples stay out of the document clients generate from: they would add a fifth to its size.
  withSamples = JSON.stringify(openApiDocument(described, { ...opts, codeSamples: true }));
  return [...documents, ...errorPageRoutes()];
}

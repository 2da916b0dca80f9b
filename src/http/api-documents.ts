import { asyncApiDocument } from './asyncapi.ts';
import { openApiDocument, type DocumentOptions } from './openapi.ts';
import { anyObject, defineRoute, type AnswerSpec, type RouteDef } from './route.ts';

const jsonType = { 'content-type': 'application/json; charset=utf-8' };
const document = (description: string) => ({ description, content: { 'application/json': anyObject } }) satisfies AnswerSpec;

/**
 * The routes that serve the API's own descriptions: OpenAPI for REST (these
 * two routes included), AsyncAPI for the relay WebSocket. Each document is
 * made once, at start.
 */
export function apiDocumentRoutes(routes: RouteDef[], opts: DocumentOptions): RouteDef[] {
  let openapi = '';
  const documents: RouteDef[] = [
    defineRoute({
      method: 'GET', path: '/api/v1/openapi.json', summary: 'This API description (OpenAPI 3.1)', tags: ['meta'], auth: false,
      operationId: 'getOpenApiDocument',
      schema: { response: { 200: document('the OpenAPI document') } },
      handler: (_ctx) => ({ status: 200, body: openapi, headers: jsonType }),
    }),
    defineRoute({
      method: 'GET', path: '/api/v1/asyncapi.json', summary: 'The relay WebSocket protocol and its frames (AsyncAPI 3.0)', tags: ['meta'], auth: false,
      operationId: 'getAsyncApiDocument',
      schema: { response: { 200: document('the AsyncAPI document') } },
      handler: (_ctx) => ({ status: 200, body: asyncapi, headers: jsonType }),
    }),
  ];
  const asyncapi = JSON.stringify(asyncApiDocument());
  openapi = JSON.stringify(openApiDocument([...routes.filter((r) => r.path.startsWith('/api/')), ...documents], opts));
  return documents;
}

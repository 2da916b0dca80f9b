/**
 * A typed Relaybox client: the types come from the service's own OpenAPI
 * document (openapi-typescript), the calls are made with openapi-fetch, so a
 * path, a field or an answer that does not exist is a compile error.
 *
 *   npm run generate -w examples/typed-client    # relaybox-api.d.ts from $RELAYBOX_URL/api/v1/openapi.json
 *   npm run check -w examples/typed-client       # tsc --noEmit
 *   RELAYBOX_API_KEY=rb_test_... npm start -w examples/typed-client
 *
 * It sends one message (RELAYBOX_TO, default +14155550100) and reads its
 * delivery status. An error answer is RFC 9457 problem details: `type`,
 * `title`, `status`, `detail` and `instance` (the request id).
 */
import { randomUUID } from 'node:crypto';
import createClient from 'openapi-fetch';
import type { components, paths } from './relaybox-api.js';

type Problem = components['schemas']['Problem'];

const apiKey = process.env.RELAYBOX_API_KEY;
if (!apiKey) throw new Error('set RELAYBOX_API_KEY to an API key of your organization');
const client = createClient<paths>({
  baseUrl: process.env.RELAYBOX_URL ?? 'http://localhost:3000',
  headers: { Authorization: `Bearer ${apiKey}` },
});

function fail(problem: Problem): never {
  throw new Error(
    `${problem.status} ${problem.title}: ${problem.detail} (${problem.type}, request ${problem.instance})`,
  );
}

const sent = await client.POST('/api/v1/messages', {
  params: { header: { 'Idempotency-Key': randomUUID() } },
  body: { to: process.env.RELAYBOX_TO ?? '+14155550100', body: 'Hello from the typed client' },
});
if (sent.error) fail(sent.error);
console.log(`sent ${sent.data.id}: ${sent.data.status}`);

const status = await client.GET('/api/v1/messages/{id}/status', { params: { path: { id: sent.data.id } } });
if (status.error) fail(status.error);
console.log(`status of ${status.data.id}: ${status.data.status}, sent at ${status.data.sentAt ?? '(not yet)'}`);

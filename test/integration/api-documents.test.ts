import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { errorCodes } from '../../src/errors.ts';
import { agentFrame, serverFrame } from '../../src/relay-protocol/frames.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..', '..');

describe('API descriptions (OpenAPI and AsyncAPI)', () => {
  let t: TestApp;
  let openapi: any;
  let asyncapi: any;
  const op = (method: string, path: string) => openapi.paths[path][method];

  before(async () => {
    t = await startTestApp('embedded', { PUBLIC_BASE_URL: 'https://api.example.org' });
    openapi = (await t.request('GET', '/api/v1/openapi.json')).body;
    asyncapi = (await t.request('GET', '/api/v1/asyncapi.json')).body;
  });
  after(() => t.stop());

  test('@redocly/cli lint passes on both documents with no error and no warning, offline', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'relaybox-lint-'));
    try {
      await writeFile(join(dir, 'openapi.json'), JSON.stringify(openapi, null, 2));
      await writeFile(join(dir, 'asyncapi.json'), JSON.stringify(asyncapi, null, 2));
      for (const file of ['redocly.yaml', '.redocly.lint-ignore.yaml']) await copyFile(join(root, file), join(dir, file));
      const cli = join(root, 'node_modules', '.bin', 'redocly');
      // Telemetry and the update check are the CLI's only network use; both are off (the config says telemetry: off too).
      const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
      const result = await run(cli, ['lint', 'openapi.json', 'asyncapi.json', '--format=stylish'], { cwd: dir, env, timeout: 120_000 }).catch((err: { stdout: string; stderr: string }) => err);
      const output = `${result.stdout}\n${result.stderr}`;
      assert.doesNotMatch(output, /\b(error|warning)\b.*\(|[1-9]\d* (errors?|warnings?)/i, output);
      assert.match(output, /valid/i, output);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('every operation has a unique operationId, a 2xx or 3xx answer and the error answers of its route', () => {
    const ids = new Set<string>();
    for (const [path, item] of Object.entries<any>(openapi.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        assert.ok(operation.operationId, `${method} ${path} has an operationId`);
        assert.ok(!ids.has(operation.operationId), `operationId ${operation.operationId} is unique`);
        ids.add(operation.operationId);
        const statuses = Object.keys(operation.responses);
        assert.ok(statuses.some((s) => /^[23]/.test(s)), `${method} ${path} has a success answer`);
        for (const s of ['429', '500', '503']) assert.ok(statuses.includes(s), `${method} ${path} documents ${s}`);
        if (operation.security.length > 0) assert.ok(statuses.includes('401'), `${method} ${path} documents 401`);
        if (operation.requestBody) assert.ok(statuses.includes('400') && statuses.includes('413'), `${method} ${path} documents 400 and 413`);
        for (const s of statuses.filter((x) => Number(x) >= 400)) {
          assert.equal(operation.responses[s].content['application/json'].schema.$ref, '#/components/schemas/Error');
          assert.ok(operation.responses[s].headers['X-Request-Id'], `${method} ${path} ${s} has X-Request-Id`);
        }
      }
    }
    assert.ok(ids.size >= 40, `all operations are there (${ids.size})`);
    assert.deepEqual(openapi.components.schemas.Error.properties.error.enum, Object.keys(errorCodes));
  });

  test('optional inputs are not required: priority, page, limit, format, the relay-token body', () => {
    const send = op('post', '/api/v1/messages');
    const body = send.requestBody.content['application/json'].schema;
    assert.deepEqual(body.required, ['to']);
    assert.equal(body.properties.priority.default, 0);
    for (const path of ['/api/v1/messages', '/api/v1/conversations', '/api/v1/contacts', '/api/v1/conversations/{id}']) {
      const params = op('get', path).parameters.filter((p: any) => p.name === 'page' || p.name === 'limit');
      assert.equal(params.length, 2, path);
      assert.ok(params.every((p: any) => p.required === false), `${path}: page and limit are optional`);
    }
    const format = op('get', '/api/v1/contacts/export').parameters.find((p: any) => p.name === 'format');
    assert.equal(format.required, false);
    assert.equal(op('post', '/api/v1/tenants/{tenantId}/relay-tokens').requestBody.required, false);
  });

  test('success answers have schemas; 204s have no body; the headers are documented', () => {
    for (const [method, path] of [['get', '/api/v1/me'], ['get', '/api/v1/messages'], ['get', '/api/v1/messages/{id}/attachments'], ['get', '/api/v1/conversations'], ['get', '/api/v1/conversations/{id}']]) {
      assert.ok(op(method!, path!).responses['200'].content['application/json'].schema.properties, `${method} ${path} has a 200 schema`);
    }
    const exported = op('get', '/api/v1/contacts/export').responses['200'].content;
    assert.deepEqual(Object.keys(exported).sort(), ['application/json', 'text/csv']);
    assert.equal(exported['application/json'].schema.type, 'array');
    assert.ok(op('get', '/api/v1/attachments/{token}').responses['302'].headers.Location.required);
    for (const [method, path] of [['delete', '/api/v1/contacts/{id}'], ['delete', '/api/v1/api-keys/{id}'], ['post', '/api/v1/auth/logout']]) {
      const noContent = op(method!, path!).responses['204'];
      assert.ok(noContent, `${method} ${path} answers 204`);
      assert.equal(noContent.content, undefined, `${method} ${path}: a 204 has no body`);
    }
    const send = op('post', '/api/v1/messages');
    assert.ok(send.parameters.some((p: any) => p.name === 'Idempotency-Key' && p.in === 'header'));
    assert.ok(send.responses['201'].headers['Idempotent-Replayed']);
    assert.ok(send.responses['422'], 'idempotency_mismatch is documented');
    assert.deepEqual(Object.keys(send.responses['429'].headers).sort(), ['RateLimit-Limit', 'RateLimit-Policy', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After', 'X-Request-Id']);
    assert.equal(op('post', '/api/v1/contacts/import').responses['415'].content['application/json'].schema.$ref, '#/components/schemas/Error');
    assert.deepEqual(openapi.servers.map((s: { url: string }) => s.url), ['https://api.example.org', '/']);
  });

  test('the AsyncAPI document describes the relay WebSocket and every frame, from the frame schemas', () => {
    assert.equal(asyncapi.asyncapi, '3.0.0');
    assert.equal(asyncapi.channels.relay.address, '/api/v1/relays/connect');
    const received = asyncapi.operations.receiveAgentFrames.messages.map((m: { $ref: string }) => m.$ref.split('/').pop());
    const sent = asyncapi.operations.sendServerFrames.messages.map((m: { $ref: string }) => m.$ref.split('/').pop());
    const typesOf = (union: { anyOf: Array<{ properties: { type: { const: string } } }> }) => union.anyOf.map((f) => f.properties.type.const).sort();
    assert.deepEqual(received.sort(), typesOf(agentFrame as never));
    assert.deepEqual(sent.sort(), typesOf(serverFrame as never));
    assert.ok(received.includes('hello') && sent.includes('send'));
    assert.equal(asyncapi.components.messages.hello.payload.properties.type.const, 'hello');
    assert.ok(asyncapi.components.messages.send.payload.required.includes('messageId'));
    assert.match(openapi.info.description, /asyncapi\.json/);
  });
});

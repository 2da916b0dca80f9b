import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Ajv } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { errorCodes } from '../../src/errors.ts';
import { recipientFormat } from '../../src/messages/recipients.ts';
import { phoneNumberFormat, toE164 } from '../../src/phone-number.ts';
import { agentFrame, serverFrame } from '../../src/relay-protocol/frames.ts';
import { startTestApp, type TestApp } from '../support/test-app.ts';

const run = promisify(execFile);
const addFormats = addFormatsImport as unknown as (ajv: Ajv) => Ajv;
const root = join(import.meta.dirname, '..', '..');

/** What a local reference (#/components/...) names, or the node itself when it is no reference. */
const resolved = (node: any, doc: any): any =>
  node?.$ref
    ? node.$ref
        .slice(2)
        .split('/')
        .reduce((at: any, key: string) => at[key], doc)
    : node;

/** A schema with its local references replaced by what they name. */
function inline(schema: unknown, doc: any): any {
  if (Array.isArray(schema)) return schema.map((s) => inline(s, doc));
  if (schema === null || typeof schema !== 'object') return schema;
  if ((schema as { $ref?: string }).$ref) return inline(resolved(schema, doc), doc);
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, inline(v, doc)]));
}

describe('API descriptions (OpenAPI and AsyncAPI)', () => {
  let t: TestApp;
  let openapi: any;
  let asyncapi: any;
  let withSamples: any;
  const op = (method: string, path: string) => openapi.paths[path][method];
  /** An operation's error answer for a status: the shared one it refers to. */
  const errorAnswer = (operation: any, status: string) => resolved(operation.responses[status], openapi);
  const parametersOf = (operation: any) => operation.parameters.map((p: any) => resolved(p, openapi));

  before(async () => {
    t = await startTestApp('embedded', { PUBLIC_BASE_URL: 'https://api.example.org' });
    openapi = (await t.request('GET', '/api/v1/openapi.json')).body;
    asyncapi = (await t.request('GET', '/api/v1/asyncapi.json')).body;
    withSamples = (await t.request('GET', '/api/v1/openapi.json?codeSamples=true')).body;
  });
  after(() => t.stop());

  test('@redocly/cli lint passes on both documents with no error and no warning, offline', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'relaybox-lint-'));
    try {
      await writeFile(join(dir, 'openapi.json'), JSON.stringify(openapi, null, 2));
      await writeFile(join(dir, 'asyncapi.json'), JSON.stringify(asyncapi, null, 2));
      for (const file of ['redocly.yaml', '.redocly.lint-ignore.yaml'])
        await copyFile(join(root, file), join(dir, file));
      const cli = join(root, 'node_modules', '.bin', 'redocly');
      // Telemetry and the update check are the CLI's only network use; both are off (the config says telemetry: off too).
      const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
      const result = await run(cli, ['lint', 'openapi.json', 'asyncapi.json', '--format=stylish'], {
        cwd: dir,
        env,
        timeout: 120_000,
      }).catch((err: { stdout: string; stderr: string }) => err);
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
        assert.ok(
          statuses.some((s) => /^[23]/.test(s)),
          `${method} ${path} has a success answer`,
        );
        for (const s of ['429', '500', '503']) assert.ok(statuses.includes(s), `${method} ${path} documents ${s}`);
        if (operation.security.length > 0) assert.ok(statuses.includes('401'), `${method} ${path} documents 401`);
        if (operation.requestBody)
          assert.ok(statuses.includes('400') && statuses.includes('413'), `${method} ${path} documents 400 and 413`);
        for (const s of statuses.filter((x) => Number(x) >= 400)) {
          const shared = errorAnswer(operation, s);
          assert.equal(
            shared.content['application/problem+json'].schema.allOf[0].$ref,
            '#/components/schemas/Problem',
            `${method} ${path} ${s}`,
          );
          assert.ok(shared.headers['X-Request-Id'], `${method} ${path} ${s} has X-Request-Id`);
        }
      }
    }
    assert.ok(ids.size >= 40, `all operations are there (${ids.size})`);
    assert.deepEqual(openapi.components.schemas.Problem.properties.error.enum, Object.keys(errorCodes));
  });

  test('error answers are shared: each status refers to components.responses, narrowed to its codes, with the problem schema', () => {
    const problem = openapi.components.schemas.Problem;
    assert.deepEqual(problem.required, [
      'type',
      'title',
      'status',
      'detail',
      'instance',
      'error',
      'message',
      'statusCode',
    ]);
    const used = new Set<string>();
    for (const item of Object.values<any>(openapi.paths)) {
      for (const operation of Object.values<any>(item)) {
        for (const [status, answer] of Object.entries<any>(operation.responses)) {
          if (Number(status) < 400) continue;
          assert.match(answer.$ref, /^#\/components\/responses\/[A-Za-z]+$/, 'no error answer is inline');
          used.add(answer.$ref.split('/').pop());
        }
      }
    }
    assert.deepEqual([...used].sort(), Object.keys(openapi.components.responses).sort(), 'every shared answer is used');
    for (const [name, answer] of Object.entries<any>(openapi.components.responses)) {
      const narrowed = answer.content['application/problem+json'].schema.allOf[1].properties;
      const codes: string[] = narrowed.error.enum;
      assert.ok(
        codes.every((c) => errorCodes[c as keyof typeof errorCodes].status === narrowed.status.const),
        name,
      );
      assert.deepEqual(
        narrowed.type.enum,
        codes.map((c) => `/errors/${c}`),
        name,
      );
      for (const code of codes) assert.ok(answer.description.includes(`${code}: `), `${name} says what ${code} means`);
    }
    assert.equal(
      openapi.components.responses.ValidationErrorOrBadRequest.content['application/problem+json'].schema.allOf[1]
        .properties.status.const,
      400,
    );
  });

  test('the document stays under 200 KB; with codeSamples=true every operation has a curl and a TypeScript sample made from its route', async () => {
    const served = await t.request('GET', '/api/v1/openapi.json');
    const bytes = Buffer.byteLength(served.text);
    console.log(
      `# the OpenAPI document: ${bytes} bytes; with code samples: ${Buffer.byteLength(JSON.stringify(withSamples))} bytes`,
    );
    assert.ok(bytes <= 200_000, `${bytes} bytes`);
    const withoutSamples = JSON.parse(
      JSON.stringify(withSamples, (key, value) => (key === 'x-codeSamples' ? undefined : value)),
    );
    assert.deepEqual(withoutSamples, openapi, 'the samples are all that codeSamples=true adds');
    assert.ok(
      Object.values<any>(openapi.paths).every((item) => Object.values<any>(item).every((o) => !('x-codeSamples' in o))),
      'the plain document has none',
    );
    const ajv = addFormats(new Ajv({ strict: false, allErrors: true }))
      .addFormat(phoneNumberFormat, (v: string) => toE164(v) !== undefined)
      .addFormat(recipientFormat, (v: string) => toE164(v) !== undefined);
    for (const [path, item] of Object.entries<any>(withSamples.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        const where = `${method} ${path}`;
        const samples = operation['x-codeSamples'];
        assert.deepEqual(
          samples.map((s: any) => [s.lang, s.label]),
          [
            ['Shell', 'curl'],
            ['TypeScript', 'TypeScript'],
          ],
          where,
        );
        const [curl, ts] = samples.map((s: any) => s.source as string);
        const shellPath = path.replace(
          /\{([^}]+)\}/g,
          (_, n: string) => `$${n.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase()}`,
        );
        assert.ok(
          curl.startsWith(`curl${method === 'get' ? '' : ` -X ${method.toUpperCase()}`} "$RELAYBOX_URL${shellPath}`),
          `${where}: ${curl}`,
        );
        const scheme = Object.keys(operation.security[0] ?? {})[0];
        assert.equal(curl.includes('Authorization: Bearer $RELAYBOX_API_KEY'), scheme === 'bearer', where);
        assert.equal(curl.includes('Authorization: Bearer $RELAYBOX_PLATFORM_KEY'), scheme === 'platformKey', where);
        assert.ok(ts.includes(`await client.${method.toUpperCase()}('${path}'`), `${where}: ${ts}`);
        const schema = operation.requestBody?.content['application/json']?.schema;
        if (!schema) continue;
        const body = JSON.parse(/-d '(.*)'$/s.exec(curl)![1]!.replace(/'\\''/g, "'"));
        const validate = ajv.compile(inline(schema, withSamples));
        assert.ok(
          validate(body),
          `${where}: the sample body ${JSON.stringify(body)} is valid: ${JSON.stringify(validate.errors)}`,
        );
      }
    }
  });

  test('optional inputs are not required: priority, page, limit, format, the relay-token body', () => {
    const send = op('post', '/api/v1/messages');
    const body = send.requestBody.content['application/json'].schema;
    assert.deepEqual(body.required, ['to']);
    assert.equal(body.properties.priority.default, 0);
    for (const path of [
      '/api/v1/messages',
      '/api/v1/conversations',
      '/api/v1/contacts',
      '/api/v1/conversations/{id}',
    ]) {
      const params = parametersOf(op('get', path)).filter((p: any) => p.name === 'page' || p.name === 'limit');
      assert.equal(params.length, 2, path);
      assert.ok(
        params.every((p: any) => p.required === false),
        `${path}: page and limit are optional`,
      );
    }
    const format = parametersOf(op('get', '/api/v1/contacts/export')).find((p: any) => p.name === 'format');
    assert.equal(format.required, false);
    assert.equal(op('post', '/api/v1/tenants/{tenantId}/relay-tokens').requestBody.required, false);
  });

  test('success answers have schemas; 204s have no body; the headers are documented', () => {
    for (const [method, path] of [
      ['get', '/api/v1/me'],
      ['get', '/api/v1/messages'],
      ['get', '/api/v1/messages/{id}/attachments'],
      ['get', '/api/v1/conversations'],
      ['get', '/api/v1/conversations/{id}'],
    ]) {
      assert.ok(
        op(method!, path!).responses['200'].content['application/json'].schema.properties,
        `${method} ${path} has a 200 schema`,
      );
    }
    const exported = op('get', '/api/v1/contacts/export').responses['200'].content;
    assert.deepEqual(Object.keys(exported).sort(), ['application/json', 'text/csv']);
    assert.equal(exported['application/json'].schema.type, 'array');
    assert.ok(op('get', '/api/v1/attachments/{token}').responses['302'].headers.Location.required);
    for (const [method, path] of [
      ['delete', '/api/v1/contacts/{id}'],
      ['delete', '/api/v1/api-keys/{id}'],
      ['post', '/api/v1/auth/logout'],
    ]) {
      const noContent = op(method!, path!).responses['204'];
      assert.ok(noContent, `${method} ${path} answers 204`);
      assert.equal(noContent.content, undefined, `${method} ${path}: a 204 has no body`);
    }
    const send = op('post', '/api/v1/messages');
    assert.ok(send.parameters.some((p: any) => p.$ref === '#/components/parameters/Idempotency-Key'));
    assert.equal(openapi.components.parameters['Idempotency-Key'].in, 'header');
    assert.ok(send.responses['201'].headers['Idempotent-Replayed']);
    assert.ok(send.responses['422'], 'idempotency_mismatch is documented');
    assert.deepEqual(Object.keys(errorAnswer(send, '429').headers).sort(), [
      'RateLimit-Limit',
      'RateLimit-Policy',
      'RateLimit-Remaining',
      'RateLimit-Reset',
      'Retry-After',
      'X-Request-Id',
    ]);
    assert.equal(
      errorAnswer(send, '401').headers['WWW-Authenticate'].$ref,
      '#/components/headers/WWW-Authenticate',
      'a 401 documents its challenge',
    );
    assert.ok(errorAnswer(op('post', '/api/v1/contacts/import'), '415').content['application/problem+json']);
    assert.deepEqual(
      openapi.servers.map((s: { url: string }) => s.url),
      ['https://api.example.org', '/'],
    );
  });

  test('the AsyncAPI document describes the relay WebSocket and every frame, from the frame schemas', () => {
    assert.equal(asyncapi.asyncapi, '3.0.0');
    assert.equal(asyncapi.channels.relay.address, '/api/v1/relays/connect');
    const received = asyncapi.operations.receiveAgentFrames.messages.map((m: { $ref: string }) =>
      m.$ref.split('/').pop(),
    );
    const sent = asyncapi.operations.sendServerFrames.messages.map((m: { $ref: string }) => m.$ref.split('/').pop());
    const typesOf = (union: { anyOf: Array<{ properties: { type: { const: string } } }> }) =>
      union.anyOf.map((f) => f.properties.type.const).sort();
    assert.deepEqual(received.sort(), typesOf(agentFrame as never));
    assert.deepEqual(sent.sort(), typesOf(serverFrame as never));
    assert.ok(received.includes('hello') && sent.includes('send'));
    assert.equal(asyncapi.components.messages.hello.payload.properties.type.const, 'hello');
    assert.ok(asyncapi.components.messages.send.payload.required.includes('messageId'));
    assert.match(openapi.info.description, /asyncapi\.json/);
    // Tapbacks, replies and group events ride on inbound frames; edits and unsends have their own frame and ack.
    const inbound = asyncapi.components.messages.inbound.payload.properties;
    assert.ok(inbound.reaction && inbound.replyTo && inbound.group);
    assert.ok(received.includes('change'));
    assert.ok(asyncapi.components.messages.ack.payload.properties.of.anyOf.some((o: any) => o.const === 'change'));
  });

  test('the events of reactions, edits, unsends and group changes can be listed and subscribed to', () => {
    const text = JSON.stringify(openapi);
    for (const name of ['message.reaction', 'message.edited', 'message.unsent', 'conversation.updated'])
      assert.ok(text.includes(`"${name}"`), name);
    assert.ok(openapi.components.schemas.Message.properties.reactions);
  });
});

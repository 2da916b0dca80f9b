/**
 * Every error answer is RFC 9457 problem details (application/problem+json)
 * and keeps the members clients read before (error, message, statusCode,
 * details): real answers of a running service, from handlers and from the
 * HTTP server itself, checked against the RFC's own schema (its Appendix A),
 * against the registry, and against the error answers the OpenAPI document
 * refers to for the operation.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { errorCodes, type ErrorCode } from '../../src/errors.ts';
import { OpenApiContract } from '../support/openapi-contract.ts';
import { isRfc9457 } from '../support/problem-details.ts';
import { httpRequest, rawExchange } from '../support/raw-http.ts';
import {
  apiKey,
  eachBackend,
  signup,
  startTestApp,
  type Org,
  type TestApp,
  type TestResponse,
} from '../support/test-app.ts';

interface Answer {
  status: number;
  contentType: string | null;
  requestId: string | null;
  body: any;
}

const answerOf = (res: TestResponse): Answer => ({
  status: res.status,
  contentType: res.headers.get('content-type'),
  requestId: res.headers.get('x-request-id'),
  body: res.body,
});

/** An error answer as RFC 9457 wants it, with the members of the API's first error body beside the RFC's. */
function assertProblem(answer: Answer, code: ErrorCode, label: string): void {
  assert.equal(answer.status, errorCodes[code].status, `${label}: status`);
  assert.equal(answer.contentType, 'application/problem+json', `${label}: media type`);
  const body: Record<string, any> = answer.body;
  assert.ok(isRfc9457(body), `${label}: RFC 9457 schema: ${JSON.stringify(isRfc9457.errors)}`);
  for (const member of ['type', 'title', 'status', 'detail', 'instance'])
    assert.ok(member in body, `${label}: ${member}`);
  assert.equal(body.type, `/errors/${code}`, label);
  assert.equal(body.title, errorCodes[code].title, label);
  assert.equal(body.status, answer.status, label);
  assert.equal(body.instance, answer.requestId, `${label}: instance is the request id`);
  assert.ok(body.detail.length > 0, label);
  // What clients read before problem details.
  assert.equal(body.error, code, label);
  assert.equal(body.message, body.detail, label);
  assert.equal(body.statusCode, answer.status, label);
}

eachBackend((backend) => {
  describe(`errors are RFC 9457 problem details and keep error, message, statusCode and details (${backend})`, () => {
    let t: TestApp;
    let org: Org;
    let contract: OpenApiContract;
    let member: string;

    before(async () => {
      // Three requests at once to each sign-in route of an address, then one a minute: the fourth refresh is a 429.
      t = await startTestApp(backend, {
        AUTH_RATE_LIMIT_PER_MINUTE: '1',
        AUTH_RATE_LIMIT_BURST: '3',
        MAX_BODY_BYTES: '65536',
      });
      org = await signup(t);
      member = await apiKey(t, org, 'member');
      contract = new OpenApiContract((await t.request('GET', '/api/v1/openapi.json')).body);
    });
    after(() => t.stop());

    /** The answer matches the error answer the document refers to for its operation (components.responses, narrowed to the status's codes). */
    function assertDocumented(method: string, path: string, answer: Answer, label: string): void {
      const result = contract.check({
        method,
        path,
        status: answer.status,
        contentType: answer.contentType,
        body: answer.body,
      });
      assert.ok(result, `${label}: ${method} ${path} is an operation of the document`);
      assert.match(
        result.op.responses[String(answer.status)]!.$ref ?? '',
        /^#\/components\/responses\/\w+$/,
        `${label}: a shared error answer`,
      );
      assert.deepEqual(result.problems, [], label);
    }

    test('handler and pipeline errors: 400, 401, 403, 404, 409, 413, 415, 422, each against the document', async () => {
      const viewer = await apiKey(t, org, 'viewer');
      const send = { to: '+14155550100', body: 'problem details' };
      const cases: Array<[ErrorCode, string, string, Parameters<TestApp['request']>[2]]> = [
        [
          'validation_error',
          'POST',
          '/api/v1/messages',
          { token: member, body: { body: 'no recipient', colour: 'red' } },
        ],
        ['bad_request', 'GET', '/api/v1/messages', { token: member, headers: { 'x-team-id': 'not a team id' } }],
        ['unauthorized', 'GET', '/api/v1/messages', {}],
        ['forbidden', 'POST', '/api/v1/messages', { token: viewer, body: send }],
        ['not_found', 'GET', '/api/v1/messages/msg_nothing/status', { token: member }],
        [
          'conflict',
          'POST',
          '/api/v1/auth/signup',
          { body: { organizationName: 'Again', email: org.email, password: 'long enough password' } },
        ],
        [
          'payload_too_large',
          'POST',
          '/api/v1/messages',
          { token: member, body: { ...send, body: 'x'.repeat(70_000) } },
        ],
        [
          'unsupported_media_type',
          'POST',
          '/api/v1/messages',
          { token: member, body: 'to=+14155550100', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
        ],
      ];
      for (const [code, method, path, opts] of cases) {
        const answer = answerOf(await t.request(method, path, opts));
        assertProblem(answer, code, code);
        assertDocumented(method, path, answer, code);
      }
      const invalid = answerOf(
        await t.request('POST', '/api/v1/messages', { token: member, body: { body: 'no recipient', colour: 'red' } }),
      );
      assert.deepEqual(
        invalid.body.details.map((d: { path: string }) => d.path).sort(),
        ['/colour', '/to'],
        'details lists every violation',
      );

      await t.request('POST', '/api/v1/messages', {
        token: member,
        body: send,
        headers: { 'idempotency-key': 'problem-1' },
      });
      const mismatch = answerOf(
        await t.request('POST', '/api/v1/messages', {
          token: member,
          body: { ...send, body: 'another body' },
          headers: { 'idempotency-key': 'problem-1' },
        }),
      );
      assertProblem(mismatch, 'idempotency_mismatch', 'idempotency_mismatch');
      assertDocumented('POST', '/api/v1/messages', mismatch, 'idempotency_mismatch');
    });

    test('429 from the rate limit, with Retry-After, against the document', async () => {
      const statuses: number[] = [];
      let refused: Answer | undefined;
      for (let i = 0; i < 5 && !refused; i++) {
        const res = await t.request('POST', '/api/v1/auth/refresh', { body: { refreshToken: 'not-a-token' } });
        statuses.push(res.status);
        if (res.status === 429) refused = answerOf(res);
        else assertProblem(answerOf(res), 'unauthorized', `refresh ${i + 1}`);
      }
      assert.ok(refused, `a 429 after the burst: ${statuses.join(', ')}`);
      assertProblem(refused, 'rate_limited', 'rate_limited');
      assertDocumented('POST', '/api/v1/auth/refresh', refused, 'rate_limited');
    });

    test("the router's own answers: 404 and 405 for paths, 431 before the head is read", async () => {
      assertProblem(answerOf(await t.request('GET', '/api/v1/nothing-here')), 'not_found', 'no route');
      const wrongMethod = await t.request('DELETE', '/api/v1/messages', { token: member });
      assertProblem(answerOf(wrongMethod), 'method_not_allowed', 'wrong method');
      assert.ok(wrongMethod.headers.get('allow'));
      const raw = await rawExchange(
        t.base,
        httpRequest('GET', '/api/v1/messages', [
          ['Host', 'relaybox.test'],
          ['X-Padding', 'a'.repeat(t.config.maxHeaderBytes)],
        ]),
      );
      const [head, body] = raw.text.split('\r\n\r\n') as [string, string];
      const header = (name: string) => new RegExp(`\\r\\n${name}: *([^\\r]*)`, 'i').exec(head)?.[1] ?? null;
      assertProblem(
        {
          status: raw.statuses[0]!,
          contentType: header('content-type'),
          requestId: header('x-request-id'),
          body: JSON.parse(body),
        },
        'header_fields_too_large',
        '431',
      );
    });

    test('the request id a client sends is the instance; a client that accepts only JSON still gets problem+json', async () => {
      const res = await t.request('GET', '/api/v1/messages', {
        headers: { 'x-request-id': 'client-chosen.id-1', accept: 'application/json' },
      });
      assertProblem(answerOf(res), 'unauthorized', 'with a request id');
      assert.equal(res.body.instance, 'client-chosen.id-1');
    });

    test('the referenced schema refuses a body without the RFC members or with a code of another status', async () => {
      const answer = answerOf(await t.request('GET', '/api/v1/messages/msg_nothing/status', { token: member }));
      const check = (body: unknown) =>
        contract.check({
          method: 'GET',
          path: '/api/v1/messages/msg_nothing/status',
          status: 404,
          contentType: 'application/problem+json',
          body,
        })!.problems;
      assert.deepEqual(check(answer.body), []);
      const { type: _type, instance: _instance, ...withoutRfcMembers } = answer.body;
      assert.notDeepEqual(check(withoutRfcMembers), [], 'type and instance are required');
      assert.notDeepEqual(check({ ...answer.body, error: 'conflict' }), [], 'a 404 carries not_found');
      const { error: _error, statusCode: _statusCode, ...withoutOldMembers } = answer.body;
      assert.notDeepEqual(check(withoutOldMembers), [], 'error and statusCode are required');
    });

    test('each problem type resolves to a page the service serves, made from the registry', async () => {
      for (const [code, { status, title }] of Object.entries(errorCodes)) {
        const res = await t.request('GET', `/errors/${code}`);
        assert.equal(res.status, 200, code);
        assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
        assert.ok(res.text.includes(`<h2>${title}</h2>`) && res.text.includes(`HTTP ${status}`), code);
      }
      const all = await t.request('GET', '/errors');
      for (const code of Object.keys(errorCodes)) assert.ok(all.text.includes(`id="${code}"`), code);
      assertProblem(answerOf(await t.request('GET', '/errors/no_such_code')), 'not_found', 'unknown code');
    });
  });
});

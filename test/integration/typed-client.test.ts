/**
 * The typed client of examples/typed-client against the document a running
 * service serves: openapi-typescript generates the types from it, the
 * example and every TypeScript code sample of the document type-check
 * against them (so a contract change that breaks clients fails here), and
 * the example sends a message and reads its status.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { apiKey, signup, startTestApp, type TestApp } from '../support/test-app.ts';

const run = promisify(execFile);
const example = join(import.meta.dirname, '..', '..', 'examples', 'typed-client');
const bin = (name: string) => join(example, 'node_modules', '.bin', name);

describe('the typed client example (openapi-typescript + openapi-fetch)', { timeout: 180_000 }, () => {
  let t: TestApp;

  before(async () => {
    t = await startTestApp('embedded');
  });
  after(() => t.stop());

  test('types generated from the served document; the example and every TypeScript sample type-check; the example sends and reads a status', async () => {
    const generated = await run(
      bin('openapi-typescript'),
      [`${t.base}/api/v1/openapi.json`, '--output', 'relaybox-api.d.ts'],
      { cwd: example, timeout: 60_000 },
    );
    assert.match(`${generated.stdout}${generated.stderr}`, /relaybox-api\.d\.ts/);

    const doc = (await t.request('GET', '/api/v1/openapi.json?codeSamples=true')).body;
    const samples: string[] = [];
    const names = new Set<string>();
    for (const item of Object.values<any>(doc.paths)) {
      for (const operation of Object.values<any>(item)) {
        const source: string = operation['x-codeSamples'].find((s: { lang: string }) => s.lang === 'TypeScript').source;
        for (const [, name] of source.matchAll(/path: \{ ([^}]+) \}/g)) for (const n of name!.split(', ')) names.add(n);
        samples.push(`export async function ${operation.operationId}() {\n${source}\n  return { data, error };\n}`);
      }
    }
    const checked = join(example, 'code-samples.ts');
    await writeFile(
      checked,
      [
        "import { readFileSync } from 'node:fs';",
        "import createClient from 'openapi-fetch';",
        "import type { paths } from './relaybox-api.js';",
        "const client = createClient<paths>({ baseUrl: 'http://localhost:3000' });",
        ...[...names].map((n) => `declare const ${n}: string;`),
        ...samples,
        '',
      ].join('\n'),
    );
    try {
      const tsc = await run(bin('tsc'), ['--noEmit', '-p', '.'], { cwd: example, timeout: 120_000 }).catch(
        (err: { stdout: string; stderr: string }) => ({ ...err, failed: true }),
      );
      assert.ok(!('failed' in tsc), `tsc --noEmit on the example and the samples:\n${tsc.stdout}${tsc.stderr}`);
    } finally {
      await rm(checked, { force: true });
    }

    const org = await signup(t);
    const key = await apiKey(t, org, 'member');
    const tsx = join(import.meta.dirname, '..', '..', 'node_modules', '.bin', 'tsx');
    const sent = await run(tsx, ['send-message.ts'], {
      cwd: example,
      env: { ...process.env, RELAYBOX_URL: t.base, RELAYBOX_API_KEY: key, RELAYBOX_TO: '+14155550123' },
      timeout: 60_000,
    });
    const id = /^sent (msg_\S+): queued$/m.exec(sent.stdout)?.[1];
    assert.ok(id, sent.stdout + sent.stderr);
    assert.match(sent.stdout, new RegExp(`^status of ${id}: queued`, 'm'));
    const stored = await t.request('GET', `/api/v1/messages/${id}/status`, { token: key });
    assert.equal(stored.status, 200);
    assert.equal(
      (await t.request('GET', `/api/v1/messages?direction=sent`, { token: key })).body.data[0].to,
      '+14155550123',
    );
  });

  test('a problem answer reaches the example as a typed error with type, title, status, detail and instance', async () => {
    const tsx = join(import.meta.dirname, '..', '..', 'node_modules', '.bin', 'tsx');
    const refused = await run(tsx, ['send-message.ts'], {
      cwd: example,
      env: { ...process.env, RELAYBOX_URL: t.base, RELAYBOX_API_KEY: 'rbx_live_not-a-key' },
      timeout: 60_000,
    }).then(
      () => assert.fail('a bad key must fail'),
      (err: { stderr: string }) => err.stderr,
    );
    assert.match(refused, /401 Unauthorized: .+ \(\/errors\/unauthorized, request [\w-]+\)/);
  });
});

/**
 * A scrape of a running service after a short send flow: `promtool check
 * metrics` finds nothing to object to in the whole output, the default
 * Node.js metrics included. promtool comes from Debian's `prometheus`
 * package (`.ci/run` installs it); outside CI a machine without it skips
 * that check, saying why.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { signup, startTestApp } from '../support/test-app.ts';

function promtool(): string | undefined {
  const found = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  return found.error ? undefined : 'promtool';
}

test('the whole /metrics output after a send is clean for promtool, with buckets past a minute and Node.js resources by type', async (t) => {
  const app = await startTestApp('embedded');
  t.after(() => app.stop());
  const org = await signup(app);
  const sent = await app.request('POST', '/api/v1/messages', {
    token: org.ownerToken,
    body: { to: '+14155550100', body: 'scraped' },
  });
  assert.equal(sent.status, 201, sent.text);
  const scrape = await app.request('GET', '/metrics');
  assert.equal(scrape.status, 200);
  const text = scrape.text;
  assert.match(
    text,
    /relaybox_http_request_duration_seconds_bucket\{le="60",route="\/api\/v1\/messages",method="POST",status="201"\} 1/,
    'a slow request lands in a bucket of its own, not in +Inf',
  );
  assert.match(text, /^nodejs_active_resources\{type="[A-Za-z]+"\} \d+$/m);
  assert.doesNotMatch(text, /^nodejs_active_\w+_total/m, 'no gauge named like a counter');
  assert.match(text, /^relaybox_messages_total\{outcome="accepted"\} 1$/m, 'the send is counted where it was stored');
  assert.match(
    text,
    new RegExp(
      `^relaybox_build_info\\{version="\\d+\\.\\d+\\.\\d+[^"]*",commit="[^"]+",node="${process.version.replace(/\./g, '\\.')}"\\} 1$`,
      'm',
    ),
  );

  const tool = promtool();
  if (!tool) {
    if (process.env.CI === 'true')
      assert.fail('promtool is missing in CI: .ci/run installs it (Debian package prometheus)');
    t.diagnostic('promtool not found: the promtool check is skipped (apt-get install prometheus)');
    return;
  }
  const checked = spawnSync(tool, ['check', 'metrics'], { input: text, encoding: 'utf8' });
  assert.equal(checked.status, 0, `promtool check metrics:\n${checked.stdout}${checked.stderr}`);
});

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { existsSync } from 'node:fs';
import { chromiumPath, dashboardPages, dashboardServiceEnv, launchBrowser, scenario } from '../support/browser.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { request } from '../support/test-app.ts';
import {
  readSendLog,
  simulateFailures,
  simulateReaction,
} from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { csvRecords } from '../../web/bulk-rows.ts';
import { readFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';

const password = 'a long enough password';
/**
 * The screenshots docs/dashboard.md shows are taken by this test, on every run, at 1200x800: into
 * .tmp/doc-images/ (git-ignored), so a test run leaves the working tree as it was; `npm run docs:images`
 * points DOCS_IMAGES_DIR at docs/images/ to refresh the committed ones.
 */
const committedImages = join(process.cwd(), 'docs', 'images');
const docImages = resolve(process.env.DOCS_IMAGES_DIR || join(process.cwd(), '.tmp', 'doc-images'));
const docImageFiles = [
  'dashboard-overview.png',
  'dashboard-job.png',
  'dashboard-relays.png',
  'dashboard-message.png',
  'dashboard-settings.png',
  'dashboard-messages-phone.png',
];
const xss = '<img src=x onerror=alert(1)>';
const number = (i: number) => `+4915150000${String(100 + i).slice(-3)}`;

/** 50 rows, two bad (an address that is no recipient, an empty body), with a quoted body holding a comma, a quote and a line break; BOM and CRLF. */
function fiftyRowCsv(): string {
  const rows = ['to,body'];
  for (let i = 0; i < 50; i++) {
    if (i === 10) rows.push('not-a-number,hello');
    else if (i === 20) rows.push(`${number(i)},`);
    else if (i === 30) rows.push(`${number(i)},"Hi, ""friend""\r\nsecond line"`);
    else rows.push(`${number(i)},Hello ${i}`);
  }
  return `\uFEFF${rows.join('\r\n')}\r\n`;
}

// In CI a missing browser is a failure (.ci/run installs it); elsewhere the suite says why it did not run.
const noBrowser =
  !existsSync(chromiumPath) && process.env.CI !== 'true'
    ? `${chromiumPath} is missing: apt-get install -y chromium`
    : false;

describe(
  'dashboard in Chromium against the service as npm start runs it, with a simulated relay',
  { timeout: 300_000, skip: noBrowser },
  () => {
    let dir: string;
    let service: ServiceProcess;
    let agent: ChildProcess | undefined;
    let base: string;
    let browser: Awaited<ReturnType<typeof launchBrowser>>;
    let page: Page;
    const alerts: string[] = [];
    const email = `owner-${Date.now()}@example.com`;
    let ownerToken = '';
    let liveJobId = '';
    let committedBefore: string[] = [];

    before(async () => {
      committedBefore = await fingerprints(committedImages);
      dir = await mkdtemp(join(tmpdir(), 'relaybox-dashboard-e2e-'));
      // The webhook receiver below listens on 127.0.0.1, which the address guard refuses unless told.
      service = await startServiceProcess(
        'all',
        {
          ...dashboardServiceEnv(join(dir, 'data')),
          WEBHOOK_ALLOW_PRIVATE: 'true',
          PACING_PER_SECOND: '1000000',
          PACING_BURST: '1000000',
          PACING_NEW_CONTACTS_PER_DAY: '1000000',
          PACING_UNANSWERED_CAP: '1000000',
          PACING_FOLLOW_UPS_PER_DAY: '1000000',
          PACING_JITTER_MS: '0',
          PACING_QUIET_HOURS: 'off',
          // A failed send is final at once, so the failed-rows scenario does not wait out retries.
          MESSAGE_MAX_ATTEMPTS: '1',
        },
        60_000,
      );
      base = `http://127.0.0.1:${service.port}`;
      browser = await launchBrowser();
      page = browser.page;
      page.on('dialog', async (d) => {
        if (d.type() === 'confirm') return d.accept();
        alerts.push(`${d.type()}: ${d.message()}`);
        return d.dismiss();
      });
    });

    after(async () => {
      await browser?.close();
      agent?.kill('SIGTERM');
      await service?.terminate();
      await rm(dir, { recursive: true, force: true });
    });

    test('pages and assets come from our origin with security headers, cache headers and compression', async () => {
      const html = await fetch(`${base}/`);
      const text = await html.text();
      assert.equal(html.status, 200);
      for (const res of [html, await fetch(`${base}/docs`)]) {
        const csp = res.headers.get('content-security-policy') ?? '';
        assert.match(csp, /script-src 'self'(;|$)/);
        assert.doesNotMatch(csp, /script-src[^;]*unsafe-inline/);
        assert.match(csp, /frame-ancestors 'none'/);
        assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
        assert.equal(res.headers.get('x-frame-options'), 'DENY');
        assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
        assert.equal(res.headers.get('cache-control'), 'no-cache');
      }
      assert.doesNotMatch(text, /<script>|<script [^>]*>[^<]/, 'no inline script');
      assert.doesNotMatch(text, /https?:\/\//, 'nothing from another origin');
      const etag = html.headers.get('etag')!;
      assert.equal((await fetch(`${base}/`, { headers: { 'if-none-match': etag } })).status, 304);
      const script = /src="(\/assets\/app\.[0-9a-f]{12}\.js)"/.exec(text)?.[1];
      assert.ok(script, 'the script has a content-hashed name');
      const asset = await fetch(`${base}${script}`, { headers: { 'accept-encoding': 'br' } });
      assert.equal(asset.status, 200);
      assert.equal(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      assert.equal(asset.headers.get('content-encoding'), 'br');
      assert.equal(asset.headers.get('x-content-type-options'), 'nosniff');
      assert.equal((await fetch(`${base}/assets/app.000000000000.js`)).status, 404);
    });

    test('sign up opens the dashboard; the refresh token is an HttpOnly SameSite=Strict cookie page script cannot read', async () => {
      await scenario(page, 'sign-up', async () => {
        await page.goto(`${base}/#/signup`);
        await page.getByLabel('Organization name').fill('Dashboard E2E');
        await page.getByLabel('Email').fill(email);
        await page.getByLabel('Password').fill(password);
        await page.getByRole('button', { name: 'Sign up' }).click();
        await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
        const cookies = await browser.context.cookies(`${base}/api/v1/auth/session`);
        const refresh = cookies.find((c) => c.name === 'relaybox_refresh');
        assert.ok(refresh, 'the refresh cookie is set');
        assert.equal(refresh.httpOnly, true);
        assert.equal(refresh.sameSite, 'Strict');
        const visible = await page.evaluate<{ cookie: string; local: number; session: number }>(
          '({ cookie: document.cookie, local: localStorage.length, session: sessionStorage.length })',
        );
        assert.doesNotMatch(visible.cookie, /relaybox_refresh/);
        assert.equal(visible.local, 0);
        assert.equal(visible.session, 0);
        // A reload keeps the session through the cookie alone.
        await page.reload();
        await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
      });
      const login = await request(base, 'POST', '/api/v1/auth/login', { body: { email, password } });
      assert.equal(login.status, 200);
      ownerToken = login.body.accessToken;
    });

    test('a simulated relay connects after "add a relay" shows its command', async () => {
      await scenario(page, 'add-relay', async () => {
        await page.goto(`${base}/#/relays`);
        await page.getByRole('button', { name: 'Add a relay' }).click();
        const command = await page.locator('#relay-command').textContent();
        const match = /^npx -y (\S+) connect --server (\S+) --token (\S+)$/.exec(command ?? '');
        assert.ok(match, `the exact agent command is shown: ${command}`);
        assert.match(
          match[1]!,
          new RegExp(`^${base}/downloads/relaybox-relay-[0-9][\\w.-]*\\.tgz$`),
          'the agent from this server',
        );
        const tarball = await fetch(match[1]!);
        assert.equal(tarball.status, 200);
        assert.equal(tarball.headers.get('content-type'), 'application/gzip');
        const args = [
          '--import',
          'tsx',
          'packages/relay-agent/src/cli.ts',
          'connect',
          '--server',
          match[2]!,
          '--token',
          match[3]!,
          '--simulate',
          '--state-dir',
          join(dir, 'relay-state'),
          '--chat-db',
          join(dir, 'relay', 'chat.db'),
          '--capacity',
          '10',
          '--poll-ms',
          '100',
          '--name',
          'e2e-relay',
        ];
        agent = spawn(process.execPath, args, {
          env: { ...process.env, LOG_LEVEL: 'warn', RELAY_SIM_DELIVERY_MS: '100' },
          stdio: 'ignore',
        });
        await waitUntil(
          async () =>
            (await request(base, 'GET', '/api/v1/relays', { token: ownerToken })).body.data?.[0]?.status === 'online',
          30_000,
          'the relay is online',
        );
        await page.reload();
        await page.getByRole('cell', { name: 'online' }).waitFor();
      });
    });

    test('a 50-row CSV with 2 bad rows previews 48 valid and 2 invalid with reasons; send now completes with 48 delivered', async () => {
      await scenario(page, 'bulk-send-now', async () => {
        const file = join(dir, 'list.csv');
        await writeFile(file, fiftyRowCsv());
        await page.goto(`${base}/#/bulk`);
        await page.locator('#bulk-file').setInputFiles(file);
        await page.locator('#count-valid').waitFor();
        assert.equal(await page.locator('#count-valid').textContent(), '48');
        assert.equal(await page.locator('#count-invalid').textContent(), '2');
        const invalid = page.locator('#preview-table tr.invalid');
        assert.equal(await invalid.count(), 2);
        assert.match((await invalid.nth(0).textContent()) ?? '', /not-a-number.*must be a phone number/);
        assert.match((await invalid.nth(1).textContent()) ?? '', /body is empty/);
        assert.match((await page.locator('#preview-table').textContent()) ?? '', /Hi, "friend"\s+second line/);
        await page.locator('#send-button').click();
        await page.waitForURL(/#\/jobs\/job_/);
        await page.locator('#job-status-value', { hasText: 'completed' }).waitFor({ timeout: 90_000 });
        assert.equal(await page.locator('#count-delivered').textContent(), '48');
        assert.equal(
          await page.locator('#job-progress').evaluate((p) => (p as unknown as { value: number }).value),
          100,
        );
        await waitUntil(
          async () => (await page.locator('#job-results tbody tr', { hasText: 'delivered' }).count()) === 48,
          10_000,
          'the results list 48 delivered',
        );
        assert.match(
          (await page.locator('#status').textContent()) ?? '',
          /completed/,
          'completion is announced in the live region',
        );
      });
    });

    test("the overview's charts draw the sends from the stats and take a new send in without a reload", async () => {
      await scenario(page, 'overview', async () => {
        await page.goto(`${base}/#/overview`);
        await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
        await waitUntil(
          async () => (await chartTotals(page, 'chart-volume')).delivered >= 48,
          30_000,
          'the volume chart holds the 48 delivered sends',
        );
        const before = await chartTotals(page, 'chart-volume');
        assert.ok(before.accepted >= 48 && before.sent >= 48, `accepted and sent are drawn: ${JSON.stringify(before)}`);
        assert.equal((await page.locator('#chart-volume canvas').count()) > 0, true, 'uPlot drew on a canvas');
        const latency = await chartData(page, 'chart-latency');
        assert.ok(
          latency.lines['delivered p50']!.some((v) => typeof v === 'number' && v > 0),
          'the latency chart has a delivered p50',
        );
        assert.match((await page.locator('#tile-rate').textContent()) ?? '', /^\d+(\.\d)?%$/);
        assert.equal(await page.locator('#tile-relays').textContent(), '1 of 1');
        await page.evaluate('window.sameDocument = true');
        const sent = await request(base, 'POST', '/api/v1/messages', {
          token: ownerToken,
          body: { to: number(89), body: 'counted on the overview' },
        });
        assert.equal(sent.status, 201, sent.text);
        await waitUntil(
          async () => (await chartTotals(page, 'chart-volume')).delivered >= before.delivered + 1,
          30_000,
          'the chart takes the new delivery in',
        );
        assert.equal(await page.evaluate('window.sameDocument'), true, 'no reload');
        await page.getByLabel('Last 30 days').check();
        await waitUntil(
          async () => [30, 31].includes((await chartData(page, 'chart-volume')).x.length),
          10_000,
          'the 30-day range has a bucket a day',
        );
        await page.getByLabel('Last hour').check();
        await waitUntil(
          async () => (await chartData(page, 'chart-volume')).x.length >= 60,
          10_000,
          'back to a bucket a minute',
        );
        await docScreenshot(page, 'dashboard-overview.png');
      });
    });

    test("a running job's progress advances in the jobs list without a reload", async () => {
      await scenario(page, 'jobs-live', async () => {
        // The relay is paused, so the job is accepted and waits at 0 %; it resumes once the list shows it.
        agent!.kill('SIGSTOP');
        let jobId = '';
        try {
          const messages = Array.from({ length: 500 }, (_, i) => ({
            to: `+49151${70_000_000 + i}`,
            body: `Live ${i}`,
          }));
          const job = await request(base, 'POST', '/api/v1/messages/bulk', { token: ownerToken, body: { messages } });
          assert.equal(job.status, 201, job.text);
          jobId = job.body.jobId;
          liveJobId = jobId;
          // Meanwhile the overview lists it with its progress bar, and says how long the oldest message has waited.
          await page.goto(`${base}/#/overview`);
          await page.locator(`#overview-jobs progress[data-job="${jobId}"]`).waitFor();
          await waitUntil(
            async () => /^\d+ s$/.test((await page.locator('#tile-oldest').textContent()) ?? ''),
            10_000,
            'the oldest queued age is shown',
          );
          assert.ok(Number(await page.locator('#tile-queued').textContent()) > 0, 'messages are queued');
          await page.goto(`${base}/#/jobs`);
          await page.locator(`progress[data-job="${jobId}"]`).waitFor();
          await page.evaluate('window.sameDocument = true');
          assert.equal(await progressOf(page, jobId), 0);
        } finally {
          agent!.kill('SIGCONT');
        }
        const seen = new Set<number>();
        await waitUntil(
          async () => {
            seen.add(await progressOf(page, jobId));
            return seen.has(100);
          },
          120_000,
          'the job reaches 100 % in the list',
        );
        assert.equal(await page.evaluate('window.sameDocument'), true, 'no reload');
        console.log(`progress values seen in the list: ${[...seen].sort((a, b) => a - b).join(', ')}`);
        assert.ok(seen.has(0) && seen.has(100), 'from 0 to 100 in place');
        assert.equal(await page.locator(`tr[data-job="${jobId}"] .st`).textContent(), 'completed');
        await page.getByRole('link', { name: jobId }).click();
        await page.locator('#job-status-value', { hasText: 'completed' }).waitFor();
        await page.locator('#job-results tbody tr').first().waitFor();
        await docScreenshot(page, 'dashboard-job.png');
      });
    });

    test('send one message with priority, find it by recipient and status, and read its timeline', async () => {
      await scenario(page, 'send-and-search', async () => {
        const to = number(91);
        await page.goto(`${base}/#/send`);
        await page.getByLabel('To', { exact: true }).fill(to);
        await page.getByLabel('Message').fill('One message from the dashboard');
        await page.getByLabel('Priority').fill('50');
        await page.getByRole('button', { name: 'Send', exact: true }).click();
        const link = page.locator('#send-done a');
        await link.waitFor();
        const id = (await link.textContent())!;
        await waitUntil(
          async () =>
            (await request(base, 'GET', `/api/v1/messages/${id}/status`, { token: ownerToken })).body.status ===
            'delivered',
          30_000,
          'the message is delivered',
        );
        // Its recipient loves it: a tapback, on the message's timeline too.
        const chatDb = join(dir, 'relay', 'chat.db');
        const sentRow = (await readSendLog(chatDb)).find((e) => e.messageId === id)!;
        await simulateReaction(chatDb, { from: to, targetGuid: sentRow.guid, tapback: 'love' });
        await waitUntil(
          async () =>
            (await request(base, 'GET', `/api/v1/messages/${id}`, { token: ownerToken })).body.reactions?.length === 1,
          30_000,
          'the tapback is on the message',
        );
        await page.goto(`${base}/#/messages`);
        await page.getByLabel('Recipient (phone or email)').fill(to);
        await page.getByLabel('Status').selectOption('delivered');
        await page.getByRole('button', { name: 'Search' }).click();
        await page.getByRole('heading', { name: '1 message', exact: true }).waitFor();
        // The job of the live-progress scenario: all its 500 messages, 100 a page.
        await page.getByLabel('Recipient (phone or email)').fill('');
        await page.getByLabel('Status').selectOption('');
        await page.getByLabel('Bulk job').fill(liveJobId);
        await page.getByRole('button', { name: 'Search' }).click();
        await page.getByRole('heading', { name: '500 messages', exact: true }).waitFor();
        assert.equal(await page.locator('#search-results tbody tr').count(), 100);
        await page.getByRole('button', { name: 'Next 100' }).click();
        await page.getByRole('heading', { name: 'Older messages: 100', exact: true }).waitFor();
        await page.getByLabel('Bulk job').fill('');
        await page.getByLabel('Recipient (phone or email)').fill(to);
        await page.getByLabel('Status').selectOption('delivered');
        await page.getByRole('button', { name: 'Search' }).click();
        await page.getByRole('heading', { name: '1 message', exact: true }).waitFor();
        await page.getByLabel('Status').selectOption('failed');
        await page.getByRole('button', { name: 'Search' }).click();
        await page.getByRole('heading', { name: '0 messages', exact: true }).waitFor();
        await page.getByLabel('Status').selectOption('delivered');
        await page.getByRole('button', { name: 'Search' }).click();
        await page.getByRole('link', { name: id }).waitFor();
        // A date range that ends before the send finds nothing.
        await page.getByLabel('Created before').fill('2020-01-01T00:00');
        await page.getByRole('button', { name: 'Search' }).click();
        await page.getByRole('heading', { name: '0 messages', exact: true }).waitFor();
        await page.getByLabel('Created before').fill('');
        await page.getByRole('button', { name: 'Search' }).click();
        await page.getByRole('link', { name: id }).click();
        await page.locator('#message-status', { hasText: 'delivered' }).waitFor();
        const hops = await page
          .locator('#message-timeline li')
          .evaluateAll((lis) => lis.map((li) => li.getAttribute('data-hop')));
        assert.equal(hops[0], 'accepted');
        assert.ok(
          hops.includes('handed_to_relay') && hops.includes('sent') && hops.includes('delivered'),
          `the timeline: ${hops.join(', ')}`,
        );
        // In time order, and where the server's times give way to the Mac's, a line says so.
        const times = await page
          .locator('#message-timeline li[data-hop] time')
          .evaluateAll((ts) => ts.map((t) => Date.parse(t.getAttribute('datetime')!)));
        assert.deepEqual(
          times,
          [...times].sort((a, b) => a - b),
          'the hops are in time order',
        );
        assert.equal(await page.locator('#message-timeline li.clock[data-clock-change="mac"]').count(), 1);
        assert.match(
          (await page.locator('#message-timeline li[data-hop="reaction"]').textContent()) ?? '',
          /love from/,
        );
        assert.equal(await page.locator('#message-reactions').textContent(), `love from ${to}`);
        assert.equal(await page.locator('#message-to').textContent(), to);
        assert.equal(await page.locator('#message-body').textContent(), 'One message from the dashboard');
        assert.match((await page.locator('main').textContent()) ?? '', /Priority50/);
        await page.locator('#message-conversation').waitFor();
        await docScreenshot(page, 'dashboard-message.png');
        await page.goto(`${base}/#/messages`);
        await page.locator('#search-results tbody tr').first().waitFor();
        await docScreenshot(page, 'dashboard-messages-phone.png', { width: 390, height: 844 });
      });
    });

    test('an automation is created, dry-run against a sample message, and edited', async () => {
      await scenario(page, 'automations', async () => {
        await page.goto(`${base}/#/automations`);
        await page.getByLabel('Name').fill('Stop words');
        await page.getByRole('button', { name: 'Add condition' }).click();
        await page.getByLabel('Condition 1 operator').selectOption('contains');
        await page.getByLabel('Condition 1 value').fill('stop');
        await page.getByLabel('Action 1 Reply text').fill('You will not hear from us again.');
        await page.getByRole('button', { name: 'Create automation' }).click();
        await page.getByRole('heading', { name: 'Automation: Stop words' }).waitFor();
        const id = /#\/automations\/(.+)$/.exec(page.url())![1]!;
        const saved = await request(base, 'GET', `/api/v1/automations/${id}`, { token: ownerToken });
        assert.deepEqual(saved.body.conditions, [{ field: 'body', operator: 'contains', value: 'stop' }]);
        assert.deepEqual(saved.body.actions, [
          { type: 'send_reply', config: { body: 'You will not hear from us again.' } },
        ]);
        await page.getByLabel('Sample message text').fill('please stop now');
        await page.getByRole('button', { name: 'Dry run' }).click();
        await page.locator('#dry-run-matched', { hasText: 'Matches' }).waitFor();
        assert.match((await page.locator('#dry-run-result').textContent()) ?? '', /send reply/);
        await page.getByLabel('Sample message text').fill('hello');
        await page.getByRole('button', { name: 'Dry run' }).click();
        await page.locator('#dry-run-matched', { hasText: 'Does not match' }).waitFor();
        await page.getByRole('button', { name: 'Disable' }).click();
        await page.locator('#automation-state', { hasText: 'disabled' }).waitFor();
        await page.getByRole('button', { name: 'Edit' }).click();
        await page.getByLabel('Condition 1 value').fill('unsubscribe');
        await page.getByRole('button', { name: 'Save changes' }).click();
        await page.getByText('body contains “unsubscribe”').waitFor();
        assert.equal(
          (await request(base, 'GET', `/api/v1/automations/${id}`, { token: ownerToken })).body.enabled,
          false,
          'an edit keeps the state',
        );
      });
    });

    test('an admin adds a member with a role, changes the role, removes the member and creates a team', async () => {
      await scenario(page, 'members', async () => {
        const invited = `member-${Date.now()}@example.com`;
        await page.goto(`${base}/#/members`);
        await page.getByLabel('Email').fill(invited);
        await page.getByLabel('First password').fill(password);
        await page.getByLabel('Role', { exact: true }).selectOption('member');
        await page.getByRole('button', { name: 'Add member' }).click();
        await page.getByRole('row', { name: new RegExp(`${invited.replace(/[.+]/g, '\\$&')} member`) }).waitFor();
        const login = await request(base, 'POST', '/api/v1/auth/login', { body: { email: invited, password } });
        assert.equal(login.status, 200, 'the new member can sign in');
        await page.getByLabel(`New role for ${invited}`).selectOption('viewer');
        await page.getByRole('button', { name: `Change the role of ${invited}` }).click();
        await page.getByRole('row', { name: new RegExp(`${invited.replace(/[.+]/g, '\\$&')} viewer`) }).waitFor();
        assert.equal(
          (await request(base, 'GET', '/api/v1/me', { token: login.body.accessToken })).body.role,
          'viewer',
          "the member's token acts as a viewer at once",
        );
        await page.getByRole('button', { name: `Remove ${invited}` }).click();
        await page
          .getByRole('row', { name: new RegExp(invited.replace(/[.+]/g, '\\$&')) })
          .waitFor({ state: 'detached' });
        assert.equal(
          (await request(base, 'GET', '/api/v1/me', { token: login.body.accessToken })).status,
          401,
          "a removed member's token stops",
        );
        await page.getByLabel('Team name').fill('Support');
        await page.getByRole('button', { name: 'Create team' }).click();
        await page.getByRole('cell', { name: 'Support', exact: true }).waitFor();
      });
    });

    test('a failed send is listed with its error and downloads as CSV with its body', async () => {
      await scenario(page, 'failed-rows', async () => {
        await simulateFailures(join(dir, 'relay', 'chat.db'), 1);
        const file = join(dir, 'one-fails.csv');
        // Written as a person types it, with spaces.
        await writeFile(file, `to,body\n${number(60).replace('+49151', '+49 151 ')},"first, with a comma"\n`);
        await page.goto(`${base}/#/bulk`);
        await page.locator('#bulk-file').setInputFiles(file);
        await page.locator('#count-valid', { hasText: '1' }).waitFor();
        await page.locator('#send-button').click();
        await page.locator('#job-status-value', { hasText: 'completed' }).waitFor({ timeout: 60_000 });
        assert.equal(await page.locator('#count-failed').textContent(), '1');
        await page.getByRole('button', { name: 'Download failed rows as CSV' }).waitFor();
        const [download] = await Promise.all([
          page.waitForEvent('download'),
          page.getByRole('button', { name: 'Download failed rows as CSV' }).click(),
        ]);
        const saved = join(dir, 'failed.csv');
        await download.saveAs(saved);
        const rows = csvRecords((await readFile(saved, 'utf8')).replace(/^\uFEFF/, '')).map((r) => r.fields);
        assert.deepEqual(rows[0], ['to', 'body', 'error']);
        assert.equal(rows.length, 2);
        assert.equal(rows[1]![0]!.replace(/\s/g, ''), number(60));
        assert.equal(rows[1]![1], 'first, with a comma');
        assert.ok(rows[1]![2], 'the error is there');
      });
    });

    test('a scheduled job shows scheduled, and cancel makes it cancelled', async () => {
      await scenario(page, 'schedule-cancel', async () => {
        const file = join(dir, 'later.json');
        await writeFile(
          file,
          JSON.stringify([
            { to: number(1), body: 'later' },
            { to: number(2), body: 'later too' },
          ]),
        );
        await page.goto(`${base}/#/bulk`);
        await page.locator('#bulk-file').setInputFiles(file);
        await page.locator('#count-valid', { hasText: '2' }).waitFor();
        await page.getByLabel('Schedule').check();
        assert.match((await page.locator('#schedule-zone').textContent()) ?? '', /Time zone: .+ \(UTC[+−]\d\d:\d\d\)/);
        // A string, not a function: tsx's helpers do not exist in the page.
        const local = await page.evaluate<string>(`(() => {
        const d = new Date(Date.now() + 3 * 3600000);
        const pad = (n) => String(n).padStart(2, '0');
        return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + 'T' + pad(d.getHours()) + ':' + pad(d.getMinutes());
      })()`);
        await page.locator('#schedule-at').fill(local);
        await page.locator('#send-button').click();
        await page.locator('#job-status-value', { hasText: 'scheduled' }).waitFor();
        await page.getByRole('button', { name: 'Cancel job' }).click();
        await page.locator('#job-status-value', { hasText: 'cancelled' }).waitFor();
        await page.goto(`${base}/#/jobs`);
        await page.getByRole('cell', { name: 'cancelled' }).waitFor();
      });
    });

    test('a message body and a contact name holding markup render as text; no dialog fires', async () => {
      await scenario(page, 'xss', async () => {
        const to = number(77);
        const contact = await request(base, 'POST', '/api/v1/contacts', {
          token: ownerToken,
          body: { firstName: xss, phoneNumbers: [to] },
        });
        assert.equal(contact.status, 201, contact.text);
        const sent = await request(base, 'POST', '/api/v1/messages', { token: ownerToken, body: { to, body: xss } });
        assert.equal(sent.status, 201, sent.text);
        await page.goto(`${base}/#/conversations`);
        await page.getByRole('link', { name: new RegExp(to.replace('+', '\\+')) }).click();
        await page.locator('#thread .body', { hasText: xss }).waitFor();
        assert.equal(await page.locator('main img').count(), 0, 'no element was made from the text');
        assert.match((await page.locator('main h1').textContent()) ?? '', /<img src=x onerror=alert\(1\)>/);
        await page.waitForTimeout(500);
        assert.deepEqual(alerts, []);
      });
    });

    test('the team switcher appears with a second team and scopes the lists to the chosen team', async () => {
      const team = await request(base, 'POST', '/api/v1/teams', { token: ownerToken, body: { name: 'Second team' } });
      assert.equal(team.status, 201, team.text);
      await scenario(page, 'team-switcher', async () => {
        await page.goto(`${base}/#/jobs`);
        await page.reload();
        const switcher = page.getByLabel('Team');
        await switcher.waitFor();
        const teams = await request(base, 'GET', '/api/v1/teams', { token: ownerToken });
        assert.equal(await switcher.locator('option').count(), teams.body.data.length);
        assert.ok(teams.body.data.length >= 2);
        await page.locator('table').first().waitFor();
        await switcher.selectOption({ label: 'Second team' });
        await page.getByText('No bulk jobs yet.').waitFor();
      });
    });

    test('at phone width nothing overflows sideways; the keyboard reaches "skip to content" first and every control has a label', async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      await scenario(page, 'phone-width', async () => {
        {
          // Every page but a message's (the phone-width check of dashboard-quality.test.ts opens that one).
          for (const [hash, title] of dashboardPages.filter(([hash]) => !hash.includes(':'))) {
            await page.evaluate(`location.hash = '${hash}'`);
            await page.locator('main h1', { hasText: title }).waitFor();
            const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
            assert.ok(overflow <= 1, `${hash} overflows by ${overflow}px`);
            const unlabeled = await page.evaluate<string[]>(`[...document.querySelectorAll('input, select, textarea')]
            .filter((el) => el.type !== 'hidden' && !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
            .map((el) => el.id || el.name)`);
            assert.deepEqual(unlabeled, [], `${hash}: every control has a label`);
          }
          await page.evaluate(`location.hash = '#/api-keys'`);
          await page.reload();
          await page.locator('main h1', { hasText: 'API keys' }).waitFor();
          await page.keyboard.press('Tab');
          assert.equal(await page.evaluate<string>('document.activeElement.textContent'), 'Skip to content');
          await page.keyboard.press('Enter');
          assert.equal(await page.evaluate<string>('document.activeElement.id'), 'main');
        }
      }).finally(() => page.setViewportSize({ width: 1280, height: 900 }));
    });

    test('a 10,000-row file previews without freezing the page', async () => {
      await scenario(page, 'ten-thousand-rows', async () => {
        const file = join(dir, 'big.csv');
        const rows = ['to,body'];
        for (let i = 0; i < 10_000; i++) rows.push(`+49151${50_000_000 + i},"Hello ${i}, see you"`);
        await writeFile(file, rows.join('\r\n'));
        await page.goto(`${base}/#/bulk`);
        const started = Date.now();
        await page.locator('#bulk-file').setInputFiles(file);
        await page.locator('#count-valid', { hasText: '10000' }).waitFor({ timeout: 30_000 });
        const ms = Date.now() - started;
        assert.equal(
          await page.locator('#preview-table tbody tr').count(),
          100,
          'one page of rows is in the document, not 10,000',
        );
        // The page still answers promptly once the preview is there.
        const t0 = Date.now();
        await page.getByRole('button', { name: 'Next' }).click();
        await page.locator('#preview-table caption', { hasText: 'Rows 101–200' }).waitFor();
        assert.ok(Date.now() - t0 < 5_000, 'paging is quick');
        console.log(`10,000-row preview shown in ${ms} ms`);
      });
    });

    test('API keys: a new key is shown once, then revoked', async () => {
      await scenario(page, 'api-keys', async () => {
        await page.evaluate(`location.hash = '#/api-keys'`);
        await page.locator('main h1', { hasText: 'API keys' }).waitFor();
        await page.getByLabel('Name').fill('Dashboard key');
        await page.getByRole('button', { name: 'Create key' }).click();
        const key = (await page.locator('#new-key').textContent()) ?? '';
        assert.ok(key.length > 20, 'the raw key is shown');
        const me = await request(base, 'GET', '/api/v1/me', { token: key });
        assert.equal(me.status, 200, 'the key works');
        await page.reload();
        await page.getByRole('cell', { name: 'Dashboard key', exact: true }).waitFor();
        assert.equal(await page.locator('#new-key').count(), 0, 'shown once');
        assert.doesNotMatch((await page.locator('main').textContent()) ?? '', new RegExp(key));
        await page.getByRole('button', { name: 'Revoke Dashboard key' }).click();
        await page.getByRole('cell', { name: 'Dashboard key', exact: true }).waitFor({ state: 'detached' });
        await waitUntil(
          async () => (await request(base, 'GET', '/api/v1/me', { token: key })).status === 401,
          15_000,
          'the revoked key is refused',
        );
      });
    });

    test("the test data switch shows a test key's message, delivered by the built-in relay, and hides it again", async () => {
      const made = await request(base, 'POST', '/api/v1/api-keys', {
        token: ownerToken,
        body: { name: 'Test key', mode: 'test' },
      });
      assert.equal(made.status, 201, made.text);
      const to = '+15005550001';
      const sent = await request(base, 'POST', '/api/v1/messages', {
        token: made.body.key,
        body: { to, body: 'A test-mode message' },
      });
      assert.equal(sent.status, 201, sent.text);
      await waitUntil(
        async () =>
          (await request(base, 'GET', `/api/v1/messages/${sent.body.id}/status`, { token: made.body.key })).body
            .status === 'delivered',
        30_000,
        'the test message is delivered',
      );
      await scenario(page, 'test-mode', async () => {
        await page.goto(`${base}/#/messages`);
        const toggle = page.getByRole('button', { name: 'Test data' });
        assert.equal(await toggle.getAttribute('aria-pressed'), 'false');
        await toggle.click();
        await page.locator('#test-banner').waitFor();
        assert.equal(await page.getByRole('button', { name: 'Test data' }).getAttribute('aria-pressed'), 'true');
        await page.getByLabel('Recipient (phone or email)').fill(to);
        await page.getByRole('button', { name: 'Search' }).click();
        await page.getByRole('link', { name: sent.body.id }).waitFor();
        await page.getByRole('button', { name: 'Test data' }).click();
        await page.locator('#test-banner').waitFor({ state: 'detached' });
        await page.getByLabel('Recipient (phone or email)').fill(to);
        await page.getByRole('button', { name: 'Search' }).click();
        await page.getByRole('heading', { name: '0 messages', exact: true }).waitFor();
      });
    });

    test('the request log lists an API request by its request id, and filters a 404 by its status class', async () => {
      await scenario(page, 'request-log', async () => {
        const made = await request(base, 'POST', '/api/v1/api-keys', {
          token: ownerToken,
          body: { name: 'Logged key', role: 'member' },
        });
        assert.equal(made.status, 201, made.text);
        const requestId = `dash-${Date.now()}`;
        const missing = await request(base, 'GET', '/api/v1/messages/msg_no_such_message', {
          token: made.body.key,
          headers: { 'x-request-id': requestId },
        });
        assert.equal(missing.status, 404);
        await page.evaluate(`location.hash = '#/request-log'`);
        await page.locator('main h1', { hasText: 'Request log' }).waitFor();
        await page.getByLabel('Request ID').fill(requestId);
        await page.getByLabel('Status').fill('4xx');
        const row = page.locator(`tr[data-request-id="${requestId}"]`);
        // The request is listed about a second after its answer: show again until it is there.
        await waitUntil(
          async () => {
            await page.getByRole('button', { name: 'Show', exact: true }).click();
            await page.locator('#request-log', { hasNotText: 'Reading…' }).waitFor();
            return (await row.count()) === 1;
          },
          15_000,
          'the request is listed',
        );
        const text = (await row.textContent()) ?? '';
        for (const part of ['GET', '/api/v1/messages/msg_no_such_message', '404', made.body.id, 'not_found'])
          assert.ok(text.includes(part), `${part} in ${text}`);
        await page.getByLabel('Status').fill('2xx');
        await page.getByRole('button', { name: 'Show', exact: true }).click();
        await page.getByText('No requests match in the last 7 days.').waitFor();
      });
    });

    test('opt-outs: the suppression list with how each handle got there; a handle added by hand, found, and removed', async () => {
      await scenario(page, 'opt-outs', async () => {
        const imported = await request(base, 'POST', '/api/v1/suppressions', {
          token: ownerToken,
          body: { handle: '+14155550177', reason: 'asked by phone' },
        });
        assert.equal(imported.status, 201, imported.text);
        await page.evaluate(`location.hash = '#/opt-outs'`);
        await page.locator('main h1', { hasText: 'Opt-outs' }).waitFor();
        await page.locator('tr[data-handle="+14155550177"]', { hasText: 'asked by phone' }).waitFor();
        await page.getByLabel('Phone number or email').fill('+1 415 555 0178');
        await page.getByLabel('Reason (optional)').fill('dashboard');
        await page.getByRole('button', { name: 'Add', exact: true }).click();
        await page.locator('tr[data-handle="+14155550178"]', { hasText: 'added by hand or API' }).waitFor();
        const listed = await request(base, 'GET', '/api/v1/suppressions?handle=%2B14155550178', { token: ownerToken });
        assert.equal(listed.body.data.length, 1, 'stored as E.164');
        await page.getByLabel('Handle', { exact: true }).fill('+14155550177');
        await page.getByRole('button', { name: 'Show', exact: true }).click();
        await page.locator('tr[data-handle="+14155550178"]').waitFor({ state: 'detached' });
        await page.getByRole('button', { name: 'Remove +14155550177' }).click();
        await page.getByText('Nobody is on the suppression list.').waitFor();
        const gone = await request(base, 'GET', '/api/v1/suppressions?handle=%2B14155550177', { token: ownerToken });
        assert.equal(gone.body.data.length, 0, 'removed');
      });
    });

    test('webhooks: create, disable and enable, a failed delivery in the log, retry delivers it', async () => {
      let calls = 0;
      const receiver: Server = createServer((req, res) => {
        req.resume();
        calls++;
        res.statusCode = calls === 1 ? 500 : 200;
        res.end();
      });
      await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      try {
        await scenario(page, 'webhooks', async () => {
          await page.evaluate(`location.hash = '#/webhooks'`);
          await page.locator('main h1', { hasText: 'Webhooks' }).waitFor();
          await page.getByLabel('URL (http or https, public address)', { exact: true }).fill(url);
          await page.getByRole('button', { name: 'Create webhook' }).click();
          await page.getByRole('cell', { name: 'enabled' }).waitFor();
          await page.getByRole('button', { name: `Disable ${url}` }).click();
          await page.getByRole('cell', { name: 'disabled' }).waitFor();
          await page.getByRole('button', { name: `Enable ${url}` }).click();
          await page.getByRole('cell', { name: 'enabled' }).waitFor();
          const sent = await request(base, 'POST', '/api/v1/messages', {
            token: ownerToken,
            body: { to: number(88), body: 'for the webhook' },
          });
          assert.equal(sent.status, 201, sent.text);
          await waitUntil(async () => calls >= 1, 30_000, 'the receiver is called');
          await page.getByRole('link', { name: url }).click();
          await page.getByRole('heading', { name: 'Delivery log' }).waitFor();
          await waitUntil(
            async () => {
              await page.reload();
              await page.getByRole('heading', { name: 'Delivery log' }).waitFor();
              return (await page.getByRole('cell', { name: '500' }).count()) > 0;
            },
            30_000,
            'the failed attempt is in the log',
          );
          await page.getByRole('button', { name: 'Retry' }).first().click();
          await waitUntil(
            async () => {
              await page.reload();
              await page.getByRole('heading', { name: 'Delivery log' }).waitFor();
              return (await page.getByRole('cell', { name: 'succeeded' }).count()) > 0;
            },
            30_000,
            'the retried delivery succeeded',
          );
          assert.ok(calls >= 2);
          // The message's page lists the deliveries of its events, the failed one and the retried one.
          await page.goto(`${base}/#/messages/${sent.body.id}`);
          await page.locator('#message-deliveries-list').getByRole('cell', { name: 'succeeded' }).first().waitFor();
        });
      } finally {
        receiver.close();
      }
    });

    test("the relays page draws each relay's sends a minute and each sender number's usage", async () => {
      const registered = await request(base, 'POST', '/api/v1/phone-numbers', {
        token: ownerToken,
        body: { number: '+4915199990001', label: 'Sales' },
      });
      assert.equal(registered.status, 201, registered.text);
      // The number may write to no new recipient: a message from it waits for its new-contact cap.
      const capped = await request(base, 'PUT', `/api/v1/phone-numbers/${registered.body.id}`, {
        token: ownerToken,
        body: { pacing: { newContactsPerDay: 0 } },
      });
      assert.equal(capped.status, 200, capped.text);
      const held = await request(base, 'POST', '/api/v1/messages', {
        token: ownerToken,
        body: { to: '+4915199990002', body: 'held by the cap', fromNumber: '+4915199990001' },
      });
      assert.equal(held.status, 201, held.text);
      await scenario(page, 'relays', async () => {
        await page.goto(`${base}/#/relays`);
        const figure = page.locator('#relay-charts figure').first();
        await figure.waitFor();
        await waitUntil(
          async () => ((await figure.getAttribute('data-chart')) ?? '').length > 0,
          15_000,
          'the relay chart has data',
        );
        const data = JSON.parse((await figure.getAttribute('data-chart'))!) as {
          x: string[];
          lines: Record<string, number[]>;
        };
        assert.ok(data.x.length >= 60, 'a bucket a minute over the hour');
        assert.ok(data.lines.sent!.reduce((a, b) => a + b, 0) >= 500, 'the relay sent the jobs of this run');
        const history = page.locator('#relay-charts .history').first();
        assert.match((await history.textContent()) ?? '', /online 100\.0% of the recorded time; online now/);
        const spans = JSON.parse((await history.getAttribute('data-spans'))!) as Array<{ online: boolean | null }>;
        assert.equal(spans.at(-1)!.online, true, 'online since its relay.online event');
        const row = page.locator('tr[data-number="+4915199990001"]');
        await row.waitFor();
        assert.match((await row.textContent()) ?? '', /Sales.*\/s, burst \d+/);
        assert.match(
          (await row.textContent()) ?? '',
          /\d+ awaiting a reply \(cap (\d+|—) unanswered\); \d+ of (\d+|—) follow-ups; (quiet \d\d:\d\d–\d\d:\d\d their time|no quiet hours)/,
          'the line health',
        );
        // Its reply rate and unanswered share over the recipients it first wrote to in 7 days (none yet), and what holds it.
        const cells = await row.locator('td').allTextContents();
        assert.equal(cells[6], 'no new recipient in 7 days');
        assert.match(cells[7]!, /^new recipients: the new-contact cap, until /);
        assert.match(cells[8]!, /^send now; new contact .+; follow-up now$/);
        const usage = await request(base, 'GET', `/api/v1/phone-numbers/${registered.body.id}/usage`, {
          token: ownerToken,
        });
        const { recipients, replyRate, unansweredShare } = usage.body.health;
        assert.deepEqual([recipients, replyRate, unansweredShare], [0, null, null]);
        await docScreenshot(page, 'dashboard-relays.png');
        // The held message's page says why it waits, in words.
        await page.goto(`${base}/#/messages/${held.body.id}`);
        const waiting = page.locator('#message-waiting');
        await waiting.waitFor();
        assert.equal(await waiting.getAttribute('data-reason'), 'new_contact_cap');
        assert.match(
          (await waiting.textContent()) ?? '',
          /new-contact cap: the line wrote to its cap of new recipients/,
        );
      });
    });

    test('settings show the organization, the API base URL, the rate limit and retry policy in force, and save the pace, line health, stop keywords and help text; an unknown address is "not found"', async () => {
      await scenario(page, 'settings', async () => {
        // A line-health setting the form does not show: saving the form keeps it.
        await request(base, 'PUT', '/api/v1/organization/pacing', { token: ownerToken, body: { quietHours: false } });
        await page.goto(`${base}/#/settings`);
        await page.locator('#settings-base-url', { hasText: `${base}/api/v1` }).waitFor();
        assert.equal(await page.locator('#settings-org-name').textContent(), 'Dashboard E2E');
        assert.equal(await page.locator('#settings-rate-limit').textContent(), '6000');
        assert.equal(await page.locator('#settings-retry-attempts').textContent(), '8');
        await page.getByLabel('Burst').fill('5');
        await page.getByRole('button', { name: 'Save pacing' }).click();
        await waitUntil(
          async () =>
            (await request(base, 'GET', '/api/v1/organization/pacing', { token: ownerToken })).body.burst === 5,
          10_000,
          'the pace is saved',
        );
        assert.equal(
          (await request(base, 'GET', '/api/v1/organization/pacing', { token: ownerToken })).body.quietHours,
          false,
        );
        assert.equal(await page.getByLabel('No quiet hours').isChecked(), true, 'the form shows quiet hours off');

        // The line-health rules: saved as typed; half a quiet-hours window is refused before it is sent.
        const pacing = async () =>
          (await request(base, 'GET', '/api/v1/organization/pacing', { token: ownerToken })).body;
        await page.getByLabel('Unanswered cap').fill('3');
        await page.getByLabel('Follow-ups a day').fill('40');
        await page.getByLabel('First-message spacing').fill('1500');
        await page.getByLabel('No quiet hours').uncheck();
        await page.getByLabel('Quiet hours start').fill('20:00');
        await page.getByRole('button', { name: 'Save pacing' }).click();
        await page.locator('#pace-form-error', { hasText: 'Quiet hours need a start and an end' }).waitFor();
        assert.equal((await pacing()).quietHours, false, 'nothing was saved');
        await page.getByLabel('Quiet hours end').fill('09:00');
        await page.getByLabel('Time zone of numbers').fill('Europe/Paris');
        await page.getByRole('button', { name: 'Save pacing' }).click();
        await waitUntil(async () => (await pacing()).unansweredCap === 3, 10_000, 'the line health is saved');
        const saved = await pacing();
        assert.deepEqual(
          [saved.burst, saved.followUpsPerDay, saved.jitterMs, saved.quietHours, saved.timeZone],
          [5, 40, 1500, { start: '20:00', end: '09:00' }, 'Europe/Paris'],
        );
        // The API's answer to a bad value shows on the form.
        await page.getByLabel('Time zone of numbers').fill('Mars/Olympus');
        await page.getByRole('button', { name: 'Save pacing' }).click();
        await page.locator('#pace-form-error', { hasText: 'Mars/Olympus' }).waitFor();
        await page.reload();
        assert.equal(await page.getByLabel('Unanswered cap').inputValue(), '3', 'read back on load');
        assert.equal(await page.getByLabel('Quiet hours end').inputValue(), '09:00');

        // Stop keywords and help text.
        await page.getByLabel('Own stop keywords').fill('arret,  basta ,');
        await page.getByRole('textbox', { name: /^Help text/ }).fill('Acme support: reply STOP to opt out.');
        await page.getByRole('button', { name: 'Save opt-out settings' }).click();
        const optOuts = async () =>
          (await request(base, 'GET', '/api/v1/organization/opt-outs', { token: ownerToken })).body;
        await waitUntil(async () => (await optOuts()).stopKeywords.length === 2, 10_000, 'the keywords are saved');
        assert.deepEqual(
          [(await optOuts()).stopKeywords, (await optOuts()).helpText],
          [['arret', 'basta'], 'Acme support: reply STOP to opt out.'],
        );
        await page.getByRole('textbox', { name: /^Help text/ }).fill('');
        await page.getByRole('button', { name: 'Save opt-out settings' }).click();
        await waitUntil(async () => (await optOuts()).helpText === null, 10_000, 'an empty help text is none');
        await request(base, 'PUT', '/api/v1/organization/opt-outs', { token: ownerToken, body: { stopKeywords: [] } });
        await request(base, 'PUT', '/api/v1/organization/pacing', { token: ownerToken, body: {} });
        await page.reload();
        await page.locator('#settings-base-url').waitFor();
        await docScreenshot(page, 'dashboard-settings.png');
        await page.goto(`${base}/#/no-such-page`);
        await page.getByRole('heading', { name: 'Page not found', level: 1 }).waitFor();
      });
    });

    test('a viewer sees no send button', async () => {
      const viewerEmail = `viewer-${Date.now()}@example.com`;
      const added = await request(base, 'POST', '/api/v1/members', {
        token: ownerToken,
        body: { email: viewerEmail, password, role: 'viewer' },
      });
      assert.equal(added.status, 201, added.text);
      await scenario(page, 'viewer', async () => {
        await page.getByRole('button', { name: 'Sign out' }).click();
        await page.getByRole('heading', { name: 'Sign in to Relaybox' }).waitFor();
        assert.equal(
          (await browser.context.cookies(`${base}/api/v1/auth/session`)).some(
            (c) => c.name === 'relaybox_refresh' && c.value !== '',
          ),
          false,
          'sign-out clears the cookie',
        );
        await page.getByLabel('Email').fill(viewerEmail);
        await page.getByLabel('Password').fill(password);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByText(`${viewerEmail} (viewer)`).waitFor();
        assert.equal(await page.getByRole('link', { name: 'Bulk send' }).count(), 0);
        await page.goto(`${base}/#/bulk`);
        await page.getByRole('heading', { name: 'Bulk send' }).waitFor();
        assert.equal(await page.locator('#send-button').count(), 0);
        assert.equal(await page.locator('#bulk-file').count(), 0);
        for (const [hash, title, control] of [
          ['#/send', 'Send a message', '#send-one'],
          ['#/automations', 'Automations', '#automation-form'],
          ['#/members', 'Members and teams', '#invite-member'],
        ] as const) {
          await page.evaluate(`location.hash = '${hash}'`);
          await page.locator('main h1', { hasText: title }).waitFor();
          assert.equal(await page.locator(control).count(), 0, `${hash} is read-only for a viewer`);
        }
      });
    });

    test('/docs renders the operations from /api/v1/openapi.json with their curl and TypeScript samples, offline', async () => {
      await scenario(page, 'docs', async () => {
        await page.goto(`${base}/docs`);
        await page.locator('h2', { hasText: 'Create a bulk job' }).first().waitFor({ timeout: 60_000 });
        await page.locator('h2', { hasText: 'Send a message' }).first().waitFor();
        const send = page.locator('[data-section-id="operation/sendMessage"]');
        await send.getByRole('tab', { name: 'curl', exact: true }).click();
        await send.locator('pre', { hasText: 'curl -X POST "$RELAYBOX_URL/api/v1/messages"' }).first().waitFor();
        await send.getByRole('tab', { name: 'TypeScript', exact: true }).click();
        await send.locator('pre', { hasText: "await client.POST('/api/v1/messages'" }).first().waitFor();
        assert.deepEqual(browser.external, [], 'nothing is loaded from outside our origin');
      });
    });

    test('the screenshots are in the output directory, and docs/images is untouched unless it is that directory', async () => {
      for (const file of docImageFiles) assert.ok(existsSync(join(docImages, file)), `${file} in ${docImages}`);
      if (docImages !== committedImages)
        assert.deepEqual(await fingerprints(committedImages), committedBefore, 'docs/images is as it was');
    });
  },
);

/** Each docs image's name and content hash, to see that a run left them alone. */
async function fingerprints(dir: string): Promise<string[]> {
  return Promise.all(
    docImageFiles.map(async (file) => {
      const bytes = await readFile(join(dir, file)).catch(() => Buffer.alloc(0));
      return `${file} ${createHash('sha256').update(bytes).digest('hex')}`;
    }),
  );
}

/** What a chart was last given, as the page exposes it on its figure. */
async function chartData(
  page: Page,
  id: string,
): Promise<{ x: string[]; lines: Record<string, Array<number | null>> }> {
  const raw = await page.locator(`#${id}`).getAttribute('data-chart');
  return raw ? JSON.parse(raw) : { x: [], lines: {} };
}

async function chartTotals(page: Page, id: string): Promise<Record<'accepted' | 'sent' | 'delivered', number>> {
  const data = await chartData(page, id);
  const sum = (k: string) => (data.lines[k] ?? []).reduce<number>((a, b) => a + (b ?? 0), 0);
  return { accepted: sum('accepted'), sent: sum('sent'), delivered: sum('delivered') };
}

/** A screenshot for docs/dashboard.md, at 1200x800 unless told (the charts fit themselves to the width first). */
async function docScreenshot(page: Page, file: string, size = { width: 1200, height: 800 }): Promise<void> {
  await mkdir(docImages, { recursive: true });
  await page.setViewportSize(size);
  try {
    await page.waitForTimeout(300);
    await page.screenshot({ path: join(docImages, file) });
  } finally {
    await page.setViewportSize({ width: 1280, height: 900 });
  }
}

async function progressOf(page: Page, jobId: string): Promise<number> {
  return page.locator(`progress[data-job="${jobId}"]`).evaluate((p) => (p as unknown as { value: number }).value);
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting until ${what}`);
}

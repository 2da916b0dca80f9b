import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import {
  chromiumPath,
  dashboardPages as pages,
  dashboardServiceEnv,
  launchBrowser,
  scenario,
} from '../support/browser.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { request } from '../support/test-app.ts';

/**
 * Every page of the dashboard and /docs in the real browser: axe-core finds no serious or critical violation,
 * Lighthouse (accessibility and best practices, desktop) scores 95 or more, no page logs a console error, and at
 * 390 px nothing scrolls sideways. One browser for all pages; Lighthouse audits through its DevTools port.
 */
const password = 'a long enough password';
const noBrowser =
  !existsSync(chromiumPath) && process.env.CI !== 'true'
    ? `${chromiumPath} is missing: apt-get install -y chromium`
    : false;
const axeSource: string = (createRequire(import.meta.url)('axe-core') as { source: string }).source;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

describe(
  'dashboard quality in Chromium: accessibility, best practices, console, phone width',
  {
    timeout: 900_000,
    skip: noBrowser,
  },
  () => {
    let dir: string;
    let service: ServiceProcess;
    let base: string;
    let browser: Awaited<ReturnType<typeof launchBrowser>>;
    let page: Page;
    let port: number;
    let messageId = '';
    const consoleErrors: string[] = [];
    const failedRequests: string[] = [];

    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'relaybox-dashboard-quality-'));
      service = await startServiceProcess('all', dashboardServiceEnv(join(dir, 'data')), 60_000);
      base = `http://127.0.0.1:${service.port}`;
      port = await freePort();
      browser = await launchBrowser({ debuggingPort: port });
      page = browser.page;
      page.on('console', (m) => {
        if (m.type() === 'error') consoleErrors.push(`${page.url()}: ${m.text()}`);
      });
      page.on('pageerror', (e) => consoleErrors.push(`${page.url()}: ${e.message}`));
      page.on('response', (r) => {
        if (r.status() >= 400) failedRequests.push(`${r.status()} ${r.request().method()} ${r.url()}`);
      });
    });

    after(async () => {
      await browser?.close();
      await service?.terminate();
      await rm(dir, { recursive: true, force: true });
    });

    /** Opens a page and waits for its heading; `:message` becomes this run's message. */
    async function open(hash: string, title: string): Promise<void> {
      await page.goto(`${base}/${hash.replace(':message', messageId)}`);
      await page.locator('main h1', { hasText: title }).first().waitFor();
      // Pages read their data after the heading shows; let them settle before judging.
      await page.waitForLoadState('networkidle');
    }

    async function axeProblems(): Promise<string[]> {
      // Evaluated over DevTools, so the page's script-src 'self' policy does not apply to the injection.
      await page.evaluate(axeSource);
      const result = await page.evaluate<{
        violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }>;
      }>('axe.run(document, { resultTypes: ["violations"] })');
      return result.violations
        .filter((v) => v.impact === 'serious' || v.impact === 'critical')
        .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
    }

    test('the sign-in page loads without a console error or a failed request (no refresh without a session), /favicon.ico is served', async () => {
      await scenario(page, 'quality-sign-in', async () => {
        await page.goto(`${base}/`);
        await page.getByRole('heading', { name: 'Sign in to Relaybox' }).waitFor();
        await page.waitForLoadState('networkidle');
        assert.deepEqual(failedRequests, [], 'no request failed');
        assert.deepEqual(consoleErrors, [], 'no console error');
        assert.deepEqual(await axeProblems(), [], 'axe: no serious or critical violation');
        const icon = await fetch(`${base}/favicon.ico`);
        assert.equal(icon.status, 200);
        assert.equal(icon.headers.get('content-type'), 'image/x-icon');
        assert.deepEqual([...new Uint8Array(await icon.arrayBuffer()).slice(0, 4)], [0, 0, 1, 0], 'an ICO file');
      });
    });

    test('/docs lists messages first, starts with "Getting started", has no border and loads nothing from elsewhere', async () => {
      await scenario(page, 'quality-docs', async () => {
        await page.goto(`${base}/docs`);
        await page.locator('h2', { hasText: 'Getting started' }).first().waitFor({ timeout: 60_000 });
        const described = (await (await fetch(`${base}/api/v1/openapi.json`)).json()) as {
          tags: Array<{ name: string }>;
        };
        assert.equal(described.tags[0]!.name, 'messages');
        assert.equal(await page.evaluate<string>('getComputedStyle(document.body).marginTop'), '0px');
        await page.waitForLoadState('networkidle');
        assert.deepEqual(browser.external, [], 'nothing from another origin');
        assert.deepEqual(consoleErrors, [], 'no console error');
      });
    });

    test('every signed-in page: axe finds no serious or critical violation and nothing is logged as an error', async () => {
      await scenario(page, 'quality-axe', async () => {
        await page.goto(`${base}/#/signup`);
        const email = `quality-${Date.now()}@example.com`;
        await page.getByLabel('Organization name').fill('Quality');
        await page.getByLabel('Email').fill(email);
        await page.getByLabel('Password').fill(password);
        await page.getByRole('button', { name: 'Sign up' }).click();
        await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
        const login = await request(base, 'POST', '/api/v1/auth/login', { body: { email, password } });
        const sent = await request(base, 'POST', '/api/v1/messages', {
          token: login.body.accessToken,
          body: { to: '+4915150000123', body: 'Checked by axe and Lighthouse' },
        });
        assert.equal(sent.status, 201, sent.text);
        messageId = sent.body.id;
        const problems: string[] = [];
        for (const dark of [false, true]) {
          await page.emulateMedia({ colorScheme: dark ? 'dark' : 'light' });
          for (const [hash, title] of pages) {
            await open(hash, title);
            for (const p of await axeProblems()) problems.push(`${hash}${dark ? ' (dark)' : ''}: ${p}`);
          }
        }
        await page.emulateMedia({ colorScheme: 'light' });
        assert.deepEqual(problems, []);
        assert.deepEqual(consoleErrors, [], 'no console error on any page');
      });
    });

    test('at 390 px no page scrolls sideways, and the messages list is one card a row', async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      await scenario(page, 'quality-phone', async () => {
        for (const [hash, title] of pages) {
          await open(hash, title);
          const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
          assert.ok(overflow <= 1, `${hash} overflows by ${overflow}px`);
        }
        await open('#/messages', 'Messages');
        const link = page.locator('#search-results tbody tr a').first();
        await link.waitFor();
        const cell = await link.evaluate((a) => a.closest('td')!.getBoundingClientRect().width);
        assert.ok(cell > 300, `the message id's cell spans the card (${cell}px)`);
      }).finally(() => page.setViewportSize({ width: 1280, height: 900 }));
    });

    test('Lighthouse scores accessibility and best practices 95 or more on every page', async () => {
      const { default: lighthouse } = await import('lighthouse');
      const { default: desktop } = await import('lighthouse/core/config/desktop-config.js');
      const low: string[] = [];
      for (const [hash, title] of [['', 'sign-in'], ...pages, ['/docs', 'docs']] as Array<[string, string]>) {
        const url = hash === '/docs' ? `${base}/docs` : `${base}/${hash.replace(':message', messageId)}`;
        const result = await lighthouse(
          url,
          {
            port,
            output: 'json',
            logLevel: 'error',
            onlyCategories: ['accessibility', 'best-practices'],
            // The session's cookies stay: the signed-in pages are audited signed in.
            disableStorageReset: true,
          },
          desktop,
        );
        const lhr = result!.lhr;
        for (const id of ['accessibility', 'best-practices']) {
          const score = Math.round((lhr.categories[id]!.score ?? 0) * 100);
          if (score < 95) {
            const failing = Object.values(lhr.audits)
              .filter((a) => a.score !== null && a.score < 1 && a.scoreDisplayMode === 'binary')
              .map((a) => a.id);
            low.push(`${title} ${id} ${score}: ${failing.join(', ')}`);
          }
        }
        console.log(
          `lighthouse ${title}: accessibility ${Math.round((lhr.categories.accessibility!.score ?? 0) * 100)}, best practices ${Math.round((lhr.categories['best-practices']!.score ?? 0) * 100)}`,
        );
      }
      assert.deepEqual(low, []);
    });
  },
);

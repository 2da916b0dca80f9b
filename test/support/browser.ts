import { existsSync } from 'node:fs';
import { mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const chromiumPath = '/usr/bin/chromium';
const screenshots = join(process.cwd(), '.tmp', 'screenshots');

/**
 * Debian's Chromium, headless, with a fresh profile; requests leaving 127.0.0.1 are refused and recorded (the dashboard
 * must work offline). `debuggingPort` also opens the DevTools port, for Lighthouse to audit pages in the same browser.
 */
export async function launchBrowser(opts: { debuggingPort?: number } = {}): Promise<{
  context: BrowserContext;
  page: Page;
  external: string[];
  close(): Promise<void>;
}> {
  if (!existsSync(chromiumPath))
    throw new Error(`${chromiumPath} is missing: apt-get install -y chromium (.ci/run does this)`);
  const profile = await mkdtemp(join(tmpdir(), 'relaybox-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      ...(opts.debuggingPort ? [`--remote-debugging-port=${opts.debuggingPort}`] : []),
    ],
    viewport: { width: 1280, height: 900 },
  });
  const external: string[] = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (
      url.hostname === '127.0.0.1' ||
      url.hostname === 'localhost' ||
      url.protocol === 'blob:' ||
      url.protocol === 'data:'
    )
      return route.continue();
    external.push(url.href);
    return route.abort();
  });
  const page = context.pages()[0] ?? (await context.newPage());
  return { context, page, external, close: () => context.close() };
}

/** Runs one scenario; on failure saves a screenshot under .tmp/screenshots/ named after it, then fails. */
export async function scenario(page: Page, name: string, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (err) {
    await mkdir(screenshots, { recursive: true });
    await page
      .screenshot({ path: join(screenshots, `${name.replace(/[^a-z0-9]+/gi, '-')}.png`), fullPage: true })
      .catch(() => undefined);
    throw err;
  }
}

/**
 * The service as `npm start` runs it (embedded store, one process) for the dashboard's browser tests. The scenarios
 * click through pages faster than a person, so the per-organization and sign-in request budgets are raised (their own
 * tests cover them).
 */
export function dashboardServiceEnv(dataDir: string): Record<string, string> {
  return {
    REDIS_URL: '',
    MONGODB_URL: '',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    RATE_LIMIT_PER_MINUTE: '6000',
    RATE_LIMIT_BURST: '1000',
    AUTH_RATE_LIMIT_PER_MINUTE: '600',
    AUTH_RATE_LIMIT_BURST: '100',
    // The walk-through's sends go out at any hour, without spacing: quiet hours and jitter are the pacing suite's.
    PACING_QUIET_HOURS: 'off',
    PACING_JITTER_MS: '0',
  };
}

/** The signed-in pages, by address and the heading each shows; `:message` is a message of this run. */
export const dashboardPages: Array<[string, string]> = [
  ['#/overview', 'Overview'],
  ['#/send', 'Send a message'],
  ['#/messages', 'Messages'],
  ['#/messages/:message', 'Message'],
  ['#/conversations', 'Conversations'],
  ['#/bulk', 'Bulk send'],
  ['#/jobs', 'Bulk jobs'],
  ['#/relays', 'Relays'],
  ['#/automations', 'Automations'],
  ['#/webhooks', 'Webhooks'],
  ['#/members', 'Members and teams'],
  ['#/api-keys', 'API keys'],
  ['#/request-log', 'Request log'],
  ['#/opt-outs', 'Opt-outs'],
  ['#/settings', 'Settings'],
  ['#/no-such-page', 'Page not found'],
];

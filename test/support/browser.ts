import { existsSync } from 'node:fs';
import { mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const chromiumPath = '/usr/bin/chromium';
const screenshots = join(process.cwd(), '.tmp', 'screenshots');

/** Debian's Chromium, headless, with a fresh profile; requests leaving 127.0.0.1 are refused and recorded (the dashboard must work offline). */
export async function launchBrowser(): Promise<{
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

import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import type { ContentEncoding } from '../http/compression.ts';
import { faviconIco } from './favicon.ts';

const brotli = promisify(zlib.brotliCompress);
const gzip = promisify(zlib.gzip);
const webDir = join(dirname(fileURLToPath(import.meta.url)), '../../web');

/** One file the dashboard serves, with its compressed forms made once. */
export interface Asset {
  /** The URL path, with a content hash for everything but the pages. */
  path: string;
  type: string;
  body: Buffer;
  encoded: Partial<Record<ContentEncoding, Promise<Buffer>>>;
}

export interface DashboardAssets {
  app: { script: Asset; style: Asset };
  redoc: Asset;
  /** The mark, as the pages' icon. */
  icon: Asset;
  /** /favicon.ico: the mark as an ICO bitmap. */
  favicon: Buffer;
  byPath: Map<string, Asset>;
}

/** Redoc's sidebar loads its maker's logo from a CDN, which the page's policy refuses: the reference shows no logo there. */
const redocCdnLogo = 'https://cdn.redoc.ly/redoc/logo-mini.svg';
const noImage = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='0' height='0'/%3E";

function asset(name: string, ext: string, type: string, body: Buffer): Asset {
  const hash = createHash('sha256').update(body).digest('hex').slice(0, 12);
  return { path: `/assets/${name}.${hash}.${ext}`, type, body, encoded: {} };
}

/** The compressed body, made on first use and kept: brotli at full quality for the app, a faster level for the large renderer. */
export function encodedBody(a: Asset, encoding: ContentEncoding): Promise<Buffer> {
  const large = a.body.length > 256 * 1024;
  a.encoded[encoding] ??=
    encoding === 'br'
      ? brotli(a.body, {
          params: {
            [zlib.constants.BROTLI_PARAM_QUALITY]: large ? 6 : 11,
            [zlib.constants.BROTLI_PARAM_SIZE_HINT]: a.body.length,
          },
        })
      : gzip(a.body, { level: 9 });
  return a.encoded[encoding]!;
}

/**
 * Builds the dashboard from web/ with esbuild, in memory, at start (a few
 * hundred milliseconds; nothing is written or committed), and loads the API
 * reference renderer (Redoc's standalone bundle) from node_modules.
 */
export async function buildDashboardAssets(): Promise<DashboardAssets> {
  const result = await build({
    entryPoints: { app: join(webDir, 'main.ts') },
    bundle: true,
    minify: true,
    format: 'esm',
    target: ['chrome110', 'firefox110', 'safari16'],
    write: false,
    outdir: '/out',
    legalComments: 'none',
    logLevel: 'silent',
    loader: { '.css': 'css' },
  });
  const js = result.outputFiles.find((f) => f.path.endsWith('.js'));
  const css = result.outputFiles.find((f) => f.path.endsWith('.css'));
  if (!js || !css) throw new Error('the dashboard build produced no script or no stylesheet');
  const script = asset('app', 'js', 'text/javascript; charset=utf-8', Buffer.from(js.contents));
  const style = asset('app', 'css', 'text/css; charset=utf-8', Buffer.from(css.contents));
  const require = createRequire(import.meta.url);
  const redocFile = join(dirname(require.resolve('redoc')), 'redoc.standalone.js');
  const redocText = await readFile(redocFile, 'utf8');
  if (!redocText.includes(redocCdnLogo)) throw new Error(`the API reference renderer no longer names ${redocCdnLogo}`);
  const redoc = asset(
    'redoc.standalone',
    'js',
    'text/javascript; charset=utf-8',
    Buffer.from(redocText.replaceAll(redocCdnLogo, noImage)),
  );
  const icon = asset('logo', 'svg', 'image/svg+xml', await readFile(join(webDir, 'logo.svg')));
  const byPath = new Map([script, style, redoc, icon].map((a) => [a.path, a]));
  return { app: { script, style }, redoc, icon, favicon: faviconIco(), byPath };
}

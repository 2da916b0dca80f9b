import { createHash } from 'node:crypto';
import { AppError } from '../errors.ts';
import { negotiateEncoding } from '../http/compression.ts';
import type { RequestContext, RouteDef } from '../http/route.ts';
import { encodedBody, type DashboardAssets } from './assets.ts';

/** Scripts only from this origin, never inline; Redoc's styles are injected at run time, so /docs allows inline styles (never scripts). */
const appPolicy =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
const docsPolicy =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export function securityHeaders(policy: string): Record<string, string> {
  return {
    'content-security-policy': policy,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
    'cross-origin-opener-policy': 'same-origin',
  };
}

const page = (title: string, head: string, body: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
${head}
</head>
<body>
${body}
</body>
</html>
`;

/** The dashboard (/), the API reference (/docs) and their assets: pages revalidate, hashed assets are cached for a year. */
export function dashboardRoutes(assets: DashboardAssets): RouteDef[] {
  const icon = `<link rel="icon" href="${assets.icon.path}" type="image/svg+xml">`;
  const appPage = pageAnswer(
    page(
      'Relaybox',
      `${icon}\n<meta name="description" content="The Relaybox dashboard: messages, relays, webhooks and settings">\n<link rel="stylesheet" href="${assets.app.style.path}">\n<script type="module" src="${assets.app.script.path}"></script>`,
      '<div id="app"><noscript>The Relaybox dashboard needs JavaScript. The API reference is at <a href="/docs">/docs</a>.</noscript></div>',
    ),
    appPolicy,
  );
  const docsPage = pageAnswer(
    page(
      'Relaybox API reference',
      `${icon}\n<meta name="description" content="The Relaybox messaging API: every operation, with curl and TypeScript samples">\n<style>body { margin: 0; }</style>`,
      `<redoc spec-url="/api/v1/openapi.json?codeSamples=true" hide-download-button="false"></redoc>\n<script src="${assets.redoc.path}"></script>`,
    ),
    docsPolicy,
  );
  const common = {
    auth: false as const,
    tags: ['dashboard'],
    schema: { response: { 200: { description: 'a page or an asset' } } },
  };
  return [
    { ...common, method: 'GET', path: '/', summary: 'The dashboard', handler: appPage },
    {
      ...common,
      method: 'GET',
      path: '/docs',
      summary: 'The API reference with code samples, rendered from /api/v1/openapi.json?codeSamples=true',
      handler: docsPage,
    },
    {
      ...common,
      method: 'GET',
      path: '/favicon.ico',
      summary: "The service's icon",
      handler: () => ({
        status: 200,
        body: assets.favicon,
        headers: { 'content-type': 'image/x-icon', 'cache-control': 'public, max-age=86400' },
      }),
    },
    {
      ...common,
      method: 'GET',
      path: '/assets/*',
      summary: 'Dashboard scripts, styles and icon',
      async handler(ctx) {
        const a = assets.byPath.get(ctx.path);
        if (!a) throw new AppError('not_found', `no asset ${ctx.path}`);
        const headers: Record<string, string> = {
          'content-type': a.type,
          'cache-control': 'public, max-age=31536000, immutable',
          ...securityHeaders(appPolicy),
        };
        const encoding = negotiateEncoding(ctx.headers['accept-encoding']);
        if (!encoding) return { status: 200, body: a.body, headers };
        headers['content-encoding'] = encoding;
        return { status: 200, body: await encodedBody(a, encoding), headers };
      },
    },
  ];
}

function pageAnswer(html: string, policy: string) {
  const etag = `"${createHash('sha256').update(html).digest('base64url').slice(0, 22)}"`;
  return (ctx: RequestContext) => {
    const headers = {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-cache',
      etag,
      ...securityHeaders(policy),
    };
    if (ctx.headers['if-none-match'] === etag) return { status: 304, headers };
    return { status: 200, body: html, headers };
  };
}

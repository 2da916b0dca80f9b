import { Type } from '@sinclair/typebox';
import { AppError, errorCodes, problemMediaType, problemTypeOf, type ErrorCode } from '../errors.ts';
import { defineRoute, type RouteDef } from './route.ts';

const htmlHeaders = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'public, max-age=3600',
  'content-security-policy': "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
};

const escape = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
/** The registry's texts mark names as `code`. */
const prose = (text: string) => escape(text).replace(/`([^`]+)`/g, '<code>$1</code>');

function section(code: ErrorCode): string {
  const { status, title, means, retryable } = errorCodes[code];
  return `<section id="${code}">
<h2>${escape(title)}</h2>
<p><code>${code}</code>, HTTP ${status}${retryable ? ', worth retrying (after Retry-After when the answer has it)' : ', not worth retrying unchanged'}.</p>
<p>${prose(means[0]!.toUpperCase() + means.slice(1))}.</p>
<p>Problem type: <code>${problemTypeOf(code)}</code></p>
</section>`;
}

const page = (title: string, body: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escape(title)}</title>
</head>
<body>
<h1>${escape(title)}</h1>
<p>Every error of the Relaybox API is answered as RFC 9457 problem details (<code>${problemMediaType}</code>): <code>type</code> names one of the codes below, <code>title</code>, <code>status</code>, <code>detail</code> and <code>instance</code> (the request id, as X-Request-Id carries it); <code>error</code>, <code>message</code>, <code>statusCode</code> and <code>details</code> are kept beside them.</p>
${body}
</body>
</html>
`;

/**
 * The pages the problem types resolve to (`type` is `/errors/{code}`), made
 * from the error registry: one per code, and `/errors` with every code.
 */
export function errorPageRoutes(): RouteDef[] {
  const all = page('Relaybox API errors', (Object.keys(errorCodes) as ErrorCode[]).map(section).join('\n'));
  const answer = { 200: { description: 'an HTML page', content: { 'text/html': Type.String() } } };
  return [
    defineRoute({
      method: 'GET',
      path: '/errors',
      summary: 'Every error code of the API',
      auth: false,
      schema: { response: answer },
      handler: (_ctx) => ({ status: 200, body: all, headers: htmlHeaders }),
    }),
    defineRoute({
      method: 'GET',
      path: '/errors/:code',
      summary: 'One error code of the API: the page its problem type names',
      auth: false,
      schema: { params: Type.Object({ code: Type.String({ minLength: 1, maxLength: 64 }) }), response: answer },
      handler(ctx) {
        const code = ctx.params.code;
        if (!Object.hasOwn(errorCodes, code)) throw new AppError('not_found', `no error code ${code}`);
        return {
          status: 200,
          body: page(`Relaybox API error: ${code}`, section(code as ErrorCode)),
          headers: htmlHeaders,
        };
      },
    }),
  ];
}

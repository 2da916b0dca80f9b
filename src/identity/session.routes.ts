import { Type } from '@sinclair/typebox';
import { AppError } from '../errors.ts';
import { defineRoute, noContent, type RequestContext, type RouteDef } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import type { IdentityService } from './identity-service.ts';

/** The dashboard's sessions: the refresh token lives in this cookie, sent only to the session routes, never readable by page script. */
export const sessionCookie = { name: 'relaybox_refresh', path: '/api/v1/auth/session' } as const;
/** Every session request carries this header: a cross-site form or image cannot, and a cross-site fetch with it needs a CORS preflight this service never grants. */
export const sessionRequestHeader = { name: 'x-relaybox-session', value: '1' } as const;

const email = Type.String({ format: 'email', maxLength: 254 });
const password = Type.String({ minLength: 10, maxLength: 256 });
const name = Type.String({ minLength: 1, maxLength: 200 });
const accessGrant = Type.Object({
  accessToken: Type.String(),
  expiresIn: Type.Integer({ description: 'seconds until the access token expires; refresh before then' }),
  tokenType: Type.Literal('Bearer'),
});
const cookieSet = {
  'set-cookie': {
    description: `${sessionCookie.name}: the refresh token, HttpOnly, SameSite=Strict, Secure except on localhost`,
  },
};
const granted = (description: string) => ({
  description,
  content: { 'application/json': accessGrant },
  headers: cookieSet,
});

type Tokens = { accessToken: string; refreshToken: string; expiresIn: number };

/**
 * Cookie sessions for the dashboard (same origin only). Sign-in, sign-up and
 * refresh answer the access token in the body and the refresh token in an
 * HttpOnly cookie; refresh and sign-out read the cookie. Requests from another
 * site are refused (custom header, Origin and Sec-Fetch-Site checked) on top
 * of SameSite=Strict.
 */
export function sessionRoutes(identity: IdentityService, refreshTtlMs: number): RouteDef[] {
  const grant = (ctx: RequestContext, tokens: Tokens) => ({
    body: { accessToken: tokens.accessToken, expiresIn: tokens.expiresIn, tokenType: 'Bearer' as const },
    headers: {
      'set-cookie': cookie(ctx, tokens.refreshToken, Math.floor(refreshTtlMs / 1000)),
      'cache-control': 'no-store',
    },
  });
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/auth/session',
      summary: 'Dashboard sign-in: the access token in the body, the refresh token in an HttpOnly cookie',
      tags: ['auth'],
      auth: false,
      operationId: 'startSession',
      limitPerAddress: true,
      errors: ['unauthorized', 'forbidden'],
      schema: {
        body: strictObject({ email: Type.String({ maxLength: 254 }), password: Type.String({ maxLength: 256 }) }),
        response: { 200: granted('signed in') },
      },
      async handler(ctx) {
        sameOrigin(ctx);
        return { status: 200, ...grant(ctx, await identity.login(ctx.body, ctx.ip)) };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/auth/session/signup',
      summary: 'Dashboard sign-up: creates the organization, then answers as sign-in does',
      tags: ['auth'],
      auth: false,
      operationId: 'startSessionWithSignUp',
      limitPerAddress: true,
      errors: ['forbidden'],
      schema: {
        body: strictObject({ organizationName: name, email, password }),
        response: { 201: granted('signed up and in') },
      },
      async handler(ctx) {
        sameOrigin(ctx);
        return { status: 201, ...grant(ctx, await identity.signup(ctx.body)) };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/auth/session/refresh',
      summary: "Rotate the session cookie's refresh token and answer a fresh access token",
      tags: ['auth'],
      auth: false,
      operationId: 'refreshSessionCookie',
      limitPerAddress: true,
      errors: ['unauthorized', 'forbidden'],
      schema: { body: strictObject({}), response: { 200: granted('refreshed') } },
      async handler(ctx) {
        sameOrigin(ctx);
        const raw = cookieValue(ctx.headers.cookie, sessionCookie.name);
        if (!raw) throw new AppError('unauthorized', 'no session');
        return { status: 200, ...grant(ctx, await identity.refresh(raw)) };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/auth/session/logout',
      summary: "Sign out: ends the cookie's session and clears the cookie",
      tags: ['auth'],
      auth: false,
      operationId: 'endSession',
      errors: ['forbidden'],
      schema: { body: strictObject({}), response: { 204: { ...noContent, headers: cookieSet } } },
      async handler(ctx) {
        sameOrigin(ctx);
        const raw = cookieValue(ctx.headers.cookie, sessionCookie.name);
        if (raw) await identity.endSession(raw);
        return { status: 204, headers: { 'set-cookie': cookie(ctx, '', 0), 'cache-control': 'no-store' } };
      },
    }),
  ];
}

function sameOrigin(ctx: RequestContext): void {
  const h = ctx.headers;
  const fetchSite = h['sec-fetch-site'];
  const originHost = h.origin ? hostOf(h.origin) : undefined;
  if (
    h[sessionRequestHeader.name] !== sessionRequestHeader.value ||
    (fetchSite !== undefined && fetchSite !== 'same-origin') ||
    (h.origin !== undefined && originHost !== h.host)
  ) {
    throw new AppError(
      'forbidden',
      `session requests come from the dashboard's own origin with ${sessionRequestHeader.name}: ${sessionRequestHeader.value}`,
    );
  }
}

function hostOf(url: string): string | undefined {
  try {
    return new URL(url).host;
  } catch {
    return undefined;
  }
}

const localHosts = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Secure everywhere but a loopback host, where the dashboard is served over plain http during development. */
function cookie(ctx: RequestContext, value: string, maxAgeSeconds: number): string {
  const hostname = (ctx.headers.host ?? '').replace(/:\d+$/, '');
  const secure = localHosts.has(hostname) ? '' : '; Secure';
  return `${sessionCookie.name}=${value}; Path=${sessionCookie.path}; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${secure}`;
}

export function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim() || undefined;
  }
  return undefined;
}

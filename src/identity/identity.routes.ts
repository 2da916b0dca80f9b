import { Type } from '@sinclair/typebox';
import { defineRoute, named, noContent, type RouteDef } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import type { IdentityService } from './identity-service.ts';
import { roles } from '../roles.ts';

const email = Type.String({ format: 'email', maxLength: 254 });
const password = Type.String({ minLength: 10, maxLength: 256 });
const role = Type.Union(roles.map((r) => Type.Literal(r)));
const name = Type.String({ minLength: 1, maxLength: 200 });
const idParams = strictObject({ id: Type.String({ minLength: 1, maxLength: 64 }) });
const refreshBody = strictObject({ refreshToken: Type.String({ minLength: 1, maxLength: 512 }) });

const tokens = named(
  'Session',
  Type.Object({
    accessToken: Type.String(),
    refreshToken: Type.String(),
    expiresIn: Type.Integer({ description: 'seconds until the access token expires' }),
    tokenType: Type.Literal('Bearer'),
  }),
);
const user = named(
  'User',
  Type.Object({ id: Type.String(), email: Type.String(), role, createdAt: Type.String(), updatedAt: Type.String() }),
);
const team = named(
  'Team',
  Type.Object({ id: Type.String(), name: Type.String(), createdAt: Type.String(), updatedAt: Type.String() }),
);
const me = Type.Object({
  user: Type.Union([user, Type.Null()], { description: 'null when the caller is an API key' }),
  apiKeyId: Type.Union([Type.String(), Type.Null()], { description: 'the API key used, when the caller is one' }),
  organization: Type.Union([
    Type.Object({ id: Type.String(), name: Type.String(), defaultTeamId: Type.String() }),
    Type.Null(),
  ]),
  role,
  livemode: Type.Boolean({ description: 'false when the caller works on the test data of its organization' }),
  teams: Type.Array(team),
});
const keyMode = Type.Union([Type.Literal('live'), Type.Literal('test')], {
  description:
    "live (rb_live_...) reaches the organization's data; test (rb_test_...) only its test data, sent through the built-in simulated relay (docs/test-mode.md)",
});
const apiKey = named(
  'ApiKey',
  Type.Object(
    {
      id: Type.String(),
      name: Type.String(),
      role,
      mode: keyMode,
      prefix: Type.String(),
      createdAt: Type.String(),
    },
    {
      examples: [
        {
          id: 'key_7Hn2c0Qd9sLxWm4ePa1bZg',
          name: 'staging',
          role: 'member',
          mode: 'test',
          prefix: 'rb_test_Qx7WnA',
          createdAt: '2030-01-01T09:00:00.000Z',
        },
      ],
    },
  ),
);

/** Sign-up, sessions, API keys, members and teams (decisions.md, "Identity, tenancy, roles"). */
export function identityRoutes(identity: IdentityService): RouteDef[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/api/v1/auth/signup',
      summary: 'Create an organization with its owner and default team',
      tags: ['auth'],
      auth: false,
      limitPerAddress: true,
      operationId: 'signUp',
      schema: {
        body: strictObject({ organizationName: name, email, password }),
        response: {
          201: Type.Object({
            user,
            organization: Type.Object({ id: Type.String(), name: Type.String() }),
            team,
            ...tokens.properties,
          }),
        },
      },
      handler: async (ctx) => ({ status: 201, body: await identity.signup(ctx.body) }),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/auth/login',
      summary: 'Log in; 401 on any mismatch, 429 after 5 failures a minute',
      tags: ['auth'],
      auth: false,
      limitPerAddress: true,
      operationId: 'logIn',
      errors: ['unauthorized'],
      schema: {
        body: strictObject({ email: Type.String({ maxLength: 254 }), password: Type.String({ maxLength: 256 }) }),
        response: { 200: tokens },
      },
      handler: async (ctx) => ({ status: 200, body: await identity.login(ctx.body, ctx.ip) }),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/auth/refresh',
      summary: 'Rotate a refresh token; reuse of a used one ends the session',
      tags: ['auth'],
      auth: false,
      limitPerAddress: true,
      operationId: 'refreshSession',
      errors: ['unauthorized'],
      schema: { body: refreshBody, response: { 200: tokens } },
      handler: async (ctx) => ({ status: 200, body: await identity.refresh(ctx.body.refreshToken) }),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/auth/logout',
      summary: 'End the session of a refresh token',
      tags: ['auth'],
      minRole: 'viewer',
      operationId: 'logOut',
      schema: { body: refreshBody, response: { 204: noContent } },
      handler: async (ctx) => {
        await identity.logout(ctx.body.refreshToken, ctx.principal);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/me',
      summary: 'The caller: user, organization, role and teams',
      tags: ['auth'],
      operationId: 'getCaller',
      schema: { response: { 200: me } },
      handler: async (ctx) => ({ status: 200, body: await identity.me(ctx.principal) }),
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/api-keys',
      summary: 'Create an API key; the raw key is in this answer only',
      tags: ['api-keys'],
      minRole: 'admin',
      operationId: 'createApiKey',
      schema: {
        body: strictObject(
          { name, role: Type.Optional(role), mode: Type.Optional(keyMode) },
          { examples: [{ name: 'staging', role: 'member', mode: 'test' }] },
        ),
        response: { 201: Type.Object({ ...apiKey.properties, key: Type.String() }) },
      },
      handler: async (ctx) => ({ status: 201, body: await identity.apiKeys.create(ctx.principal, ctx.body) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/api-keys',
      summary: 'List API keys (never the raw value or its hash)',
      tags: ['api-keys'],
      minRole: 'admin',
      operationId: 'listApiKeys',
      schema: { response: { 200: Type.Object({ data: Type.Array(apiKey) }) } },
      handler: async (ctx) => ({ status: 200, body: { data: await identity.apiKeys.list(ctx.principal) } }),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/api/v1/api-keys/:id',
      summary: 'Revoke an API key',
      tags: ['api-keys'],
      minRole: 'admin',
      operationId: 'revokeApiKey',
      schema: { params: idParams, response: { 204: noContent } },
      handler: async (ctx) => {
        await identity.apiKeys.revoke(ctx.principal, ctx.params.id);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/members',
      summary: 'Add a member to the organization',
      tags: ['members'],
      minRole: 'admin',
      operationId: 'addMember',
      schema: { body: strictObject({ email, password, role }), response: { 201: user } },
      handler: async (ctx) => ({ status: 201, body: await identity.createMember(ctx.principal, ctx.body) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/members',
      summary: 'List the members of the organization',
      tags: ['members'],
      operationId: 'listMembers',
      schema: { response: { 200: Type.Object({ data: Type.Array(user) }) } },
      handler: async (ctx) => ({ status: 200, body: { data: await identity.listMembers(ctx.principal) } }),
    }),
    defineRoute({
      method: 'PATCH',
      path: '/api/v1/members/:id',
      summary: "Change a member's role; it applies to the member's next request",
      tags: ['members'],
      minRole: 'admin',
      operationId: 'changeMemberRole',
      schema: { params: idParams, body: strictObject({ role }), response: { 200: user } },
      handler: async (ctx) => ({
        status: 200,
        body: await identity.changeMemberRole(ctx.principal, ctx.params.id, ctx.body.role),
      }),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/api/v1/members/:id',
      summary: 'Remove a member; its sessions and tokens end at once',
      tags: ['members'],
      minRole: 'admin',
      operationId: 'removeMember',
      errors: ['conflict'],
      schema: { params: idParams, response: { 204: noContent } },
      handler: async (ctx) => {
        await identity.removeMember(ctx.principal, ctx.params.id);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/v1/teams',
      summary: 'Create a team',
      tags: ['teams'],
      minRole: 'admin',
      operationId: 'createTeam',
      schema: { body: strictObject({ name }), response: { 201: team } },
      handler: async (ctx) => ({ status: 201, body: await identity.createTeam(ctx.principal, ctx.body) }),
    }),
    defineRoute({
      method: 'GET',
      path: '/api/v1/teams',
      summary: 'List the teams of the organization',
      tags: ['teams'],
      operationId: 'listTeams',
      schema: { response: { 200: Type.Object({ data: Type.Array(team) }) } },
      handler: async (ctx) => ({ status: 200, body: { data: await identity.listTeams(ctx.principal) } }),
    }),
  ];
}

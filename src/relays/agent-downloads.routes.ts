import { Type } from '@sinclair/typebox';
import { AppError } from '../errors.ts';
import { defineRoute, named, type RequestContext, type RouteDef } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import type { AgentPackage, AgentPackages } from './agent-package.ts';

const agentDownload = named(
  'RelayAgentDownload',
  Type.Object({
    name: Type.Literal('relaybox-relay'),
    version: Type.String(),
    /** The tarball: `npm install URL` or `npx -y URL connect …` installs the agent from it. */
    url: Type.String(),
    /** Hex SHA-256 of the tarball, also at `url` + `.sha256`. */
    sha256: Type.String(),
    size: Type.Integer(),
  }),
);

const notModified = { description: 'the copy the client holds (If-None-Match) is current' };

/** A year: a versioned file never changes (a new agent is a new version, so a new name). */
const immutable = 'public, max-age=31536000, immutable';

/**
 * The relay agent for a Mac, from this server: the npm package tarball (the
 * file named with its version), its SHA-256, and an index naming the current
 * one. Public: the agent is no secret, and the registration token a relay
 * needs comes from the dashboard.
 */
export function agentDownloadRoutes(
  packages: AgentPackages,
  publicBaseUrl: (host: string | undefined) => string,
): RouteDef[] {
  // Not charged to the address's budget (the sign-in one): after the one build per process, an answer is a buffer in memory, like /assets.
  const common = { auth: false as const, tags: ['downloads'] };
  const served = async (ctx: RequestContext): Promise<AgentPackage> => {
    if (packages.version === undefined) throw new AppError('not_found', 'this server does not serve the relay agent');
    try {
      return await packages.package();
    } catch (err) {
      // The reason (paths, npm's output) is the operator's, in the log; the client learns only to come back.
      ctx.log.error({ err }, 'the relay agent package cannot be built');
      throw new AppError('service_unavailable', 'the relay agent package cannot be built now', {
        retryAfterSeconds: 60,
      });
    }
  };
  return [
    defineRoute({
      ...common,
      method: 'GET',
      path: '/downloads/relaybox-relay.json',
      summary: "The relay agent this server hands out: its version, its tarball's URL and SHA-256",
      operationId: 'getRelayAgentDownload',
      errors: ['not_found', 'service_unavailable'],
      schema: { response: { 200: agentDownload, 304: notModified } },
      async handler(ctx) {
        const pkg = await served(ctx);
        // Revalidated: after an upgrade of the server it names the new version.
        const headers = { 'cache-control': 'no-cache', etag: `"${pkg.sha256}"` };
        if (ctx.headers['if-none-match'] === headers.etag) return { status: 304, headers };
        return {
          status: 200,
          headers,
          body: {
            name: 'relaybox-relay' as const,
            version: pkg.version,
            url: `${publicBaseUrl(ctx.headers.host)}/downloads/${pkg.fileName}`,
            sha256: pkg.sha256,
            size: pkg.tarball.length,
          },
        };
      },
    }),
    defineRoute({
      ...common,
      method: 'GET',
      path: '/downloads/:file',
      summary:
        'The relay agent package, relaybox-relay-<version>.tgz (for npm install or npx), or its SHA-256 (<file>.sha256, as sha256sum prints it)',
      operationId: 'getRelayAgentFile',
      errors: ['not_found', 'service_unavailable'],
      schema: {
        params: strictObject({ file: Type.String({ minLength: 1, maxLength: 200 }) }),
        response: {
          200: {
            description: 'the tarball, or its SHA-256',
            content: { 'application/gzip': Type.String({ format: 'binary' }), 'text/plain': Type.String() },
            headers: { etag: { description: "the tarball's SHA-256", required: true } },
          },
          304: notModified,
        },
      },
      async handler(ctx) {
        // The name is compared with the one file served, never joined to a path: nothing else is reachable.
        const file = ctx.params.file;
        const fileName = packages.fileName;
        const checksum = file === `${fileName}.sha256`;
        if (fileName === undefined || (file !== fileName && !checksum))
          throw new AppError(
            'not_found',
            `no download ${JSON.stringify(file)}; the current one is named in /downloads/relaybox-relay.json`,
          );
        const pkg = await served(ctx);
        const headers = { 'cache-control': immutable, etag: `"${pkg.sha256}"` };
        if (ctx.headers['if-none-match'] === headers.etag) return { status: 304, headers };
        if (checksum)
          return {
            status: 200,
            headers: { ...headers, 'content-type': 'text/plain; charset=utf-8' },
            body: `${pkg.sha256}  ${pkg.fileName}\n`,
          };
        return {
          status: 200,
          headers: {
            ...headers,
            'content-type': 'application/gzip',
            'content-disposition': `attachment; filename="${pkg.fileName}"`,
          },
          body: pkg.tarball,
        };
      },
    }),
  ];
}

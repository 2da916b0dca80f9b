import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { AppError } from '../../src/errors.ts';
import type { RequestContext } from '../../src/http/route.ts';
import { agentDownloadRoutes } from '../../src/relays/agent-downloads.routes.ts';
import { AgentPackages } from '../../src/relays/agent-package.ts';

const dir = await mkdtemp(join(tmpdir(), 'relaybox-agent-downloads-'));
after(() => rm(dir, { recursive: true, force: true }));

/** What a handler reads of a request here, and a log that keeps what it is given. */
function request(path: string, file?: string) {
  const logged: unknown[] = [];
  const ctx = {
    path,
    params: file === undefined ? {} : { file },
    headers: { host: 'relaybox.example.com' },
    log: { error: (...args: unknown[]) => logged.push(args) },
  } as unknown as RequestContext;
  return { ctx, logged };
}

async function answer(packages: AgentPackages, path: string, file?: string) {
  const routes = agentDownloadRoutes(packages, (host) => `https://${host}`);
  const route = routes.find((r) => r.path === (file === undefined ? path : '/downloads/:file'))!;
  const { ctx, logged } = request(path, file);
  try {
    return { reply: await route.handler(ctx), logged };
  } catch (err) {
    return { error: err as AppError, logged };
  }
}

test('a server without the agent sources answers 404 on every download', async () => {
  const packages = new AgentPackages(join(dir, 'build-none'), {
    agentDir: join(dir, 'absent'),
    protocolDir: join(dir, 'absent'),
  });
  assert.equal(packages.version, undefined);
  for (const [path, file] of [
    ['/downloads/relaybox-relay.json', undefined],
    ['/downloads/relaybox-relay-0.2.0.tgz', 'relaybox-relay-0.2.0.tgz'],
  ] as const) {
    const { error } = await answer(packages, path, file);
    assert.ok(error instanceof AppError, path);
    assert.equal(error.code, 'not_found', path);
  }
});

test('a package that cannot be built is a 503 to come back to; the reason goes to the log, not to the client', async () => {
  const agentDir = join(dir, 'broken');
  await mkdir(join(agentDir, 'src'), { recursive: true });
  await mkdir(join(agentDir, 'bin'));
  await writeFile(join(agentDir, 'package.json'), JSON.stringify({ name: 'relaybox-relay', version: '9.9.9' }));
  await writeFile(join(agentDir, 'src/cli.ts'), 'import "./missing.ts";\n');
  const packages = new AgentPackages(join(dir, 'build-broken'), { agentDir, protocolDir: agentDir });
  assert.equal(packages.version, '9.9.9');
  for (const [path, file] of [
    ['/downloads/relaybox-relay.json', undefined],
    ['/downloads/relaybox-relay-9.9.9.tgz', 'relaybox-relay-9.9.9.tgz'],
  ] as const) {
    const { error, logged } = await answer(packages, path, file);
    assert.ok(error instanceof AppError, path);
    assert.equal(error.code, 'service_unavailable', path);
    assert.equal(error.message, 'the relay agent package cannot be built now');
    assert.equal(logged.length, 1, 'the build failure is logged');
  }
  // Another version's name is a 404 without a build.
  const { error } = await answer(packages, '/downloads/relaybox-relay-1.0.0.tgz', 'relaybox-relay-1.0.0.tgz');
  assert.equal(error?.code, 'not_found');
});

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { errorCodes } from '../../src/errors.ts';
import { agentVersion } from '../../packages/relay-agent/src/agent-config.ts';
import { retryableServerErrors } from '../../packages/relay-agent/src/server-errors.ts';

const root = join(import.meta.dirname, '../..');
const agentDir = join(root, 'packages/relay-agent');
const protocolDir = join(root, 'src/relay-protocol');

const readJson = (path: string) =>
  JSON.parse(readFileSync(path, 'utf8')) as {
    name: string;
    version: string;
    files?: string[];
    bin?: Record<string, string>;
    dependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
    workspaces?: string[];
  };

/** Every module a folder's TypeScript files import, by specifier. */
function importsOf(dir: string): string[] {
  const specifiers = new Set<string>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
    for (const match of readFileSync(join(dir, file), 'utf8').matchAll(
      /^(?:import|export)[^'"]*?from '([^']+)'|^import '([^']+)'/gm,
    )) {
      specifiers.add((match[1] ?? match[2])!);
    }
  }
  return [...specifiers];
}

/** 'pino-pretty' → 'pino-pretty', '@scope/pkg/x' → '@scope/pkg', 'relaybox-relay-protocol/frames.ts' → 'relaybox-relay-protocol'. */
const packageOf = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');

test('the relay agent package depends on exactly what it imports from the registry, and on nothing of the server', () => {
  const manifest = readJson(join(agentDir, 'package.json'));
  assert.equal(manifest.name, 'relaybox-relay');
  assert.deepEqual(manifest.bin, { 'relaybox-relay': 'bin/relaybox-relay.js' });
  assert.deepEqual(manifest.files, ['bin', 'dist'], 'the package ships the script and the compiled agent, not src/');
  // The relay protocol is compiled into the package (it is not on the registry); its schema libraries are the agent's dependencies.
  assert.deepEqual(manifest.devDependencies, {
    'relaybox-relay-protocol': '0.2.0',
    tsx: manifest.devDependencies?.tsx,
  });
  const imports = importsOf(join(agentDir, 'src'));
  const bare = new Set(imports.filter((s) => !s.startsWith('.') && !s.startsWith('node:')).map(packageOf));
  assert.ok(bare.delete('relaybox-relay-protocol'), 'the agent imports the protocol');
  const protocol = readJson(join(protocolDir, 'package.json'));
  for (const name of Object.keys(protocol.dependencies ?? {})) {
    bare.add(name);
    assert.equal(manifest.dependencies?.[name], protocol.dependencies![name], `${name}: the protocol's version range`);
  }
  assert.deepEqual(
    [...bare].sort(),
    Object.keys(manifest.dependencies ?? {}).sort(),
    'every dependency is imported and every import is a dependency',
  );
  assert.deepEqual(
    imports.filter((s) => s.startsWith('../')),
    [],
    'no import leaves the package',
  );
});

test("the agent's version is its package's", () => {
  assert.equal(agentVersion, readJson(join(agentDir, 'package.json')).version);
});

test('the relay protocol is one workspace package both ends import, with only its schema libraries', () => {
  const manifest = readJson(join(protocolDir, 'package.json'));
  assert.equal(manifest.name, 'relaybox-relay-protocol');
  const bare = new Set(
    importsOf(protocolDir)
      // Its own modules import each other (frames.ts, failover-frames.ts, frame-parser.ts).
      .filter((s) => !s.startsWith('node:') && !s.startsWith('.'))
      .map(packageOf),
  );
  assert.deepEqual([...bare].sort(), Object.keys(manifest.dependencies ?? {}).sort());
  const workspaces = readJson(join(root, 'package.json')).workspaces ?? [];
  for (const workspace of ['src/relay-protocol', 'packages/relay-agent'])
    assert.ok(workspaces.includes(workspace), `${workspace} is a workspace`);
});

test("the agent's retryable server errors are the registry's", () => {
  const retryable = Object.entries(errorCodes)
    .filter(([, e]) => e.retryable)
    .map(([code]) => code)
    .sort();
  assert.deepEqual([...retryableServerErrors].sort(), retryable);
});

test('the installed command answers --help', () => {
  const run = spawnSync(join(root, 'node_modules/.bin/relaybox-relay'), ['--help'], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /^Usage:\n {2}relaybox-relay /);
});

import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { copyFile, cp, mkdir, mkdtemp, readdir, readFile, rename, rm } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build, version as esbuildVersion } from 'esbuild';

const run = promisify(execFile);
const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../..');

/** Where the agent's sources are: the package, and the relay protocol it shares with the server (bundled into it). */
export interface AgentSources {
  agentDir: string;
  protocolDir: string;
}

export const repositoryAgentSources: AgentSources = {
  agentDir: join(repoRoot, 'packages/relay-agent'),
  protocolDir: join(repoRoot, 'src/relay-protocol'),
};

/** The relay agent as `npm pack` made it, with what a download page publishes about it. */
export interface AgentPackage {
  version: string;
  /** relaybox-relay-<version>.tgz */
  fileName: string;
  tarball: Buffer;
  /** Hex SHA-256 of the tarball. */
  sha256: string;
}

interface Manifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
}

/**
 * The relay agent package this server hands out. It is built on first
 * request, not at start (a start stays one command and fast, and a process
 * nobody downloads from never builds): esbuild compiles the agent and the
 * relay protocol into dist/ (the package then runs on plain Node, its
 * dependencies all from the npm registry), and `npm pack` packs it. The
 * tarball is kept in `buildDir` under the hash of its sources, so a restart
 * reuses it and an edited agent is packed again; `npm pack` writes fixed
 * dates, so the same sources give the same bytes and the same SHA-256 on
 * every server.
 */
export class AgentPackages {
  /** undefined: this deployment has no agent sources (the download routes answer 404). */
  readonly version: string | undefined;
  private readonly manifest: Manifest | undefined;
  private built: Promise<AgentPackage> | undefined;

  constructor(
    private readonly buildDir: string,
    private readonly sources: AgentSources = repositoryAgentSources,
  ) {
    try {
      this.manifest = JSON.parse(readFileSync(join(sources.agentDir, 'package.json'), 'utf8')) as Manifest;
    } catch {
      this.manifest = undefined;
    }
    this.version = this.manifest?.version;
  }

  get fileName(): string | undefined {
    return this.manifest && `${this.manifest.name}-${this.manifest.version}.tgz`;
  }

  /** The package, built once per process (concurrent callers share the build); a failed build is tried again next time. */
  package(): Promise<AgentPackage> {
    this.built ??= this.build().catch((err: unknown) => {
      this.built = undefined;
      throw err;
    });
    return this.built;
  }

  private async build(): Promise<AgentPackage> {
    const manifest = this.manifest;
    if (!manifest) throw new Error(`no relay agent package in ${this.sources.agentDir}`);
    const fileName = `${manifest.name}-${manifest.version}.tgz`;
    const hash = await this.sourceHash();
    const kept = join(this.buildDir, `${manifest.name}-${manifest.version}-${hash}.tgz`);
    const existing = await readFile(kept).catch(() => undefined);
    if (existing) return described(manifest.version, fileName, existing);

    await mkdir(this.buildDir, { recursive: true });
    const staging = await mkdtemp(join(this.buildDir, 'relay-agent-'));
    try {
      const packageDir = join(staging, 'package');
      await cp(join(this.sources.agentDir, 'bin'), join(packageDir, 'bin'), { recursive: true });
      await copyFile(join(this.sources.agentDir, 'package.json'), join(packageDir, 'package.json'));
      await copyFile(join(this.sources.agentDir, 'README.md'), join(packageDir, 'README.md')).catch(() => undefined);
      await build({
        entryPoints: [join(this.sources.agentDir, 'src/cli.ts')],
        outfile: join(packageDir, 'dist/relaybox-relay.js'),
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20',
        // The registry's packages stay dependencies (libsql brings its platform's binary); only the agent and the protocol are compiled in.
        external: Object.keys(manifest.dependencies ?? {}).flatMap((name) => [name, `${name}/*`]),
        logLevel: 'silent',
        legalComments: 'none',
      });
      const packed = await npm(['pack', '--ignore-scripts', '--json', '--pack-destination', staging], packageDir);
      const [result] = JSON.parse(packed) as Array<{ filename: string }>;
      if (!result) throw new Error('npm pack wrote no tarball');
      // Renamed into place whole: another process sharing the data directory reads a complete file or none.
      await rename(join(staging, result.filename), kept);
      await this.removeOlder(kept);
      return described(manifest.version, fileName, await readFile(kept));
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
  }

  /** SHA-256 of every file the package is made of, and of the compiler: the tarball's cache key. */
  private async sourceHash(): Promise<string> {
    const hash = createHash('sha256').update(`esbuild ${esbuildVersion}\n`);
    for (const dir of [this.sources.agentDir, this.sources.protocolDir]) {
      const files = (await readdir(dir, { recursive: true, withFileTypes: true }))
        .filter((f) => f.isFile() && !f.parentPath.includes('node_modules'))
        .map((f) => join(f.parentPath, f.name))
        .sort();
      for (const file of files) hash.update(`${relative(repoRoot, file)}\n`).update(await readFile(file));
    }
    return hash.digest('hex').slice(0, 16);
  }

  private async removeOlder(kept: string): Promise<void> {
    for (const name of await readdir(this.buildDir)) {
      const path = join(this.buildDir, name);
      if (path !== kept && name.startsWith(`${this.manifest!.name}-`) && name.endsWith('.tgz'))
        await rm(path, { force: true });
    }
  }
}

function described(version: string, fileName: string, tarball: Buffer): AgentPackage {
  return { version, fileName, tarball, sha256: createHash('sha256').update(tarball).digest('hex') };
}

/** npm itself: the one that runs this server under `npm start`, else the one on PATH. */
async function npm(args: string[], cwd: string): Promise<string> {
  const cli = process.env.npm_execpath;
  const [command, argv] = cli?.endsWith('.js') ? [process.execPath, [cli, ...args]] : ['npm', args];
  const { stdout } = await run(command, argv, { cwd, timeout: 120_000, maxBuffer: 4 * 1024 * 1024 });
  return stdout;
}

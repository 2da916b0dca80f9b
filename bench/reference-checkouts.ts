/**
 * What `npm run bench` measures beside this checkout: the programs in
 * ../shared (the reference peer, the floor server), installed in a copy of
 * their own, and an earlier commit of Relaybox (BENCH_BASELINE) checked out
 * and installed for the length of one run.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

const here = resolve(import.meta.dirname, '..');

function run(command: string, args: string[], cwd: string, what: string): string {
  const done = spawnSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (done.status !== 0) throw new Error(`${what}: ${command} ${args.join(' ')} exited with ${done.status}`);
  return done.stdout;
}

/**
 * `../shared/<name>` beside the repository; in a git worktree elsewhere, beside
 * the main checkout (the parent of the common git directory). Undefined when neither has it.
 */
export function sharedDirectory(name: string): string | undefined {
  const candidates = [join(here, '..', 'shared', name)];
  const common = spawnSync('git', ['rev-parse', '--path-format=absolute', '--git-common-dir'], {
    cwd: here,
    encoding: 'utf8',
  });
  if (common.status === 0) candidates.push(join(dirname(dirname(common.stdout.trim())), 'shared', name));
  return candidates.find((dir) => existsSync(dir));
}

/**
 * `source` itself when its dependencies are installed, else a copy of `files`
 * under .tmp/<name> (ignored by git) with `npm ci` run there when the lock
 * file changed: ../shared is reference material the bench does not write into.
 */
export async function installedCopy(source: string, name: string, files: string[]): Promise<string> {
  if (existsSync(join(source, 'node_modules'))) return source;
  const dir = join(here, '.tmp', name);
  await mkdir(dir, { recursive: true });
  const lockFile = join(dir, 'package-lock.json');
  const installed =
    existsSync(join(dir, 'node_modules')) && existsSync(lockFile) ? await readFile(lockFile, 'utf8') : undefined;
  for (const file of files) await copyFile(join(source, file), join(dir, file));
  if (installed !== (await readFile(lockFile, 'utf8'))) {
    console.log(`# ${name}: npm ci in ${dir}`);
    run('npm', ['ci', '--no-audit', '--no-fund'], dir, `${name} install`);
  }
  return dir;
}

export interface Checkout {
  root: string;
  commit: string;
  remove(): Promise<void>;
}

/** A detached git worktree of `commit` in a temporary directory, its dependencies installed; `remove` deletes both. A path to an installed checkout is taken as it is. */
export async function baselineCheckout(commit: string): Promise<Checkout> {
  // A checkout already installed (as bench:send:wrk takes it) is used as it is, and kept.
  if (existsSync(join(commit, 'package.json'))) {
    const root = resolve(commit);
    const head = run('git', ['rev-parse', '--short', 'HEAD'], root, 'baseline').trim();
    return { root, commit: head, remove: async () => undefined };
  }
  const resolved = run('git', ['rev-parse', '--verify', `${commit}^{commit}`], here, 'baseline').trim();
  const root = join(await mkdtemp(join(tmpdir(), 'relaybox-baseline-')), 'checkout');
  run('git', ['worktree', 'add', '--detach', root, resolved], here, 'baseline checkout');
  const remove = async () => {
    spawnSync('git', ['worktree', 'remove', '--force', root], { cwd: here, stdio: 'ignore' });
    await rm(dirname(root), { recursive: true, force: true });
    spawnSync('git', ['worktree', 'prune'], { cwd: here, stdio: 'ignore' });
  };
  try {
    console.log(`# baseline: npm ci in ${root} (${resolved.slice(0, 7)})`);
    run('npm', ['ci', '--no-audit', '--no-fund'], root, 'baseline install');
  } catch (err) {
    await remove();
    throw err;
  }
  return { root, commit: resolved.slice(0, 7), remove };
}

/**
 * Where the embedded store's commits go, page by page: the service runs
 * under `wrk` (accepted `POST /api/v1/messages`, 100 recipients, as
 * `bench:send:wrk`), then the frames its write-ahead log holds are read
 * (each a 4 KiB page a commit wrote whole, however little of it changed) and
 * named by the table or index that owns the page (SQLite's `dbstat`). It
 * prints the pages per commit by owner and, from the statement counters on
 * `/metrics`, the sends per commit: what a commit writes to disk besides the
 * rows themselves, and which index spreads its entries over the most pages.
 * Then what the file holds a stored message, by table and index (`dbstat`:
 * pages, the room in them included), the messages' own apart. It reports,
 * it does not assert.
 *
 *   npm run bench:wal-pages
 *
 * BENCH_CONNECTIONS (64), BENCH_SECONDS (4), BENCH_WARMUP_SECONDS (2).
 * Needs `wrk` on the PATH (Debian: apt-get install wrk).
 */
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'libsql';
import { storeFile } from '../src/store/embedded-store.ts';
import { isEntryPoint } from './entry-point.ts';
import { apiKeyFor, embeddedSendEnv, startService } from './send-path-processes.ts';
import { sendScript, wrk } from './wrk.ts';

const connections = Number(process.env.BENCH_CONNECTIONS || 64);
const seconds = Number(process.env.BENCH_SECONDS || 4);
const warmupSeconds = Number(process.env.BENCH_WARMUP_SECONDS || 2);

/** The page numbers of each commit the log holds, oldest first (SQLite's WAL format: a 32-byte header, then frames of a 24-byte header and a page). */
export function walCommits(wal: Buffer): number[][] {
  if (wal.length < 32) return [];
  const pageSize = wal.readUInt32BE(8);
  const salts = [wal.readUInt32BE(16), wal.readUInt32BE(20)];
  const commits: number[][] = [];
  let pages: number[] = [];
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    // A frame of an earlier generation of the log (it started over since): the current generation ends here.
    if (wal.readUInt32BE(at + 8) !== salts[0] || wal.readUInt32BE(at + 12) !== salts[1]) break;
    pages.push(wal.readUInt32BE(at));
    // The database's size after the commit, on a commit's last frame only.
    if (wal.readUInt32BE(at + 4) !== 0) {
      commits.push(pages);
      pages = [];
    }
  }
  return commits;
}

/** Each page's owner, as `dbstat` names it (`<table>` or `<table>:<index>`), interior pages apart. */
function pageOwners(file: string): Map<number, string> {
  const db = new Database(file, { readonly: true });
  try {
    const rows = db.prepare('SELECT name, pageno, pagetype FROM dbstat').all() as Array<{
      name: string;
      pageno: number;
      pagetype: string;
    }>;
    return new Map(rows.map((r) => [r.pageno, r.pagetype === 'internal' ? `${r.name} (interior)` : r.name]));
  } finally {
    db.close();
  }
}

/** The file's bytes by table or index (their pages, the room left in them included), and how many messages it holds. */
function storedBytes(file: string): { messages: number; byName: Array<{ name: string; bytes: number }> } {
  const db = new Database(file, { readonly: true });
  try {
    const { n } = db.prepare('SELECT count(*) AS n FROM messages').get() as { n: number };
    const byName = db
      .prepare('SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC')
      .all() as Array<{ name: string; bytes: number }>;
    return { messages: n, byName };
  } finally {
    db.close();
  }
}

async function statementCounts(base: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^relaybox_store_statements_total\{verb="(\w+)",table="([^"]*)"\} (\d+)/.exec(line);
    if (m) counts.set(`${m[1]} ${m[2]}`, Number(m[3]));
  }
  return counts;
}

async function main(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-wal-pages-'));
  const service = await startService('all', embeddedSendEnv(dataDir));
  const copy = join(dataDir, 'wal-copy');
  let report: { load: ReturnType<typeof wrk>; sends: number; commits: number };
  try {
    const base = `http://127.0.0.1:${service.port}`;
    const script = join(dataDir, 'send.lua');
    await writeFile(script, sendScript(await apiKeyFor(base)));
    const url = `${base}/api/v1/messages`;
    wrk(url, script, warmupSeconds, connections);
    const before = await statementCounts(base);
    const load = wrk(url, script, seconds, connections);
    // The log as the load left it: the commits since it last started over.
    await cp(join(dataDir, `${storeFile}-wal`), copy);
    const after = await statementCounts(base);
    const delta = (key: string) => (after.get(key) ?? 0) - (before.get(key) ?? 0);
    report = { load, sends: delta('insert messages'), commits: delta('commit *') };
  } finally {
    await service.stop();
  }
  // Stopped, the file is whole: the owners of its pages are read from it.
  const owners = pageOwners(join(dataDir, storeFile));
  const stored = storedBytes(join(dataDir, storeFile));
  const commits = walCommits(await readFile(copy));
  await rm(dataDir, { recursive: true, force: true });
  const byOwner = new Map<string, number>();
  let frames = 0;
  for (const pages of commits)
    for (const page of pages) {
      frames++;
      const owner = owners.get(page) ?? 'pages new since, or freed';
      byOwner.set(owner, (byOwner.get(owner) ?? 0) + 1);
    }
  const perCommit = commits.length > 0 ? frames / commits.length : 0;
  const sendsPerCommit = report.commits > 0 ? report.sends / report.commits : 0;
  console.log(
    `\nThe embedded store's commits under wrk: ${connections} connections, ${seconds} s after ${warmupSeconds} s warm-up; ` +
      `${Math.round(report.load.sendsPerSecond)} sends/s, ${report.commits} commits (${sendsPerCommit.toFixed(1)} sends a commit)`,
  );
  console.log(
    `${commits.length} commits in the log: ${perCommit.toFixed(1)} pages of 4 KiB a commit, ` +
      `${sendsPerCommit > 0 ? (perCommit / sendsPerCommit).toFixed(2) : '-'} a send\n`,
  );
  console.log('| table or index | pages a commit | share |');
  console.log('|---|---|---|');
  for (const [owner, n] of [...byOwner].sort((a, b) => b[1] - a[1]))
    console.log(`| ${owner} | ${(n / commits.length).toFixed(2)} | ${((100 * n) / frames).toFixed(1)} % |`);
  const perMessage = (bytes: number) => Math.round(bytes / Math.max(1, stored.messages)).toLocaleString('en');
  const sum = (rows: Array<{ bytes: number }>) => rows.reduce((total, r) => total + r.bytes, 0);
  const own = stored.byName.filter((r) => r.name === 'messages' || r.name.startsWith('messages:'));
  console.log(
    `\nThe file after the run: ${stored.messages.toLocaleString('en')} messages, ${perMessage(sum(stored.byName))} B a message in all, ` +
      `${perMessage(sum(own))} B its row and index entries\n`,
  );
  console.log('| table or index | bytes a message |');
  console.log('|---|---|');
  for (const r of stored.byName.filter((r) => r.bytes / Math.max(1, stored.messages) >= 1))
    console.log(`| ${r.name} | ${perMessage(r.bytes)} |`);
}

if (isEntryPoint(import.meta.url)) await main();

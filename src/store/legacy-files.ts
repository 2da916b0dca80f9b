import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import type { Doc } from './collection.ts';

/**
 * The files of the embedded store before it moved to SQLite, read once to
 * import them: per collection `<name>.snapshot` (one document per line),
 * `<name>.log` and, after an interrupted compaction, `<name>.log.next` (one
 * change per line: `{"op":"put","doc":...}` or `{"op":"del","id":...}`).
 * Replayed in that order, the last change of an id wins; a torn line (a crash
 * mid-write) is skipped. The files are read a piece at a time: the old store
 * wrote logs past V8's longest string (512 MiB, about 900,000 messages), which
 * it could then not read back itself.
 */
const suffixes = ['.snapshot', '.log', '.log.next'] as const;

/** Where the imported files are moved, so they are never imported twice and can still be read by hand. */
export const retiredDir = 'pre-sqlite';

export type Change = { op: 'put'; doc: Doc } | { op: 'del'; id: string };

/** Bytes read at a time. */
const readBytes = 8 << 20;

/** Collections that have files of the old store in `dataDir`. */
export function legacyCollections(dataDir: string): string[] {
  const names = new Set<string>();
  for (const file of readdirSync(dataDir)) {
    const suffix = suffixes.find((s) => file.endsWith(s));
    if (suffix) names.add(file.slice(0, -suffix.length));
  }
  return [...names].sort();
}

/** Calls `apply` with each change of one collection's files, in the order the old store replayed them. */
export function replayLegacyCollection(dataDir: string, name: string, apply: (change: Change) => void): void {
  for (const [suffix, asChange] of [
    ['.snapshot', false],
    ['.log', true],
    ['.log.next', true],
  ] as const) {
    const path = join(dataDir, name + suffix);
    if (!existsSync(path)) continue;
    for (const line of fileLines(path)) {
      if (!line) continue;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        continue; // a torn line from a crash mid-write: everything before it stands
      }
      const change = asChange ? (parsed as Change) : ({ op: 'put', doc: parsed } as Change);
      if (
        change?.op === 'put'
          ? typeof change.doc?.id === 'string'
          : change?.op === 'del' && typeof change.id === 'string'
      )
        apply(change);
    }
  }
}

/** The lines of a file (the last one without its newline too), read `chunk` bytes at a time; a longer line is gathered across reads. */
export function* fileLines(path: string, chunk = readBytes): Generator<string> {
  const fd = openSync(path, 'r');
  try {
    let buf = Buffer.allocUnsafe(chunk);
    let held = 0; // the start of a line whose end is not read yet, at the front of buf
    for (;;) {
      if (held === buf.length) buf = Buffer.concat([buf], buf.length * 2);
      const read = readSync(fd, buf, held, buf.length - held, null);
      if (read === 0) {
        if (held > 0) yield buf.toString('utf8', 0, held);
        return;
      }
      const filled = buf.subarray(0, held + read);
      let start = 0;
      for (let nl = filled.indexOf(10, held); nl !== -1; nl = filled.indexOf(10, start)) {
        yield filled.toString('utf8', start, nl);
        start = nl + 1;
      }
      filled.copy(buf, 0, start);
      held = filled.length - start;
    }
  } finally {
    closeSync(fd);
  }
}

/** Moves the old files of `names` (and a leftover `.snapshot.tmp`) into `retiredDir`. */
export function retireLegacyFiles(dataDir: string, names: string[]): void {
  const target = join(dataDir, retiredDir);
  mkdirSync(target, { recursive: true });
  for (const name of names) {
    for (const suffix of [...suffixes, '.snapshot.tmp']) {
      const path = join(dataDir, name + suffix);
      if (existsSync(path)) renameSync(path, join(target, name + suffix));
    }
  }
}

import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import type { Doc } from './collection.ts';

/**
 * The files of the embedded store before it moved to SQLite, read once to
 * import them: per collection `<name>.snapshot` (one document per line),
 * `<name>.log` and, after an interrupted compaction, `<name>.log.next` (one
 * change per line: `{"op":"put","doc":...}` or `{"op":"del","id":...}`).
 * Replayed in that order, the last change of an id wins; a torn line (a crash
 * mid-write) is skipped.
 */
const suffixes = ['.snapshot', '.log', '.log.next'] as const;

/** Where the imported files are moved, so they are never imported twice and can still be read by hand. */
export const retiredDir = 'pre-sqlite';

type Change = { op: 'put'; doc: Doc } | { op: 'del'; id: string };

/** Collections that have files of the old store in `dataDir`. */
export function legacyCollections(dataDir: string): string[] {
  const names = new Set<string>();
  for (const file of readdirSync(dataDir)) {
    const suffix = suffixes.find((s) => file.endsWith(s));
    if (suffix) names.add(file.slice(0, -suffix.length));
  }
  return [...names].sort();
}

/** The documents of one collection as the old store would have loaded them. */
export function readLegacyCollection(dataDir: string, name: string): Map<string, Doc> {
  const docs = new Map<string, Doc>();
  const apply = (change: Change): void => {
    if (change.op === 'put') docs.set(change.doc.id, change.doc);
    else docs.delete(change.id);
  };
  for (const [suffix, asChange] of [['.snapshot', false], ['.log', true], ['.log.next', true]] as const) {
    const path = join(dataDir, name + suffix);
    if (!existsSync(path)) continue;
    for (const line of readFileSync(path, 'utf8').split('\n')) {
      if (!line) continue;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        continue; // a torn line from a crash mid-write: everything before it stands
      }
      apply(asChange ? (parsed as Change) : { op: 'put', doc: parsed as Doc });
    }
  }
  return docs;
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

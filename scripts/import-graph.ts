/**
 * The folder-level import graph of src/, drawn by dependency-cruiser as a Mermaid flowchart and kept in
 * docs/architecture.md between two markers. `npm run docs:graph` rewrites it; a unit test fails when the
 * checked-in graph differs from a fresh one, so the picture cannot drift from the code.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
export const architectureDoc = `${root}docs/architecture.md`;
const start = '<!-- import-graph:start (npm run docs:graph) -->';
const end = '<!-- import-graph:end -->';

/** Each actor folder, each other folder of src/ and each top-level file is one node. */
export function freshImportGraph(): string {
  const mermaid = execFileSync(
    `${root}node_modules/.bin/depcruise`,
    [
      'src',
      '--config',
      '.dependency-cruiser.cjs',
      '--output-type',
      'mermaid',
      '--include-only',
      '^src/',
      '--collapse',
      '^src/actors/[^/]+/|^src/[^/]+/|^src/[^/]+\\.ts$',
    ],
    { cwd: root, encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 },
  );
  return '```mermaid\n' + mermaid.trim() + '\n```';
}

/** The graph as docs/architecture.md holds it, or undefined when its markers are missing. */
export function checkedInImportGraph(doc = readFileSync(architectureDoc, 'utf8')): string | undefined {
  const from = doc.indexOf(start);
  const to = doc.indexOf(end);
  if (from < 0 || to < from) return undefined;
  return doc.slice(from + start.length, to).trim();
}

function rewrite(): void {
  const doc = readFileSync(architectureDoc, 'utf8');
  if (checkedInImportGraph(doc) === undefined)
    throw new Error(`${architectureDoc} lacks the markers ${start} … ${end}`);
  const from = doc.indexOf(start) + start.length;
  writeFileSync(architectureDoc, `${doc.slice(0, from)}\n\n${freshImportGraph()}\n\n${doc.slice(doc.indexOf(end))}`);
  console.log(`import graph written to ${architectureDoc}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) rewrite();

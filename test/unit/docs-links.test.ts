/**
 * The README stays a front door (at most 300 lines, every page of docs/
 * linked from it), and every relative link in README.md and docs/*.md
 * points at a file of this repository and, with a #fragment, at a heading
 * that file has (GitHub's anchor for it).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';

const root = resolve(new URL('../..', import.meta.url).pathname);
const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The text outside fenced code blocks and code spans: what GitHub renders as links and headings. */
function prose(markdown: string): string {
  return markdown
    .replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '')
    .replace(/`[^`\n]*`/g, (span) => span.replace(/[[\]()#]/g, ''));
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  const withoutCode = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  for (const [, heading] of withoutCode.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = heading!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

test('the README is a front door of at most 300 lines', () => {
  const lines = readFileSync(join(root, 'README.md'), 'utf8').trimEnd().split('\n').length;
  assert.ok(lines <= 300, `README.md has ${lines} lines`);
});

test('the README links every page of docs/', () => {
  const readme = prose(readFileSync(join(root, 'README.md'), 'utf8'));
  const missing = pages.filter((p) => p.startsWith('docs/') && !readme.includes(`](${p}`));
  assert.deepEqual(missing, []);
});

test('every relative link in README.md and docs/*.md resolves to a file and heading of the repository', () => {
  const broken: string[] = [];
  for (const page of pages) {
    const text = prose(readFileSync(join(root, page), 'utf8'));
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue;
      const [path, fragment] = target!.split('#') as [string, string | undefined];
      const file = path === '' ? join(root, page) : resolve(dirname(join(root, page)), decodeURIComponent(path));
      const where = `${page}: ${target}`;
      if (relative(root, file).startsWith('..')) broken.push(`${where} leaves the repository`);
      else if (!existsSync(file)) broken.push(`${where} names no file`);
      else if (fragment !== undefined && file.endsWith('.md') && !anchors(readFileSync(file, 'utf8')).has(fragment))
        broken.push(`${where} names no heading`);
    }
  }
  assert.deepEqual(broken, []);
});

test('every example has a README that says how to run each of its npm scripts', () => {
  for (const name of readdirSync(join(root, 'examples'))) {
    const dir = join(root, 'examples', name);
    const readme = join(dir, 'README.md');
    assert.ok(existsSync(readme), `examples/${name} has a README.md`);
    const text = readFileSync(readme, 'utf8');
    const scripts = Object.keys(JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).scripts ?? {});
    assert.ok(scripts.length > 0, `examples/${name} has scripts`);
    for (const script of scripts) {
      const command = script === 'start' ? 'npm start' : `npm run ${script}`;
      assert.ok(text.includes(`${command} -w examples/${name}`), `examples/${name}/README.md shows ${command}`);
    }
  }
});

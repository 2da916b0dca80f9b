import assert from 'node:assert/strict';

/** The first ```sh block after `heading` in a Markdown page: a walk-through to run as written. */
export function shellBlockAfter(markdown: string, heading: string, page: string): string {
  const section = markdown.indexOf(`\n${heading}\n`);
  assert.ok(section >= 0, `${page} has the heading ${heading}`);
  const start = markdown.indexOf('```sh\n', section);
  const end = markdown.indexOf('\n```', start + 6);
  assert.ok(start > section && end > start, `${page}: the section ${heading} has a sh block`);
  return markdown.slice(start + 6, end + 1);
}

/**
 * The error registry is the one source of every code's status, title and
 * problem type; docs/errors.md documents each code under a heading of its
 * own (the anchor a reader finds it by), stating its status.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { AppError, errorCodes, problemTypeOf, validationError, type ErrorCode } from '../../src/errors.ts';

const page = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
const codes = Object.keys(errorCodes) as ErrorCode[];

/** The text under each `### heading` of the page, by heading. */
function sections(markdown: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of markdown.split(/^### /m).slice(1)) {
    const [heading, ...rest] = part.split('\n');
    out.set(
      heading!.trim(),
      rest
        .join('\n')
        .split(/^#{1,3} /m)[0]!
        .trim(),
    );
  }
  return out;
}

test('every code of the registry has its section in docs/errors.md, which starts with its status', () => {
  const documented = sections(page);
  const missing = codes.filter((code) => !documented.has(code));
  assert.deepEqual(missing, [], 'codes without a section');
  for (const code of codes)
    assert.match(
      documented.get(code)!,
      new RegExp(`^${errorCodes[code].status}\\. `),
      `${code}: its section starts with its status`,
    );
  const unknown = [...documented.keys()].filter((heading) => !codes.includes(heading as ErrorCode));
  assert.deepEqual(unknown, [], 'sections for codes the registry does not have');
});

test('every code has a title and a problem type of its own that ends in the code', () => {
  const types = new Set(codes.map(problemTypeOf));
  assert.equal(types.size, codes.length);
  for (const code of codes) {
    assert.ok(errorCodes[code].title.length > 0, code);
    assert.ok(problemTypeOf(code).endsWith(`/${code}`), code);
  }
});

test('an AppError answers RFC 9457 members and keeps error, message, statusCode and details', () => {
  const problem = validationError('/to', 'is required').toProblem('req-1');
  assert.deepEqual(problem, {
    type: '/errors/validation_error',
    title: 'Validation error',
    status: 400,
    detail: '/to: is required',
    instance: 'req-1',
    error: 'validation_error',
    message: '/to: is required',
    statusCode: 400,
    details: [{ path: '/to', message: 'is required' }],
  });
  const conflict = new AppError('conflict', 'already there').toProblem('req-2');
  assert.equal(conflict.status, 409);
  assert.equal(conflict.title, errorCodes.conflict.title);
  assert.equal('details' in conflict, false, 'no details outside validation');
});

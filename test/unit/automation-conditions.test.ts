import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Condition } from '../../src/automations/automation-schemas.ts';
import { RE2JS } from 're2js';
import { checkPatterns, conditionMatches, evaluate, listKey, outOfTime } from '../../src/automations/conditions.ts';
import { expandedSize } from '../../src/automations/pattern-size.ts';
import { AppError } from '../../src/errors.ts';

const message = { body: 'Please STOP sending me these', from: '+14155550100', to: 'shop@example.com' };

/** [field, operator, value, matches message]: every operator, matching and not, on each field. */
const table: Array<[Condition['field'], Condition['operator'], string, boolean]> = [
  ['body', 'contains', 'stop', true],
  ['body', 'contains', 'start', false],
  ['body', 'equals', 'please stop sending me these', true],
  ['body', 'equals', 'please stop', false],
  ['body', 'starts_with', 'PLEASE', true],
  ['body', 'starts_with', 'stop', false],
  ['body', 'ends_with', 'THESE', true],
  ['body', 'ends_with', 'please', false],
  ['body', 'matches_regex', '\\bSTOP\\b', true],
  ['body', 'matches_regex', '^STOP$', false],
  ['body', 'matches_regex', '(?i)^please stop', true],
  ['body', 'is_in', 'hello, Please STOP sending me these ,bye', true],
  ['body', 'is_in', 'stop,unsubscribe', false],
  ['from', 'contains', '555', true],
  ['from', 'contains', '999', false],
  ['from', 'equals', '+14155550100', true],
  ['from', 'equals', '+14155550101', false],
  ['from', 'starts_with', '+1415', true],
  ['from', 'starts_with', '+44', false],
  ['from', 'ends_with', '0100', true],
  ['from', 'ends_with', '0199', false],
  ['from', 'matches_regex', '^\\+1415\\d{7}$', true],
  ['from', 'matches_regex', '^\\+44', false],
  ['from', 'is_in', '+44 20 7946 0958, +1 (415) 555-0100', true],
  ['from', 'is_in', '0014155550100', true],
  ['from', 'is_in', '+1 415 555 0199', false],
  ['to', 'contains', '@EXAMPLE', true],
  ['to', 'contains', '@other', false],
  ['to', 'equals', 'Shop@Example.com', true],
  ['to', 'equals', 'shop@example.org', false],
  ['to', 'starts_with', 'SHOP', true],
  ['to', 'starts_with', 'info', false],
  ['to', 'ends_with', '.COM', true],
  ['to', 'ends_with', '.org', false],
  ['to', 'matches_regex', '^[a-z]+@example\\.com$', true],
  ['to', 'matches_regex', '^info@', false],
  ['to', 'is_in', 'info@example.com,  SHOP@example.com', true],
  ['to', 'is_in', 'info@example.com', false],
];

test('every operator on every field, matching and not; contains/equals/starts_with/ends_with/is_in ignore case', () => {
  for (const [field, operator, value, expected] of table) {
    assert.equal(conditionMatches({ field, operator, value }, message), expected, `${field} ${operator} ${value}`);
  }
});

test('is_in compares phone numbers in E.164 and trims items; an absent field reads as empty', () => {
  assert.equal(listKey(' +1 (415) 555-0100 '), '+14155550100');
  assert.equal(listKey('0044 20 7946 0958'), '+442079460958');
  assert.equal(conditionMatches({ field: 'from', operator: 'is_in', value: ' , ' }, { from: '' }), false);
  assert.equal(conditionMatches({ field: 'from', operator: 'equals', value: '' }, {}), true);
});

test('logic: and needs every condition, or any; no conditions always matches; the dry-run answer lists each condition', () => {
  const yes: Condition = { field: 'body', operator: 'contains', value: 'stop' };
  const no: Condition = { field: 'from', operator: 'equals', value: '+10000000000' };
  const actions = [{ type: 'send_reply' as const }, { type: 'create_contact' as const }];
  assert.equal(evaluate({ logic: 'and', conditions: [yes, no], actions }, message).matched, false);
  assert.equal(evaluate({ logic: 'and', conditions: [yes, yes], actions }, message).matched, true);
  assert.equal(evaluate({ logic: 'or', conditions: [no, yes], actions }, message).matched, true);
  assert.equal(evaluate({ logic: 'or', conditions: [no, no], actions }, message).matched, false);
  const always = evaluate({ logic: 'and', conditions: [], actions }, message);
  assert.deepEqual(always, {
    matched: true,
    conditionsEvaluated: [],
    actionsWouldExecute: ['send_reply', 'create_contact'],
  });
  assert.deepEqual(evaluate({ logic: 'and', conditions: [yes, no], actions }, message), {
    matched: false,
    conditionsEvaluated: [
      { ...yes, matched: true },
      { ...no, matched: false },
    ],
    actionsWouldExecute: [],
  });
});

test('(a+)+$ against 10,000 a and ! evaluates in under 50 ms (linear-time engine)', () => {
  // The first runs in a process also compile the engine's own code (V8 tiers); the bound is about the pattern, so warm up on another one.
  for (let i = 0; i < 3; i++)
    conditionMatches({ field: 'body', operator: 'matches_regex', value: '(b+)+$' }, { body: `${'b'.repeat(5_000)}!` });
  const body = `${'a'.repeat(10_000)}!`;
  const runs: number[] = [];
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    assert.equal(conditionMatches({ field: 'body', operator: 'matches_regex', value: '(a+)+$' }, { body }), false);
    runs.push(performance.now() - started);
  }
  const median = [...runs].sort((a, b) => a - b)[2]!;
  console.log(
    `# (a+)+$ on 10,001 characters, 5 runs: ${runs.map((ms) => ms.toFixed(1)).join(', ')} ms (median ${median.toFixed(1)})`,
  );
  // A loaded machine can pause any single run (GC); the median is the pattern's cost.
  assert.ok(median < 50, `median ${median} ms`);
  // Linear: 100 times the input stays far from the exponential blow-up a backtracking engine shows.
  const long = performance.now();
  assert.equal(
    conditionMatches(
      { field: 'body', operator: 'matches_regex', value: '(a+)+$' },
      { body: `${'a'.repeat(1_000_000)}!` },
    ),
    false,
  );
  assert.ok(performance.now() - long < 5_000);
});

const regex = (value: string): Condition => ({ field: 'body', operator: 'matches_regex', value });
const checkPattern = (...patterns: string[]) => checkPatterns(patterns.map(regex), (i) => `/conditions/${i}/value`);

/** The refusal's message and field of the first refused pattern among these. */
function refusal(...patterns: string[]): { message: string; field: string } {
  try {
    checkPattern(...patterns);
  } catch (err) {
    assert.ok(err instanceof AppError);
    assert.equal(err.code, 'validation_error');
    return { message: err.details![0]!.message, field: err.details![0]!.path };
  }
  assert.fail(`${patterns.join(' ')} was accepted`);
}

test('patterns that need backtracking are refused naming the construct; the pattern length is capped', () => {
  const refused = (pattern: string): string => refusal(pattern).message;
  assert.match(refused('(a)\\1'), /backreference/);
  assert.match(refused('(?<n>a)\\k<n>'), /named backreference/);
  assert.match(refused('foo(?=bar)'), /lookahead/);
  assert.match(refused('foo(?!bar)'), /negative lookahead/);
  assert.match(refused('(?<=a)b'), /lookbehind/);
  assert.match(refused('(?<!a)b'), /negative lookbehind/);
  assert.match(refused('(?>a)'), /atomic group/);
  assert.match(refused('a(b'), /not a valid RE2 pattern/);
  assert.match(refused('a'.repeat(501)), /at most 500/);
  checkPattern('(a+)+$');
  checkPattern('a'.repeat(500));
});

const oneThousandRepeats = '.{0,1000}'.repeat(50) + '!';

test('a pattern whose written-out repeats compile past 1,000 instructions is refused without being compiled, alone or with the others of its automation', () => {
  const started = performance.now();
  assert.match(refusal(oneThousandRepeats).message, /compiles to 100001 instructions.*1000 together/);
  assert.match(refusal('.{1000}'.repeat(71) + '$').message, /compiles to 71001 instructions/);
  assert.ok(performance.now() - started < 50, 'refused from the pattern text: compiling the first takes over a second');
  assert.match(refusal('.{0,1000}x').message, /compiles to 200[13] instructions/);
  const { message, field } = refusal('(?i)stop', '.{0,400}x', '.{0,400}y');
  assert.equal(field, '/conditions/2/value');
  assert.match(message, /the earlier ones take \d+/);
  checkPattern(
    '(?i)\\b(stop|unsubscribe|cancel|end|quit)\\b',
    'https?://[^\\s]{1,200}',
    '\\b\\d{5}(-\\d{4})?\\b',
    '.{0,200}x',
  );
});

test('the size read from the pattern text follows the compiled size', () => {
  for (const pattern of [
    '(?i)\\b(stop|unsubscribe)\\b',
    '[]a]{100}',
    '[[:alpha:]]{100}',
    '\\x{41}{100}',
    '\\Qa{1000}\\E',
    '(?P<x>a{10}){10}',
    '(?:(?:a{10}){10}){10}',
    '(?s:.{0,100}){3}',
    'x*?y+?z??',
    '\\b(?:\\d[ -]*?){13,16}\\b',
    '[^\\]]{0,300}',
    oneThousandRepeats,
  ]) {
    const compiled = RE2JS.compile(pattern).programSize();
    const estimate = expandedSize(pattern);
    assert.ok(
      estimate >= compiled - 3 && estimate <= compiled * 1.3,
      `${pattern}: ${estimate} read, ${compiled} compiled`,
    );
  }
});

test('a stored pattern over the limit (saved before it) does not match and says why; a pattern out of time does not match and says so', () => {
  const actions = [{ type: 'send_reply' as const }];
  const oversized = evaluate(
    { logic: 'or', conditions: [regex(oneThousandRepeats)], actions },
    { body: `${'a'.repeat(999)}!` },
  );
  assert.equal(oversized.matched, false);
  assert.match(oversized.conditionsEvaluated[0]!.error!, /^not run: the pattern compiles to/);

  let seed = 1;
  const body = Array.from({ length: 100_000 }, () =>
    ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) >> 16) & 1 ? 'a' : 'b',
  ).join('');
  const started = performance.now();
  const slow = evaluate({ logic: 'or', conditions: [regex('[ab]*a[ab]{100}$')], actions }, { body });
  const elapsed = performance.now() - started;
  assert.equal(slow.conditionsEvaluated[0]!.error, outOfTime);
  assert.equal(slow.matched, false);
  assert.ok(elapsed < 1_000, `stopped at the deadline, not after the whole match (${elapsed.toFixed(0)} ms)`);
});

import { createContext, Script } from 'node:vm';
import { RE2JS } from 're2js';
import { validationError } from '../errors.ts';
import { toE164 } from '../phone-number.ts';
import { maxPatternInstructions, maxPatternLength, type ActionType, type Condition } from './automation-schemas.ts';
import { expandedSize } from './pattern-size.ts';

/** What conditions look at: the triggering message, or the sample of a dry run. Absent fields read as ''. */
export interface SampleMessage {
  body?: string | null;
  from?: string | null;
  to?: string | null;
}

export interface ConditionResult {
  field: string;
  operator: string;
  value: string;
  matched: boolean;
  /** Why a pattern was not run to the end: it is over the size limit (stored before the limit) or ran out of time. */
  error?: string;
}

export interface Evaluation {
  matched: boolean;
  conditionsEvaluated: ConditionResult[];
  actionsWouldExecute: ActionType[];
}

/**
 * The one evaluation both the dry run and a real run use, so the dry run
 * answers exactly what a run then does. Every condition is evaluated (the
 * dry run reports each); no conditions means the automation always matches.
 */
export function evaluate(
  rule: { logic: 'and' | 'or'; conditions: Condition[]; actions: { type: ActionType }[] },
  message: SampleMessage,
): Evaluation {
  const patterns = patternOutcomes(rule.conditions, message);
  const conditionsEvaluated = rule.conditions.map((c, i): ConditionResult => {
    const result = { field: c.field, operator: c.operator, value: c.value };
    const outcome = patterns[i];
    if (outcome === undefined) return { ...result, matched: plainConditionMatches(c, message) };
    return typeof outcome === 'string'
      ? { ...result, matched: false, error: outcome }
      : { ...result, matched: outcome };
  });
  const matched =
    conditionsEvaluated.length === 0 ||
    (rule.logic === 'or' ? conditionsEvaluated.some((c) => c.matched) : conditionsEvaluated.every((c) => c.matched));
  return { matched, conditionsEvaluated, actionsWouldExecute: matched ? rule.actions.map((a) => a.type) : [] };
}

/**
 * The evaluation a real run makes when a pattern ran out of time: the
 * deadline is wall-clock time, so a machine that paused this process can
 * cut a harmless pattern short; one more try after the event loop has run
 * tells that apart from a pattern that takes that long every time.
 */
export async function evaluateWithRetry(
  rule: Parameters<typeof evaluate>[0],
  message: SampleMessage,
): Promise<Evaluation> {
  const first = evaluate(rule, message);
  if (!first.conditionsEvaluated.some((c) => c.error === outOfTime)) return first;
  await loopTurn();
  return evaluate(rule, message);
}

/**
 * Lets timers and I/O run before going on. A timer, not setImmediate: an
 * immediate queued from an I/O callback runs in the same loop turn, right
 * after it, so two evaluations would hold the loop back to back.
 */
export const loopTurn = () => new Promise((resolve) => setTimeout(resolve, 0));

/** contains, equals, starts_with, ends_with and is_in ignore case; matches_regex is as written (`(?i)` makes it ignore case). */
export function conditionMatches(c: Condition, message: SampleMessage): boolean {
  return c.operator === 'matches_regex' ? patternOutcomes([c], message)[0] === true : plainConditionMatches(c, message);
}

function plainConditionMatches(c: Condition, message: SampleMessage): boolean {
  const actual = message[c.field as keyof SampleMessage] ?? '';
  const text = actual.toLowerCase();
  const value = c.value.toLowerCase();
  switch (c.operator) {
    case 'contains':
      return text.includes(value);
    case 'equals':
      return text === value;
    case 'starts_with':
      return text.startsWith(value);
    case 'ends_with':
      return text.endsWith(value);
    case 'is_in': {
      const key = listKey(actual);
      return c.value.split(',').some((item) => item.trim() !== '' && listKey(item) === key);
    }
    default:
      return false;
  }
}

/** A list item as is_in compares it: phone numbers in E.164 (written with spaces, dashes or brackets, or 00 for +), the rest lower-cased. */
export function listKey(raw: string): string {
  const trimmed = raw.trim();
  const international = trimmed.startsWith('00') ? `+${trimmed.slice(2)}` : trimmed;
  if (international.startsWith('+')) {
    const number = toE164(international);
    if (number) return number;
  }
  return trimmed.toLowerCase();
}

/** Constructs that need a backtracking engine, by how RE2 syntax spells them; named in the 400. */
const backtrackingConstructs: Array<[RegExp, string]> = [
  [/\\[1-9]/, 'a backreference (\\1 to \\9)'],
  [/\\k</, 'a named backreference (\\k<name>)'],
  [/\(\?=/, 'a lookahead (?=...)'],
  [/\(\?!/, 'a negative lookahead (?!...)'],
  [/\(\?<=/, 'a lookbehind (?<=...)'],
  [/\(\?<!/, 'a negative lookbehind (?<!...)'],
  [/\(\?>/, 'an atomic group (?>...)'],
  [/[*+?}]\+/, 'a possessive quantifier'],
];

/**
 * Checks the patterns of an automation at create/update: patterns run on RE2
 * (re2js), whose time is linear in the text times the compiled program, so
 * the programs are bounded (`maxPatternInstructions` for all the patterns of
 * one automation together, counted before compiling so that a pattern which
 * writes out to 100,000 instructions is never compiled); what RE2 cannot run
 * (constructs that need backtracking) is refused with its name rather than
 * failing later at run time. `path` names the field of each condition.
 */
export function checkPatterns(conditions: Condition[], path: (index: number) => string): void {
  let instructions = 0;
  conditions.forEach((c, i) => {
    if (c.operator !== 'matches_regex') return;
    const pattern = c.value;
    if (pattern.length > maxPatternLength)
      throw validationError(path(i), `must be at most ${maxPatternLength} characters`);
    const program = loadProgram(pattern, instructions);
    if ('refused' in program) {
      const construct = program.syntax ? backtrackingConstructs.find(([re]) => re.test(pattern)) : undefined;
      if (construct)
        throw validationError(
          path(i),
          `uses ${construct[1]}, which needs backtracking; patterns run on a linear-time engine (RE2 syntax)`,
        );
      throw validationError(path(i), program.refused);
    }
    instructions += program.instructions;
  });
}

type Program = { re: RE2JS; instructions: number } | { refused: string; syntax?: boolean };

/**
 * The compiled pattern, or why it is refused, given how many instructions
 * the automation's earlier patterns already take. The estimate from the
 * pattern text guards the compile itself (a 100,000-instruction program
 * takes over a second to compile); the compiled size is the rule.
 */
function loadProgram(pattern: string, before: number): Program {
  const room = maxPatternInstructions - before;
  const tooLarge = (size: number) =>
    `compiles to ${size} instructions, and the patterns of one automation may take ${maxPatternInstructions} together${before > 0 ? ` (the earlier ones take ${before})` : ''}: ` +
    'bounded repeats are written out (x{0,1000} is 1,000 copies of x) and matching time grows with the text times the instructions';
  const estimate = expandedSize(pattern);
  // The estimate follows the compiled size closely (within a few instructions) but can read a list of single characters as up to twice its size.
  if (estimate > 2 * room) return { refused: tooLarge(estimate) };
  let re: RE2JS;
  try {
    re = compiled(pattern);
  } catch (err) {
    return {
      refused: `is not a valid RE2 pattern: ${(err as Error).message.replace(/^error parsing regexp: /, '')}`,
      syntax: true,
    };
  }
  if (re.programSize() > room) return { refused: tooLarge(re.programSize()) };
  return { re, instructions: re.programSize() };
}

/**
 * The matches_regex conditions' outcomes by condition index: whether the
 * pattern matches, or why it was not run to the end (which counts as not
 * matching). Patterns stored before the size limit are held to it here: an
 * automation's patterns beyond it are not run.
 */
function patternOutcomes(conditions: Condition[], message: SampleMessage): Array<boolean | string | undefined> {
  const outcomes: Array<boolean | string | undefined> = new Array(conditions.length);
  const runs: Array<{ index: number; re: RE2JS; text: string }> = [];
  let instructions = 0;
  let work = 0;
  conditions.forEach((c, index) => {
    if (c.operator !== 'matches_regex') return;
    const program = loadProgram(c.value, instructions);
    if ('refused' in program) {
      outcomes[index] = `not run: the pattern ${program.refused}`;
      return;
    }
    const text = message[c.field as keyof SampleMessage] ?? '';
    instructions += program.instructions;
    work += text.length * (program.instructions + dfaStateCost);
    runs.push({ index, re: program.re, text });
  });
  if (runs.length === 0) return outcomes;
  if (work <= directWork) {
    for (const r of runs) outcomes[r.index] = r.re.test(r.text);
    return outcomes;
  }
  const found: boolean[] = [];
  deadlineContext.run = () => {
    for (const r of runs) found.push(r.re.test(r.text));
  };
  try {
    runUnderDeadline.runInContext(deadlineContext, { timeout: patternDeadlineMs });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_SCRIPT_EXECUTION_TIMEOUT') throw err;
  } finally {
    deadlineContext.run = undefined;
  }
  runs.forEach((r, k) => {
    outcomes[r.index] = found[k] ?? outOfTime;
  });
  return outcomes;
}

/**
 * Matching time is about (text length) x (instructions + dfaStateCost) x
 * 100 ns at worst, measured on re2js 2.10: the NFA steps every live
 * instruction per character, and a pattern with exponentially many DFA
 * states (`[ab]*a[ab]{20}$`) builds a new state per character at ~10-30 us
 * whatever its size. Up to `directWork` (~10 ms) the patterns run as they
 * are; past it they run under a deadline, since 1,000 instructions on a
 * 20,000-character body can take seconds. Running under a deadline costs
 * ~0.1-0.3 ms (a watchdog thread), too much to pay on every short message.
 */
const dfaStateCost = 300;
const directWork = 100_000;
/** An automation's patterns on one message stop after this; the event loop is never held much longer. */
export const patternDeadlineMs = 20;
export const outOfTime = `not run to the end: matching took longer than ${patternDeadlineMs} ms on this message`;
const runUnderDeadline = new Script('run()');
const deadlineContext = createContext({ run: undefined as undefined | (() => void) });

/** Compiled patterns by source; an automation's patterns are compiled once, not per message. */
const cache = new Map<string, RE2JS>();
const cacheMax = 2_000;

function compiled(pattern: string): RE2JS {
  let re = cache.get(pattern);
  if (!re) {
    re = RE2JS.compile(pattern);
    if (cache.size >= cacheMax) cache.clear();
    cache.set(pattern, re);
  }
  return re;
}

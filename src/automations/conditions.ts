import { RE2JS } from 're2js';
import { validationError } from '../errors.ts';
import { toE164 } from '../phone-number.ts';
import { maxPatternLength, type ActionType, type Condition } from './automation-schemas.ts';

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
export function evaluate(rule: { logic: 'and' | 'or'; conditions: Condition[]; actions: { type: ActionType }[] }, message: SampleMessage): Evaluation {
  const conditionsEvaluated = rule.conditions.map((c) => ({ field: c.field, operator: c.operator, value: c.value, matched: conditionMatches(c, message) }));
  const matched = conditionsEvaluated.length === 0
    || (rule.logic === 'or' ? conditionsEvaluated.some((c) => c.matched) : conditionsEvaluated.every((c) => c.matched));
  return { matched, conditionsEvaluated, actionsWouldExecute: matched ? rule.actions.map((a) => a.type) : [] };
}

/** contains, equals, starts_with, ends_with and is_in ignore case; matches_regex is as written (`(?i)` makes it ignore case). */
export function conditionMatches(c: Condition, message: SampleMessage): boolean {
  const actual = message[c.field as keyof SampleMessage] ?? '';
  const text = actual.toLowerCase();
  const value = c.value.toLowerCase();
  switch (c.operator) {
    case 'contains': return text.includes(value);
    case 'equals': return text === value;
    case 'starts_with': return text.startsWith(value);
    case 'ends_with': return text.endsWith(value);
    case 'matches_regex': return compiled(c.value).test(actual);
    case 'is_in': {
      const key = listKey(actual);
      return c.value.split(',').some((item) => item.trim() !== '' && listKey(item) === key);
    }
    default: return false;
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
 * Checks a pattern at create/update: patterns run on RE2 (re2js), whose time
 * is linear in the input for every pattern, so no pattern can stall a worker;
 * what RE2 cannot run (constructs that need backtracking) is refused here
 * with its name, rather than failing later at run time.
 */
export function checkPattern(pattern: string, path: string): void {
  if (pattern.length > maxPatternLength) throw validationError(path, `must be at most ${maxPatternLength} characters`);
  try {
    compiled(pattern);
  } catch (err) {
    const construct = backtrackingConstructs.find(([re]) => re.test(pattern));
    if (construct) throw validationError(path, `uses ${construct[1]}, which needs backtracking; patterns run on a linear-time engine (RE2 syntax)`);
    throw validationError(path, `is not a valid RE2 pattern: ${(err as Error).message.replace(/^error parsing regexp: /, '')}`);
  }
}

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

/**
 * How many instructions a pattern compiles to, read from its text before
 * anything is compiled. RE2's time is linear in the text times the program,
 * and the program is the pattern with its bounded repeats written out
 * (`x{0,1000}` is a thousand copies of `x`), so a 451-character pattern can
 * compile to 100,000 instructions: 1.5 s to compile and seconds per message.
 * The count follows re2js's own size rule (Parser.calcSize, which re2js does
 * not export) over the pattern's structure: within a few instructions of the
 * compiled size, above it where re2js merges alternatives of single
 * characters. It guards the compile; the compiled size is checked after.
 */
export function expandedSize(pattern: string): number {
  // Each open group: the sizes of its finished branches, the branch being read, its last atom (what a quantifier repeats).
  type Group = { branches: number[]; branch: number; last: number; capture: boolean };
  const stack: Group[] = [];
  let group: Group = { branches: [], branch: 0, last: 0, capture: false };
  const atom = (size: number) => {
    group.branch += size;
    group.last = size;
  };
  const repeat = (size: number) => {
    group.branch += size - group.last;
    group.last = size;
  };
  const close = (g: Group) => {
    const branches = [...g.branches, g.branch];
    return branches.reduce((a, b) => a + b, 0) + branches.length - 1 + (g.capture ? 2 : 0);
  };
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i]!;
    if (c === '\\') {
      const next = pattern[i + 1];
      if (next === 'Q') {
        const end = pattern.indexOf('\\E', i + 2);
        const quoted = end < 0 ? pattern.length - i - 2 : end - i - 2;
        for (let k = 0; k < quoted; k++) atom(1);
        i = end < 0 ? pattern.length : end + 2;
        continue;
      }
      i += 2;
      if ((next === 'p' || next === 'P' || next === 'x') && pattern[i] === '{') i = skipPast(pattern, i, '}');
      else if (next === 'p' || next === 'P') i += 1;
      atom(1);
    } else if (c === '[') {
      i = classEnd(pattern, i);
      atom(1);
    } else if (c === '(') {
      if (pattern[i + 1] === '?' && /^\(\?[a-zA-Z-]*\)/.test(pattern.slice(i, i + 12))) {
        i = skipPast(pattern, i, ')'); // flags for the rest of the group: no instructions
        continue;
      }
      const capture =
        pattern[i + 1] !== '?' ||
        pattern[i + 2] === 'P' ||
        (pattern[i + 2] === '<' && pattern[i + 3] !== '=' && pattern[i + 3] !== '!');
      stack.push(group);
      group = { branches: [], branch: 0, last: 0, capture };
      i = pattern[i + 1] === '?' ? skipGroupPrefix(pattern, i) : i + 1;
    } else if (c === ')') {
      const size = close(group);
      group = stack.pop() ?? { branches: [], branch: 0, last: 0, capture: false };
      atom(size);
      i++;
    } else if (c === '|') {
      group.branches.push(group.branch);
      group.branch = 0;
      group.last = 0;
      i++;
    } else if (c === '*') {
      repeat(2 + group.last);
      i += pattern[i + 1] === '?' ? 2 : 1;
    } else if (c === '+' || c === '?') {
      repeat(1 + group.last);
      i += pattern[i + 1] === '?' ? 2 : 1;
    } else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(i, i + 24));
      if (!m) {
        atom(1);
        i++;
        continue;
      }
      const min = Math.min(Number(m[1]), 1e6);
      const max = m[2] === undefined ? min : m[3] === '' ? -1 : Math.min(Number(m[3]), 1e6);
      const sub = group.last;
      repeat(max === -1 ? (min === 0 ? 2 + sub : 1 + min * sub) : max * sub + Math.max(0, max - min));
      i += m[0].length + (pattern[i + m[0].length] === '?' ? 1 : 0);
    } else {
      atom(1);
      i++;
    }
  }
  while (stack.length > 0) {
    const size = close(group);
    group = stack.pop()!;
    atom(size);
  }
  return Math.max(1, close(group));
}

function skipPast(pattern: string, from: number, char: string): number {
  const end = pattern.indexOf(char, from);
  return end < 0 ? pattern.length : end + 1;
}

/** `(?:`, `(?i:`, `(?P<name>`, `(?<name>`: the index just after the prefix. */
function skipGroupPrefix(pattern: string, from: number): number {
  const named = /^\(\?P?<[^>]*>/.exec(pattern.slice(from, from + 80));
  if (named) return from + named[0].length;
  const flags = /^\(\?[a-zA-Z-]*:/.exec(pattern.slice(from, from + 12));
  return flags ? from + flags[0].length : from + 2;
}

/** The index just after a character class: a `]` first (or after `^`) is a member, `[:name:]` and escapes are skipped whole. */
function classEnd(pattern: string, from: number): number {
  let i = from + 1;
  if (pattern[i] === '^') i++;
  if (pattern[i] === ']') i++;
  while (i < pattern.length && pattern[i] !== ']') {
    if (pattern[i] === '\\') {
      const next = pattern[i + 1];
      i += 2;
      if ((next === 'p' || next === 'P' || next === 'x') && pattern[i] === '{') i = skipPast(pattern, i, '}');
    } else if (/^\[:\^?[a-z]+:\]/.test(pattern.slice(i, i + 16))) {
      i = pattern.indexOf(':]', i) + 2;
    } else {
      i++;
    }
  }
  return i + 1;
}

import { appendFileSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Every answer the integration suites get through `request()` is appended
 * here, so the contract test (test/integration/zz-api-contract.test.ts,
 * last in the sorted run) can check each against the OpenAPI document. The
 * file is per test run: test files are child processes of one runner, and
 * the runner's pid names it.
 */
export interface RecordedAnswer {
  method: string;
  /** Without the query string. */
  path: string;
  status: number;
  contentType: string | null;
  /** Parsed JSON, or the text; absent when the body was too large to keep. */
  body?: unknown;
  bodyOmitted?: boolean;
}

const filePrefix = 'relaybox-answers-';
const answersFile = join(tmpdir(), `${filePrefix}${process.ppid}.ndjson`);
/** Exports of thousands of rows are checked by their own suite; keeping them would only slow the contract test. */
const maxKeptBodyChars = 256 * 1024;

export function recordAnswer(a: {
  method: string;
  path: string;
  status: number;
  contentType: string | null;
  body: unknown;
  text: string;
}): void {
  const entry: RecordedAnswer = {
    method: a.method.toUpperCase(),
    path: a.path.split('?')[0]!,
    status: a.status,
    contentType: a.contentType,
  };
  if (a.text.length <= maxKeptBodyChars) entry.body = a.body;
  else entry.bodyOmitted = true;
  appendFileSync(answersFile, JSON.stringify(entry) + '\n');
}

/** The answers recorded so far in this test run; the file is removed, and so are those of runs that ended without reading theirs. */
export function takeRecordedAnswers(): RecordedAnswer[] {
  let lines: string[] = [];
  try {
    lines = readFileSync(answersFile, 'utf8').split('\n').filter(Boolean);
  } catch {
    // nothing recorded in this run
  }
  rmSync(answersFile, { force: true });
  for (const name of readdirSync(tmpdir())) {
    const pid = Number(name.slice(filePrefix.length).split('.')[0]);
    if (name.startsWith(filePrefix) && pid > 0 && !processAlive(pid)) rmSync(join(tmpdir(), name), { force: true });
  }
  return lines.map((line) => JSON.parse(line) as RecordedAnswer);
}

/** Whether a process with this id runs (one we may not signal runs too). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

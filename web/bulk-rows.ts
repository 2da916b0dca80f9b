import { recipientOf, recipientProblem } from '../src/messages/recipient-rules.ts';

/** As `maxBodyChars` (src/messages/messages.routes.ts) and `maxJobMessages` (src/jobs/job-schemas.ts); a unit test keeps them equal. */
export const limits = { bodyChars: 10_000, toChars: 320, jobMessages: 10_000 } as const;

/** One row of an upload as the preview shows it: `line` is where it starts in the file (1 = the first line). */
export interface PreviewRow {
  line: number;
  to: string;
  body: string;
  problems: string[];
}

export interface ParsedUpload {
  rows: PreviewRow[];
  /** A problem with the file as a whole (no header, not a JSON array): no rows then. */
  error?: string;
}

/** Checks a row as the API checks a bulk entry (recipient rule, body required, lengths). */
export function checkRow(to: string, body: string): string[] {
  const problems: string[] = [];
  if (to.trim() === '') problems.push('to is empty');
  else if (to.length > limits.toChars) problems.push(`to is longer than ${limits.toChars} characters`);
  else {
    const recipient = recipientOf(to);
    if (!recipient) problems.push(`to ${recipientProblem(to)}`);
    else if (recipient.kind === 'group')
      problems.push('to: a contact group is not a recipient of a bulk job; list its members');
  }
  if (body === '') problems.push('body is empty');
  else if (codePoints(body) > limits.bodyChars)
    problems.push(`body is longer than ${limits.bodyChars.toLocaleString('en')} characters`);
  return problems;
}

/** The recipient as the API stores it (E.164, lower-case email), or as written when it is not valid. */
export function storedRecipient(to: string): string {
  const recipient = recipientOf(to);
  return recipient && recipient.kind !== 'group' ? recipient.participant : to;
}

function codePoints(text: string): number {
  if (text.length <= limits.bodyChars) return text.length;
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** Splits CSV text into records (RFC 4180: quoted fields with "" escapes, commas and line breaks inside quotes; CRLF, LF or CR). */
export function csvRecords(text: string): Array<{ line: number; fields: string[] }> {
  const records: Array<{ line: number; fields: string[] }> = [];
  let fields: string[] = [];
  let field = '';
  let quoted = false;
  let line = 1;
  let recordLine = 1;
  let i = 0;
  const endRecord = () => {
    fields.push(field);
    // A blank line is no record.
    if (fields.length > 1 || fields[0] !== '') records.push({ line: recordLine, fields });
    fields = [];
    field = '';
  };
  while (i < text.length) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i += 2;
          continue;
        }
        quoted = false;
      } else {
        if (c === '\n' || (c === '\r' && text[i + 1] !== '\n')) line++;
        field += c;
      }
      i++;
      continue;
    }
    if (c === '"' && field === '') quoted = true;
    else if (c === ',') {
      fields.push(field);
      field = '';
    } else if (c === '\r' || c === '\n') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      endRecord();
      line++;
      recordLine = line;
    } else field += c;
    i++;
  }
  if (field !== '' || fields.length > 0) endRecord();
  return records;
}

/** A CSV upload: a header row naming `to` and `body` (any order, other columns ignored), UTF-8 with or without a BOM. */
export function parseCsv(text: string): ParsedUpload {
  const records = csvRecords(text.replace(/^\uFEFF/, ''));
  const header = records.shift();
  if (!header) return { rows: [], error: 'the file is empty' };
  const names = header.fields.map((f) => f.trim().toLowerCase());
  const toAt = names.indexOf('to');
  const bodyAt = names.indexOf('body');
  if (toAt < 0 || bodyAt < 0)
    return { rows: [], error: 'the first row must be a header naming the columns to and body' };
  return {
    rows: records.map(({ line, fields }) => {
      const to = fields[toAt] ?? '';
      const body = fields[bodyAt] ?? '';
      return { line, to, body, problems: checkRow(to, body) };
    }),
  };
}

/** A JSON upload: an array of `{to, body}` objects. */
export function parseJsonRows(text: string): ParsedUpload {
  let value: unknown;
  try {
    value = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (err) {
    return { rows: [], error: `the file is not valid JSON (${err instanceof Error ? err.message : 'parse error'})` };
  }
  if (!Array.isArray(value)) return { rows: [], error: 'the JSON must be an array of {"to", "body"} objects' };
  return {
    rows: value.map((entry, i) => {
      if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
        return { line: i + 1, to: '', body: '', problems: ['the entry is not an object'] };
      const { to, body } = entry as Record<string, unknown>;
      const problems: string[] = [];
      if (typeof to !== 'string') problems.push('to must be a string');
      if (body !== undefined && typeof body !== 'string') problems.push('body must be a string');
      const toText = typeof to === 'string' ? to : '';
      const bodyText = typeof body === 'string' ? body : '';
      return {
        line: i + 1,
        to: toText,
        body: bodyText,
        problems: problems.length > 0 ? problems : checkRow(toText, bodyText),
      };
    }),
  };
}

/** Picks the parser from the file name, or from the first character when the name says neither. */
export function parseUpload(name: string, text: string): ParsedUpload {
  const lower = name.toLowerCase();
  if (lower.endsWith('.json')) return parseJsonRows(text);
  if (lower.endsWith('.csv')) return parseCsv(text);
  return text
    .replace(/^\uFEFF/, '')
    .trimStart()
    .startsWith('[')
    ? parseJsonRows(text)
    : parseCsv(text);
}

export function summarize(rows: PreviewRow[]): { valid: number; invalid: number } {
  const invalid = rows.filter((r) => r.problems.length > 0).length;
  return { valid: rows.length - invalid, invalid };
}

/** A CSV field, quoted when it must be (RFC 4180). */
export function csvField(value: string): string {
  return /[",\r\n]/.test(value) || /^\s|\s$/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

export function toCsv(header: string[], rows: string[][]): string {
  return [header, ...rows].map((r) => r.map(csvField).join(',')).join('\r\n') + '\r\n';
}

import { AppError } from '../errors.ts';
import { contactFields, e164, listFields, type ContactField, type ContactInput } from './contact-schemas.ts';

/**
 * The CSV form of a contact, shared by import and export: a header row with
 * the field names, lists joined with `;`, and spreadsheet formula escaping.
 */
export const csvColumns: readonly ContactField[] = contactFields;
export const csvListSeparator = ';';

const isListField = (field: ContactField) => (listFields as readonly string[]).includes(field);

/**
 * A cell a spreadsheet would run as a formula starts with one of these. The
 * export puts a `'` before such a cell (OWASP "CSV injection"); leading quotes
 * count too, so that a value which itself starts with `'=` survives the round
 * trip: escaping adds exactly one `'`, unescaping takes exactly one away.
 */
const formulaStart = /^'*[=+\-@\t\r]/;
const escapedFormula = /^'+[=+\-@\t\r]/;

/** Phone numbers are exempt: a cell of E.164 numbers holds only `+`, digits and `;`, which no spreadsheet runs. */
function isPhoneList(cell: string): boolean {
  return cell.split(csvListSeparator).every((part) => e164.test(part));
}

export function escapeCell(cell: string): string {
  return formulaStart.test(cell) && !isPhoneList(cell) ? `'${cell}` : cell;
}

export function unescapeCell(cell: string): string {
  return escapedFormula.test(cell) ? cell.slice(1) : cell;
}

/** One CSV record of a contact, in column order. */
export function toCsvRecord(fields: ContactInput): string[] {
  return csvColumns.map((field) => {
    const value = fields[field];
    if (value === undefined) return '';
    return escapeCell(Array.isArray(value) ? value.join(csvListSeparator) : value);
  });
}

/** The columns of an import file's header row; names match case-insensitively. Throws a 400 for a header no contact fits. */
export function parseHeader(cells: string[]): ContactField[] {
  const known = new Map(csvColumns.map((c) => [c.toLowerCase(), c]));
  const columns: ContactField[] = [];
  for (const cell of cells) {
    const name = cell.trim();
    const column = known.get(name.toLowerCase());
    if (!column) throw headerError(`unknown column "${name.slice(0, 100)}"; the columns are ${csvColumns.join(', ')}`);
    if (columns.includes(column)) throw headerError(`the column ${column} appears twice`);
    columns.push(column);
  }
  if (!columns.includes('firstName')) throw headerError('the header row needs a firstName column');
  return columns;
}

/** True when a line looks like an import header row: every cell a contact field. */
export function looksLikeHeader(line: string): boolean {
  const known = new Set(csvColumns.map((c) => c.toLowerCase()));
  return line.split(',').every((cell) => known.has(cell.trim().replace(/^"|"$/g, '').toLowerCase()));
}

/**
 * A data record as the input of a create: empty cells are absent, lists are
 * split on `;` with blanks dropped. The result is validated like a create body.
 */
export function recordToInput(
  record: string[],
  columns: ContactField[],
): { input: Record<string, unknown> } | { error: string } {
  if (record.length > columns.length)
    return { error: `the row has ${record.length} cells, the header row ${columns.length}` };
  const input: Record<string, unknown> = {};
  columns.forEach((field, i) => {
    const cell = unescapeCell(record[i] ?? '');
    if (cell === '') return;
    input[field] = isListField(field)
      ? cell
          .split(csvListSeparator)
          .map((p) => p.trim())
          .filter((p) => p !== '')
      : cell;
  });
  return { input };
}

function headerError(message: string): AppError {
  return new AppError('validation_error', `file: ${message}`, { details: [{ path: '/file', message }] });
}

import type { Readable } from 'node:stream';
import { CsvError, parse } from 'csv-parse';
import { maxJsonDepth } from '../config.ts';
import { AppError } from '../errors.ts';
import { jsonNestsDeeperThan } from '../json-depth.ts';
import { parseHeader, recordToInput } from './contact-csv.ts';
import type { ContactField } from './contact-schemas.ts';
import type { ImportFormat } from './contact-upload.ts';

/** One data row of an import file, counted from 1: the unvalidated input, or why it could not be read. */
export type ImportRow = { row: number; input: unknown } | { row: number; error: string };

export function importRows(format: ImportFormat, file: Readable): AsyncGenerator<ImportRow> {
  return format === 'csv' ? csvRows(file) : jsonRows(file);
}

/**
 * The data rows of a CSV file with a header row, parsed as they are read.
 * A row the parser cannot read (a stray quote) becomes an error row and the
 * parser goes on with the next; empty lines are not rows.
 */
async function* csvRows(file: Readable): AsyncGenerator<ImportRow> {
  // csv-parse reports a skipped record through a callback, with the number of records read before it.
  const skipped: Array<{ after: number; message: string }> = [];
  const parser = file.pipe(
    parse({
      bom: true,
      skip_empty_lines: true,
      relax_column_count: true,
      skip_records_with_error: true,
      info: true,
      on_skip: (err: CsvError | undefined) => {
        skipped.push({ after: Number(err?.records ?? 0), message: csvMessage(err) });
        return undefined;
      },
    }),
  );
  let columns: ContactField[] | undefined;
  let row = 0;
  const skippedBefore = function* (records: number): Generator<ImportRow> {
    while (skipped.length > 0 && skipped[0]!.after < records) {
      const skip = skipped.shift()!;
      if (!columns) throw fileError(`the header row cannot be read: ${skip.message}`);
      yield { row: ++row, error: skip.message };
    }
  };
  try {
    for await (const { record, info } of parser as AsyncIterable<{ record: string[]; info: { records: number } }>) {
      yield* skippedBefore(info.records);
      if (!columns) {
        columns = parseHeader(record);
        continue;
      }
      row++;
      const mapped = recordToInput(record, columns);
      yield 'error' in mapped ? { row, error: mapped.error } : { row, input: mapped.input };
    }
  } catch (err) {
    if (!(err instanceof CsvError)) throw err;
    if (!columns) throw fileError(`the header row cannot be read: ${csvMessage(err)}`);
    yield { row: ++row, error: csvMessage(err) };
    return;
  }
  yield* skippedBefore(Number.POSITIVE_INFINITY);
  if (!columns) throw fileError('the file is empty: a CSV import needs a header row');
}

/** The elements of a JSON array, each one row. The file is parsed whole: JSON has no rows to stream. */
async function* jsonRows(file: Readable): AsyncGenerator<ImportRow> {
  const chunks: Buffer[] = [];
  for await (const chunk of file) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks);
  if (jsonNestsDeeperThan(text, maxJsonDepth)) throw fileError(`JSON nested deeper than ${maxJsonDepth} levels`);
  let data: unknown;
  try {
    data = JSON.parse(text.toString('utf8').replace(/^\uFEFF/, ''));
  } catch (err) {
    throw fileError(`not valid JSON (${err instanceof Error ? err.message : 'unreadable'})`);
  }
  if (!Array.isArray(data)) throw fileError('a JSON import is an array of contacts');
  for (let i = 0; i < data.length; i++) yield { row: i + 1, input: data[i] };
}

function csvMessage(err: CsvError | undefined): string {
  return err ? `unreadable CSV: ${err.message}` : 'unreadable CSV';
}

function fileError(message: string): AppError {
  return new AppError('validation_error', `file: ${message}`, { details: [{ path: '/file', message }] });
}

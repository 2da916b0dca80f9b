import { stringify } from 'csv-stringify/sync';
import { csvColumns, toCsvRecord } from './contact-csv.ts';
import type { ContactService } from './contact-service.ts';
import { contactFieldsOf, type ContactDoc, type ContactQuery, type TeamScope } from './contact-store.ts';

export type ExportFormat = 'csv' | 'json';

const contentTypes: Record<ExportFormat, string> = {
  csv: 'text/csv; charset=utf-8',
  json: 'application/json; charset=utf-8',
};

/**
 * A streamed export: the store is read a page at a time while the answer is
 * written, so an export of any size holds one page in memory. Both formats
 * carry the import's fields only (no id or timestamps), so an export imports
 * back into the same contacts, in this team or another.
 */
export function exportContacts(
  contacts: ContactService,
  scope: TeamScope,
  query: ContactQuery & { format: ExportFormat },
): { status: 200; headers: Record<string, string>; stream: AsyncIterable<string> } {
  const pages = contacts.pages(scope, query);
  const date = new Date().toISOString().slice(0, 10);
  return {
    status: 200,
    headers: {
      'content-type': contentTypes[query.format],
      'content-disposition': `attachment; filename="contacts-${date}.${query.format}"`,
      'cache-control': 'no-store',
    },
    stream: query.format === 'csv' ? csvChunks(pages) : jsonChunks(pages),
  };
}

/** RFC 4180: CRLF line ends, fields quoted when they hold a comma, a quote or a line break; the header row first. */
export async function* csvChunks(pages: AsyncIterable<ContactDoc[]>): AsyncGenerator<string> {
  const options = { record_delimiter: 'windows' as const, quoted_match: /[\r\n]/ };
  yield stringify([[...csvColumns]], options);
  for await (const docs of pages)
    yield stringify(
      docs.map((doc) => toCsvRecord(contactFieldsOf(doc))),
      options,
    );
}

/** A JSON array, one contact a line. */
export async function* jsonChunks(pages: AsyncIterable<ContactDoc[]>): AsyncGenerator<string> {
  yield '[';
  let first = true;
  for await (const docs of pages) {
    const lines = docs.map((doc) => JSON.stringify(contactFieldsOf(doc)));
    yield (first ? '\n' : ',\n') + lines.join(',\n');
    first = false;
  }
  yield first ? ']\n' : '\n]\n';
}

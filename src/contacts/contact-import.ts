import { AppError } from '../errors.ts';
import { nowIso } from '../ids.ts';
import { compileValidator } from '../http/validation.ts';
import type { ImportRow } from './contact-import-rows.ts';
import { contactCreateBody, type ContactChanges, type ContactInput } from './contact-schemas.ts';
import {
  applyChanges,
  contactUpdate,
  newContactDoc,
  reachableByFilter,
  type ContactCollections,
  type ContactDoc,
  type TeamScope,
} from './contact-store.ts';

export interface ImportResult {
  created: number;
  updated: number;
  failed: number;
  errors: Array<{ row: number; error: string }>;
}

/** Rows looked up and written together: one query finds the contacts a batch matches. */
const batchSize = 200;
/** `failed` counts every broken row; the answer lists the first ones. */
export const maxReportedErrors = 1_000;

const validateRow = compileValidator(contactCreateBody, 'body');

/**
 * Imports rows into a team's contacts. A row is validated like a create; a
 * row sharing a phone number or an email address (case-insensitive) with a
 * contact updates it with the row's fields, otherwise it creates one. Rows
 * apply in file order, so a later row can update what an earlier one created,
 * and importing the same file again creates nothing. A broken row is counted
 * and reported; it never stops the others.
 */
export class ContactImporter {
  constructor(private readonly db: ContactCollections) {}

  async importRows(scope: TeamScope, rows: AsyncIterable<ImportRow>): Promise<ImportResult> {
    const result: ImportResult = { created: 0, updated: 0, failed: 0, errors: [] };
    let batch: ContactInput[] = [];
    for await (const row of rows) {
      const checked = 'error' in row ? row : check(row.row, row.input);
      if ('error' in checked) {
        result.failed++;
        if (result.errors.length < maxReportedErrors) result.errors.push({ row: checked.row, error: checked.error });
        continue;
      }
      batch.push(checked.input);
      if (batch.length >= batchSize) {
        await this.writeBatch(scope, batch, result);
        batch = [];
      }
    }
    await this.writeBatch(scope, batch, result);
    return result;
  }

  private async writeBatch(scope: TeamScope, batch: ContactInput[], result: ImportResult): Promise<void> {
    if (batch.length === 0) return;
    const filter = reachableByFilter(
      batch.flatMap((input) => input.phoneNumbers ?? []),
      batch.flatMap((input) => input.emailAddresses ?? []),
    );
    const existing = filter ? await this.db.contacts.find(scope, filter, { sort: { createdAt: 1, id: 1 } }) : [];
    const matcher = new ContactMatcher(existing);
    const now = nowIso();
    const created: ContactDoc[] = [];
    const changes = new Map<string, ContactChanges>();
    for (const input of batch) {
      const match = matcher.find(input);
      if (!match) {
        const doc = newContactDoc(scope, input, now);
        created.push(doc);
        matcher.add(doc);
        result.created++;
        continue;
      }
      matcher.update(match, input, now);
      if (!created.includes(match)) changes.set(match.id, { ...changes.get(match.id), ...input });
      result.updated++;
    }
    await this.db.contacts.insertMany(scope, created);
    for (const [id, change] of changes) await this.db.contacts.updateOne(scope, { id }, contactUpdate(change, now));
  }
}

function check(row: number, input: unknown): { row: number; input: ContactInput } | { row: number; error: string } {
  try {
    return { row, input: validateRow(input) as ContactInput };
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    const details = err.details?.map((d) => `${d.path || 'row'}: ${d.message}`).join('; ');
    return { row, error: details || err.message };
  }
}

/** The contacts of a batch by phone number and lower-cased email, kept current as rows change them; the oldest owner of an address wins. */
class ContactMatcher {
  private readonly byPhone = new Map<string, ContactDoc>();
  private readonly byEmail = new Map<string, ContactDoc>();

  constructor(contacts: ContactDoc[]) {
    for (const doc of contacts) this.add(doc);
  }

  find(input: ContactInput): ContactDoc | undefined {
    for (const phone of input.phoneNumbers ?? []) {
      const doc = this.byPhone.get(phone);
      if (doc) return doc;
    }
    for (const email of input.emailAddresses ?? []) {
      const doc = this.byEmail.get(email.toLowerCase());
      if (doc) return doc;
    }
    return undefined;
  }

  add(doc: ContactDoc): void {
    for (const phone of doc.phoneNumbers) if (!this.byPhone.has(phone)) this.byPhone.set(phone, doc);
    for (const email of doc.emailKeys) if (!this.byEmail.has(email)) this.byEmail.set(email, doc);
  }

  update(doc: ContactDoc, input: ContactInput, now: string): void {
    for (const [key, owner] of this.byPhone) if (owner === doc) this.byPhone.delete(key);
    for (const [key, owner] of this.byEmail) if (owner === doc) this.byEmail.delete(key);
    applyChanges(doc, input, now);
    this.add(doc);
  }
}

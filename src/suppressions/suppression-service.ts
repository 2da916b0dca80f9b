import { parse } from 'csv-parse/sync';
import { AppError, pointer, validationError } from '../errors.ts';
import { paginate, pageWindow } from '../http/pagination.ts';
import { nowIso } from '../ids.ts';
import { recipientOf } from '../messages/recipient-rules.ts';
import { foldKeyword } from './opt-out-keywords.ts';
import { maxReasonChars, maxSuppressions } from './suppression-schemas.ts';
import type { SuppressionList } from './suppression-list.ts';
import { suppressionIdOf, type SuppressionCollections, type SuppressionDoc } from './suppression-store.ts';

/** A handle as the send path checks it (E.164, or an email lower-cased), or undefined for anything else. */
export function handleOf(raw: string): string | undefined {
  const recipient = recipientOf(raw);
  return recipient?.kind === 'phone' || recipient?.kind === 'email' ? recipient.participant : undefined;
}

const handleRule = 'must be a phone number in international form (+ and country code) or an email address';

/** At most this many unreadable rows are listed in an import's answer. */
const maxListedErrors = 100;

export function publicSuppression(doc: SuppressionDoc) {
  return {
    id: doc.id,
    handle: doc.handle,
    reason: doc.reason,
    source: doc.source,
    createdAt: doc.createdAt,
    updatedAt: doc.updatedAt,
  };
}

/** The suppression list's API: every read and write in the caller's organization. */
export class SuppressionService {
  constructor(private readonly deps: { db: SuppressionCollections; list: SuppressionList }) {}

  async list(tenantId: string, q: { page: number; limit: number; handle?: string }) {
    const filter = q.handle === undefined ? {} : { handle: handleOf(q.handle) ?? q.handle.trim() };
    const { skip } = pageWindow(q.page, q.limit);
    const [docs, total] = await Promise.all([
      this.deps.db.suppressions.find({ tenantId }, filter, { sort: { createdAt: -1, id: -1 }, skip, limit: q.limit }),
      this.deps.db.suppressions.count({ tenantId }, filter),
    ]);
    return paginate(docs.map(publicSuppression), total, q.page, q.limit);
  }

  /** 201 with the new entry, or 200 with the one already on the list (left as it was). */
  async add(tenantId: string, input: { handle: string; reason?: string }) {
    const handle = handleOf(input.handle);
    if (!handle) throw validationError('/handle', handleRule);
    const [added] = await this.addChecked(tenantId, [{ handle, reason: input.reason ?? null }]);
    if (added) return { status: 201 as const, body: publicSuppression(added) };
    const stored = await this.deps.db.suppressions.findOne({ tenantId }, { id: suppressionIdOf(tenantId, handle) });
    if (!stored) throw new AppError('conflict', 'the handle was taken off the list while it was added; try again');
    return { status: 200 as const, body: publicSuppression(stored) };
  }

  async remove(tenantId: string, raw: string): Promise<void> {
    const handle = handleOf(raw);
    if (!handle) throw validationError(pointer('handle'), handleRule);
    if (!(await this.deps.list.remove(tenantId, handle, 'api')))
      throw new AppError('not_found', `${handle} is not on the suppression list`);
  }

  /**
   * A CSV file with a header row naming `handle` and, optionally, `reason`
   * (other columns are ignored). All of it is read and checked first: a
   * file that would take the list past its limit adds nothing.
   */
  async importCsv(tenantId: string, file: Buffer) {
    let records: string[][];
    try {
      records = parse(file, { bom: true, skip_empty_lines: true, relax_column_count: true, trim: true });
    } catch (err) {
      throw validationError('/file', `is not readable CSV: ${(err as Error).message.slice(0, 200)}`);
    }
    const header = (records.shift() ?? []).map((h) => h.toLowerCase());
    const handleColumn = header.indexOf('handle');
    const reasonColumn = header.indexOf('reason');
    if (handleColumn < 0)
      throw validationError('/file', 'the header row must name a `handle` column (and may name `reason`)');
    if (records.length > maxSuppressions)
      throw validationError('/file', `has more than ${maxSuppressions} rows (the most a list may hold)`);
    const errors: Array<{ row: number; message: string }> = [];
    const wanted = new Map<string, string | null>();
    records.forEach((record, i) => {
      const handle = handleOf(record[handleColumn] ?? '');
      const reason = reasonColumn >= 0 ? (record[reasonColumn] ?? '').slice(0, maxReasonChars) || null : null;
      if (handle) {
        if (!wanted.has(handle)) wanted.set(handle, reason);
        return;
      }
      if (errors.length < maxListedErrors) errors.push({ row: i + 1, message: `handle ${handleRule}` });
    });
    const added = await this.addChecked(
      tenantId,
      [...wanted].map(([handle, reason]) => ({ handle, reason })),
      'import',
    );
    return { added: added.length, alreadyListed: wanted.size - added.length, errors };
  }

  private async addChecked(
    tenantId: string,
    entries: Array<{ handle: string; reason: string | null }>,
    source: 'api' | 'import' = 'api',
  ) {
    const held = await this.deps.db.suppressions.count({ tenantId }, {});
    if (held + entries.length > maxSuppressions) {
      const listed = await this.deps.db.suppressions.count(
        { tenantId },
        { handle: { $in: entries.map((e) => e.handle) } },
      );
      if (held + entries.length - listed > maxSuppressions)
        throw validationError(
          source === 'import' ? '/file' : '/handle',
          `the suppression list holds at most ${maxSuppressions} handles (it has ${held})`,
        );
    }
    return this.deps.list.add(
      tenantId,
      entries.map((e) => ({ ...e, source })),
    );
  }

  async settings(tenantId: string) {
    const doc = await this.deps.db.optOutSettings.findOne({ tenantId }, { id: tenantId });
    return {
      stopKeywords: doc?.stopKeywords ?? [],
      helpText: doc?.helpText ?? null,
      updatedAt: doc?.updatedAt ?? null,
    };
  }

  /** Only the given fields change; every process uses the new settings before this answers. */
  async saveSettings(tenantId: string, input: { stopKeywords?: string[]; helpText?: string | null }) {
    const now = nowIso();
    const set: Record<string, unknown> = { updatedAt: now };
    // A field is set by $set or by $setOnInsert, never both (MongoDB refuses an update naming a path twice).
    const onInsert: Record<string, unknown> = { createdAt: now };
    if (input.stopKeywords !== undefined) set.stopKeywords = [...new Set(input.stopKeywords.map(foldKeyword))];
    else onInsert.stopKeywords = [];
    if (input.helpText !== undefined) set.helpText = input.helpText;
    else onInsert.helpText = null;
    const doc = await this.deps.db.optOutSettings.updateOne(
      { tenantId },
      { id: tenantId },
      { $set: set, $setOnInsert: onInsert },
      { upsert: true },
    );
    await this.deps.list.settingsChanged(tenantId);
    return { stopKeywords: doc?.stopKeywords ?? [], helpText: doc?.helpText ?? null, updatedAt: doc?.updatedAt ?? now };
  }
}

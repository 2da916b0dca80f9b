import { randomUUID } from 'node:crypto';
import { appendFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { msToAppleNs } from './apple-time.ts';
import { encodeAttributedBody } from './attributed-body.ts';
import { normalizeHandle, type MessageSender, type OutgoingMessage, type SendOutcome } from './message-sender.ts';
import { SqliteCli, sqlLiteral as q } from './sqlite-cli.ts';

/**
 * Plays the Messages app against a chat.db file so the real reading path runs
 * on any machine: the tables and columns below are the ones of macOS's
 * chat.db that ChatDbReader touches, with the same names, types and WAL
 * journal. `relaybox_simulator` is the simulator's own control table (pending
 * injected failures); the reader never reads it.
 */
const schema = `
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS handle (ROWID INTEGER PRIMARY KEY AUTOINCREMENT UNIQUE, id TEXT NOT NULL, country TEXT,
  service TEXT NOT NULL, uncanonicalized_id TEXT, person_centric_id TEXT, UNIQUE (id, service));
CREATE TABLE IF NOT EXISTS message (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL, text TEXT,
  handle_id INTEGER DEFAULT 0, subject TEXT, attributedBody BLOB, service TEXT, account TEXT, error INTEGER DEFAULT 0,
  date INTEGER, date_read INTEGER, date_delivered INTEGER, is_delivered INTEGER DEFAULT 0, is_finished INTEGER DEFAULT 0,
  is_from_me INTEGER DEFAULT 0, is_read INTEGER DEFAULT 0, is_sent INTEGER DEFAULT 0, cache_has_attachments INTEGER DEFAULT 0,
  cache_roomnames TEXT, item_type INTEGER DEFAULT 0, associated_message_guid TEXT, associated_message_type INTEGER DEFAULT 0);
CREATE TABLE IF NOT EXISTS chat (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL, style INTEGER,
  state INTEGER, account_id TEXT, chat_identifier TEXT, service_name TEXT, room_name TEXT, display_name TEXT);
CREATE TABLE IF NOT EXISTS chat_message_join (chat_id INTEGER REFERENCES chat (ROWID) ON DELETE CASCADE,
  message_id INTEGER REFERENCES message (ROWID) ON DELETE CASCADE, message_date INTEGER DEFAULT 0, PRIMARY KEY (chat_id, message_id));
CREATE TABLE IF NOT EXISTS chat_handle_join (chat_id INTEGER REFERENCES chat (ROWID) ON DELETE CASCADE,
  handle_id INTEGER REFERENCES handle (ROWID) ON DELETE CASCADE, UNIQUE (chat_id, handle_id));
CREATE TABLE IF NOT EXISTS attachment (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL,
  created_date INTEGER DEFAULT 0, filename TEXT, mime_type TEXT, transfer_name TEXT, total_bytes INTEGER DEFAULT 0,
  is_outgoing INTEGER DEFAULT 0);
CREATE TABLE IF NOT EXISTS message_attachment_join (message_id INTEGER REFERENCES message (ROWID) ON DELETE CASCADE,
  attachment_id INTEGER REFERENCES attachment (ROWID) ON DELETE CASCADE, UNIQUE (message_id, attachment_id));
CREATE TABLE IF NOT EXISTS relaybox_simulator (id INTEGER PRIMARY KEY CHECK (id = 1), pending_failures INTEGER NOT NULL DEFAULT 0);
INSERT OR IGNORE INTO relaybox_simulator (id, pending_failures) VALUES (1, 0);
`;

const service = 'iMessage';
/** chat.style: 43 group, 45 one-to-one. */
const chatStyle = { group: 43, direct: 45 } as const;

export interface SimulatorOptions {
  /** Delay before an outgoing row is marked delivered (RELAY_SIM_DELIVERY_MS). */
  deliveryDelayMs?: number;
  /** Delay after delivery before it is marked read; undefined: never (RELAY_SIM_READ_MS). */
  readDelayMs?: number;
  sqlite3Program?: string;
}

/** Opens (creating if absent) a simulated chat.db with the Messages schema. */
export async function createSimulatedChatDb(dbPath: string, sqlite3Program?: string, longLived = false): Promise<SqliteCli> {
  await mkdir(dirname(dbPath), { recursive: true });
  const db = new SqliteCli(dbPath, { readonly: false, longLived, ...(sqlite3Program ? { program: sqlite3Program } : {}) });
  await db.exec(schema);
  return db;
}

/** Where the simulator appends one JSON line per send it performs. */
export function sendLogPath(dbPath: string): string {
  return `${dbPath}.sent.log`;
}

export interface SendLogEntry {
  at: string;
  messageId: string;
  attempt: number;
  to: string;
  rowId: number;
  guid: string;
  error: number;
  attachments: number;
}

export class SimulatedMessagesApp implements MessageSender {
  private readonly timers = new Set<NodeJS.Timeout>();

  private constructor(readonly dbPath: string, private readonly db: SqliteCli, private readonly options: SimulatorOptions) {}

  static async open(dbPath: string, options: SimulatorOptions = {}): Promise<SimulatedMessagesApp> {
    // One sqlite3 program for the app's life: a send is then a few milliseconds, not a process start.
    return new SimulatedMessagesApp(dbPath, await createSimulatedChatDb(dbPath, options.sqlite3Program, true), options);
  }

  /** Writes the outgoing row as Messages would, then marks it delivered (and read) later, unless a failure was injected. */
  async send(message: OutgoingMessage): Promise<SendOutcome> {
    const handle = normalizeHandle(message.to);
    const guid = randomUUID().toUpperCase();
    const now = msToAppleNs(Date.now());
    // changes() is the count of the UPDATE just before the message INSERT: 1 when an injected failure was consumed.
    const [row] = await this.db.query<{ rowId: number; error: number }>(`
BEGIN IMMEDIATE;
${upsertDirectChat(handle)}
UPDATE relaybox_simulator SET pending_failures = pending_failures - 1 WHERE id = 1 AND pending_failures > 0;
INSERT INTO message (guid, text, handle_id, service, error, date, date_read, date_delivered, is_delivered, is_finished, is_from_me, is_read, is_sent, cache_has_attachments)
  VALUES (${q(guid)}, ${q(message.body)}, (SELECT ROWID FROM handle WHERE id = ${q(handle)} AND service = ${q(service)}), ${q(service)},
  changes(), ${now}, 0, 0, 0, 1, 1, 0, 1, ${message.attachmentPaths.length > 0 ? 1 : 0});
${joinChat(`${service};-;${handle}`, guid, now)}
SELECT ROWID AS rowId, error FROM message WHERE guid = ${q(guid)};
COMMIT;`);
    if (!row) throw new Error('simulator: the outgoing row was not written');
    const entry: SendLogEntry = {
      at: new Date().toISOString(), messageId: message.messageId, attempt: message.attempt, to: handle, rowId: row.rowId, guid, error: row.error, attachments: message.attachmentPaths.length,
    };
    await appendFile(sendLogPath(this.dbPath), `${JSON.stringify(entry)}\n`);
    if (row.error === 0) this.later(this.options.deliveryDelayMs ?? 500, () => this.markDelivered(row.rowId));
    return { ok: true };
  }

  /** Stops pending delivered/read updates and the sqlite3 program. */
  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    await this.db.close();
  }

  private async markDelivered(rowId: number): Promise<void> {
    const now = msToAppleNs(Date.now());
    await this.db.exec(`UPDATE message SET is_delivered = 1, date_delivered = ${now} WHERE ROWID = ${rowId};`);
    const readDelayMs = this.options.readDelayMs;
    if (readDelayMs !== undefined) this.later(readDelayMs, () => this.markRead(rowId));
  }

  private async markRead(rowId: number): Promise<void> {
    const now = msToAppleNs(Date.now());
    await this.db.exec(`UPDATE message SET is_read = 1, date_read = ${now} WHERE ROWID = ${rowId};`);
  }

  private later(ms: number, fn: () => Promise<void>): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn().catch((err: unknown) => process.emitWarning(`simulator update failed: ${(err as Error).message}`));
    }, ms);
    this.timers.add(timer);
  }
}

export interface InboundInjection {
  from: string;
  body: string;
  /** Store the body only in `attributedBody` with `text` NULL, as recent macOS often does. */
  attributedBodyOnly?: boolean;
  /** Deliver into a group chat with this identifier instead of the one-to-one chat. */
  groupId?: string;
  /** Local file paths recorded as the message's attachments. */
  attachments?: string[];
}

/** Writes a message "received" from someone, as Messages would. Used by tests and `simulate-inbound`. */
export async function simulateInbound(dbPath: string, message: InboundInjection, sqlite3Program?: string): Promise<{ rowId: number; guid: string }> {
  const db = await createSimulatedChatDb(dbPath, sqlite3Program);
  const handle = normalizeHandle(message.from);
  const guid = randomUUID().toUpperCase();
  const now = msToAppleNs(Date.now());
  const chatGuid = message.groupId ? `${service};+;${message.groupId}` : `${service};-;${handle}`;
  const attachments = message.attachments ?? [];
  const attachmentSql = attachments
    .map((path) => {
      const attachmentGuid = randomUUID().toUpperCase();
      return `INSERT INTO attachment (guid, created_date, filename, transfer_name) VALUES (${q(attachmentGuid)}, ${now}, ${q(path)}, ${q(path.split('/').pop() ?? path)});
INSERT INTO message_attachment_join (message_id, attachment_id) SELECT m.ROWID, a.ROWID FROM message m, attachment a WHERE m.guid = ${q(guid)} AND a.guid = ${q(attachmentGuid)};`;
    })
    .join('\n');
  const text = message.attributedBodyOnly ? null : message.body;
  const blob = message.attributedBodyOnly ? encodeAttributedBody(message.body) : null;
  const [row] = await db.query<{ rowId: number }>(`
BEGIN IMMEDIATE;
${message.groupId ? upsertGroupChat(chatGuid, message.groupId, handle) : upsertDirectChat(handle)}
INSERT INTO message (guid, text, attributedBody, handle_id, service, error, date, date_read, date_delivered, is_delivered, is_finished, is_from_me, is_read, is_sent, cache_has_attachments, cache_roomnames)
  VALUES (${q(guid)}, ${q(text)}, ${q(blob)}, (SELECT ROWID FROM handle WHERE id = ${q(handle)} AND service = ${q(service)}), ${q(service)},
  0, ${now}, 0, 0, 1, 1, 0, 0, 0, ${attachments.length > 0 ? 1 : 0}, ${q(message.groupId ?? null)});
${joinChat(chatGuid, guid, now)}
${attachmentSql}
SELECT ROWID AS rowId FROM message WHERE guid = ${q(guid)};
COMMIT;`);
  if (!row) throw new Error('simulator: the inbound row was not written');
  return { rowId: row.rowId, guid };
}

/** Makes the next `count` sends of any simulator on this file fail (error = 1). */
export async function simulateFailures(dbPath: string, count: number, sqlite3Program?: string): Promise<void> {
  if (!Number.isSafeInteger(count) || count < 0) throw new Error(`count must be a non-negative integer, got ${count}`);
  const db = await createSimulatedChatDb(dbPath, sqlite3Program);
  await db.exec(`UPDATE relaybox_simulator SET pending_failures = pending_failures + ${count} WHERE id = 1;`);
}

function upsertDirectChat(handle: string): string {
  const chatGuid = `${service};-;${handle}`;
  return `INSERT OR IGNORE INTO handle (id, service, uncanonicalized_id) VALUES (${q(handle)}, ${q(service)}, ${q(handle)});
INSERT OR IGNORE INTO chat (guid, style, state, chat_identifier, service_name) VALUES (${q(chatGuid)}, ${chatStyle.direct}, 3, ${q(handle)}, ${q(service)});
INSERT OR IGNORE INTO chat_handle_join (chat_id, handle_id) SELECT c.ROWID, h.ROWID FROM chat c, handle h
  WHERE c.guid = ${q(chatGuid)} AND h.id = ${q(handle)} AND h.service = ${q(service)};`;
}

function upsertGroupChat(chatGuid: string, groupId: string, handle: string): string {
  return `INSERT OR IGNORE INTO handle (id, service, uncanonicalized_id) VALUES (${q(handle)}, ${q(service)}, ${q(handle)});
INSERT OR IGNORE INTO chat (guid, style, state, chat_identifier, service_name, room_name) VALUES (${q(chatGuid)}, ${chatStyle.group}, 3, ${q(groupId)}, ${q(service)}, ${q(groupId)});
INSERT OR IGNORE INTO chat_handle_join (chat_id, handle_id) SELECT c.ROWID, h.ROWID FROM chat c, handle h
  WHERE c.guid = ${q(chatGuid)} AND h.id = ${q(handle)} AND h.service = ${q(service)};`;
}

function joinChat(chatGuid: string, messageGuid: string, date: bigint): string {
  return `INSERT INTO chat_message_join (chat_id, message_id, message_date)
  SELECT c.ROWID, m.ROWID, ${date} FROM chat c, message m WHERE c.guid = ${q(chatGuid)} AND m.guid = ${q(messageGuid)};`;
}

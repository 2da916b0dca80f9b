import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { appendFile, mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { msToAppleNs } from './apple-time.ts';
import { encodeAttributedBody } from './attributed-body.ts';
import { normalizeHandle, type MessageSender, type OutgoingMessage, type SendOutcome } from './message-sender.ts';
import { openSqliteFile, type SqliteDatabase, type SqliteStatement } from './sqlite-file.ts';

/**
 * Plays the Messages app against a chat.db file so the real reading path runs
 * on any machine: the tables and columns below are the ones of macOS's
 * chat.db that ChatDbReader touches, with the same names, types and WAL
 * journal. The `relaybox_simulator*` tables are the simulator's own controls
 * (a stall, the faults waiting for the next sends, the recipients reached by
 * SMS only); the reader never reads them.
 */
const schema = `
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS handle (ROWID INTEGER PRIMARY KEY AUTOINCREMENT UNIQUE, id TEXT NOT NULL, country TEXT,
  service TEXT NOT NULL, uncanonicalized_id TEXT, person_centric_id TEXT, UNIQUE (id, service));
CREATE TABLE IF NOT EXISTS message (ROWID INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT UNIQUE NOT NULL, text TEXT,
  handle_id INTEGER DEFAULT 0, subject TEXT, attributedBody BLOB, service TEXT, account TEXT, error INTEGER DEFAULT 0,
  date INTEGER, date_read INTEGER, date_delivered INTEGER, is_delivered INTEGER DEFAULT 0, is_finished INTEGER DEFAULT 0,
  is_from_me INTEGER DEFAULT 0, is_read INTEGER DEFAULT 0, is_sent INTEGER DEFAULT 0, cache_has_attachments INTEGER DEFAULT 0,
  cache_roomnames TEXT, item_type INTEGER DEFAULT 0, associated_message_guid TEXT, associated_message_type INTEGER DEFAULT 0,
  associated_message_emoji TEXT, thread_originator_guid TEXT, thread_originator_part TEXT, date_edited INTEGER DEFAULT 0,
  date_retracted INTEGER DEFAULT 0, group_title TEXT, group_action_type INTEGER DEFAULT 0, other_handle INTEGER DEFAULT 0);
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
CREATE TABLE IF NOT EXISTS relaybox_simulator (id INTEGER PRIMARY KEY CHECK (id = 1), stalled INTEGER NOT NULL DEFAULT 0);
INSERT OR IGNORE INTO relaybox_simulator (id) VALUES (1);
CREATE TABLE IF NOT EXISTS relaybox_simulator_faults (id INTEGER PRIMARY KEY AUTOINCREMENT, error INTEGER NOT NULL DEFAULT 0,
  never_deliver INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS relaybox_simulator_sms_only (handle TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS relaybox_simulator_no_imessage (handle TEXT PRIMARY KEY);
`;

/** Messages' error code on a row sent over iMessage to a recipient without it. */
const notRegisteredError = 22;

/** The services Messages names on its rows. */
const services = { iMessage: 'iMessage', sms: 'SMS' } as const;
/** The iMessage account the simulated Mac is signed in to, as Messages writes it in `message.account`. */
export const simulatedAccount = 'e:relay@simulator.invalid';
/** chat.style: 43 group, 45 one-to-one. */
const chatStyle = { group: 43, direct: 45 } as const;

export interface SimulatorOptions {
  /** Delay before an outgoing row is marked delivered (RELAY_SIM_DELIVERY_MS). */
  deliveryDelayMs?: number;
  /** Delay after delivery before it is marked read; undefined: never (RELAY_SIM_READ_MS). */
  readDelayMs?: number;
}

/** Opens (creating if absent) a simulated chat.db with the Messages schema. The caller closes it. */
export async function createSimulatedChatDb(dbPath: string): Promise<SqliteDatabase> {
  await mkdir(dirname(dbPath), { recursive: true });
  const db = openSqliteFile(dbPath, 'readwrite');
  try {
    db.exec(schema);
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

/**
 * The simulator's writes, as Messages makes them, prepared once per
 * connection. Values are bound by name; flags are 0/1 numbers.
 */
class SimulatorWrites {
  private readonly upsertHandle: SqliteStatement;
  private readonly upsertChat: SqliteStatement;
  private readonly joinHandle: SqliteStatement;
  private readonly leaveChat: SqliteStatement;
  private readonly nextFault: SqliteStatement;
  private readonly dropFault: SqliteStatement;
  private readonly smsOnly: SqliteStatement;
  private readonly noImessage: SqliteStatement;
  private readonly addNoImessage: SqliteStatement;
  private readonly removeNoImessage: SqliteStatement;
  private readonly insertMessage: SqliteStatement;
  private readonly joinChat: SqliteStatement;
  private readonly insertAttachment: SqliteStatement;
  private readonly joinAttachment: SqliteStatement;
  private readonly addFault: SqliteStatement;
  private readonly addSmsOnly: SqliteStatement;
  private readonly removeSmsOnly: SqliteStatement;
  private readonly readStalled: SqliteStatement;
  private readonly setStalled: SqliteStatement;
  readonly markDelivered: SqliteStatement;
  readonly markRead: SqliteStatement;
  readonly edit: SqliteStatement;
  readonly unsend: SqliteStatement;

  constructor(readonly db: SqliteDatabase) {
    this.upsertHandle = db.prepare(
      'INSERT OR IGNORE INTO handle (id, service, uncanonicalized_id) VALUES (@handle, @service, @handle)',
    );
    this.upsertChat =
      db.prepare(`INSERT OR IGNORE INTO chat (guid, style, state, chat_identifier, service_name, room_name)
  VALUES (@chatGuid, @style, 3, @identifier, @service, @roomName)`);
    this.joinHandle =
      db.prepare(`INSERT OR IGNORE INTO chat_handle_join (chat_id, handle_id) SELECT c.ROWID, h.ROWID FROM chat c, handle h
  WHERE c.guid = @chatGuid AND h.id = @handle AND h.service = @service`);
    this.leaveChat =
      db.prepare(`DELETE FROM chat_handle_join WHERE chat_id = (SELECT ROWID FROM chat WHERE guid = @chatGuid)
  AND handle_id = (SELECT ROWID FROM handle WHERE id = @handle AND service = @service)`);
    this.nextFault = db.prepare(
      'SELECT id, error, never_deliver AS neverDeliver FROM relaybox_simulator_faults ORDER BY id LIMIT 1',
    );
    this.dropFault = db.prepare('DELETE FROM relaybox_simulator_faults WHERE id = @id');
    this.smsOnly = db.prepare('SELECT 1 AS yes FROM relaybox_simulator_sms_only WHERE handle = @handle');
    this.noImessage = db.prepare('SELECT 1 AS yes FROM relaybox_simulator_no_imessage WHERE handle = @handle');
    this.addNoImessage = db.prepare('INSERT OR IGNORE INTO relaybox_simulator_no_imessage (handle) VALUES (@handle)');
    this.removeNoImessage = db.prepare('DELETE FROM relaybox_simulator_no_imessage WHERE handle = @handle');
    this.insertMessage =
      db.prepare(`INSERT INTO message (guid, text, attributedBody, handle_id, service, account, error, date, date_read, date_delivered,
  is_delivered, is_finished, is_from_me, is_read, is_sent, cache_has_attachments, cache_roomnames,
  associated_message_type, associated_message_guid, associated_message_emoji, thread_originator_guid, thread_originator_part,
  item_type, group_title, group_action_type, other_handle)
  VALUES (@guid, @text, @attributedBody, (SELECT ROWID FROM handle WHERE id = @handle AND service = @service), @service, @account, @error, @date, 0, 0,
  @isDelivered, 1, @isFromMe, 0, @isSent, @hasAttachments, @roomName, @associatedType, @associatedGuid, @associatedEmoji,
  @threadGuid, @threadPart, @itemType, @groupTitle, @groupActionType,
  COALESCE((SELECT ROWID FROM handle WHERE id = @otherHandle AND service = @service), 0))`);
    this.joinChat = db.prepare(`INSERT INTO chat_message_join (chat_id, message_id, message_date)
  SELECT c.ROWID, @messageId, @date FROM chat c WHERE c.guid = @chatGuid`);
    this.insertAttachment = db.prepare(
      'INSERT INTO attachment (guid, created_date, filename, mime_type, transfer_name, total_bytes) VALUES (@guid, @date, @filename, @mimeType, @transferName, @totalBytes)',
    );
    this.joinAttachment = db.prepare(
      'INSERT INTO message_attachment_join (message_id, attachment_id) VALUES (@messageId, @attachmentId)',
    );
    this.addFault = db.prepare(
      'INSERT INTO relaybox_simulator_faults (error, never_deliver) VALUES (@error, @neverDeliver)',
    );
    this.addSmsOnly = db.prepare('INSERT OR IGNORE INTO relaybox_simulator_sms_only (handle) VALUES (@handle)');
    this.removeSmsOnly = db.prepare('DELETE FROM relaybox_simulator_sms_only WHERE handle = @handle');
    this.readStalled = db.prepare('SELECT stalled FROM relaybox_simulator WHERE id = 1');
    this.setStalled = db.prepare('UPDATE relaybox_simulator SET stalled = @stalled WHERE id = 1');
    this.markDelivered = db.prepare('UPDATE message SET is_delivered = 1, date_delivered = @date WHERE ROWID = @rowId');
    this.markRead = db.prepare('UPDATE message SET is_read = 1, date_read = @date WHERE ROWID = @rowId');
    // An edit rewrites the row's text in place and stamps date_edited (the earlier versions go to
    // message_summary_info, which the reader does not read); an unsend empties it and stamps date_retracted.
    this.edit = db.prepare(
      'UPDATE message SET text = @text, attributedBody = @attributedBody, date_edited = @date WHERE guid = @guid',
    );
    this.unsend = db.prepare(
      'UPDATE message SET text = NULL, attributedBody = NULL, date_retracted = @date WHERE guid = @guid',
    );
  }

  /**
   * Writes one message row with its handle, chat and attachments, in one
   * transaction; returns its ROWID, its error and whether it is never to be
   * delivered. An outgoing row takes the oldest injected fault, if any. A
   * recipient reached by SMS only has its rows, chat and handle on the SMS
   * service, as has a row sent as SMS on purpose (`service`); one with no
   * iMessage (`setNoImessage`) sent over iMessage fails with error 22, as
   * Messages fails it ("not registered with iMessage").
   */
  writeMessage(row: MessageRow): { rowId: number; error: number; neverDeliver: boolean; service: string } {
    return this.db
      .transaction(() => {
        const { handle, group } = row;
        const asSms = row.service === services.sms || this.smsOnly.get({ handle }) !== undefined;
        const service = !group && asSms ? services.sms : services.iMessage;
        const unregistered =
          row.isFromMe && !group && service === services.iMessage && this.noImessage.get({ handle }) !== undefined;
        const chatGuid = group ? `${service};+;${group}` : `${service};-;${handle}`;
        this.upsertHandle.run({ handle, service });
        this.upsertChat.run({
          chatGuid,
          style: group ? chatStyle.group : chatStyle.direct,
          identifier: group ?? handle,
          service,
          roomName: group ?? null,
        });
        this.joinHandle.run({ chatGuid, handle, service });
        const other = row.groupEvent?.otherHandle;
        if (other) this.upsertHandle.run({ handle: other, service });
        // A member added joins the chat; one removed, or who left, is no longer in it.
        if (other && row.groupEvent?.itemType === 1 && row.groupEvent.action === 0)
          this.joinHandle.run({ chatGuid, handle: other, service });
        if (row.groupEvent && (row.groupEvent.itemType === 3 || row.groupEvent.action === 1))
          this.leaveChat.run({ chatGuid, handle: row.groupEvent.itemType === 3 ? handle : other, service });
        const fault = row.isFromMe
          ? (this.nextFault.get() as { id: number; error: number; neverDeliver: number } | undefined)
          : undefined;
        if (fault) this.dropFault.run({ id: fault.id });
        const error = fault?.error ?? (unregistered ? notRegisteredError : 0);
        const messageId = Number(
          this.insertMessage.run({
            guid: row.guid,
            text: row.text,
            attributedBody: row.attributedBody,
            handle,
            service,
            account: simulatedAccount,
            error,
            date: row.date,
            isDelivered: row.isFromMe ? 0 : 1,
            isFromMe: row.isFromMe ? 1 : 0,
            isSent: row.isFromMe ? 1 : 0,
            hasAttachments: row.hasAttachments ? 1 : 0,
            roomName: group ?? null,
            associatedType: row.associated?.type ?? 0,
            associatedGuid: row.associated?.guid ?? null,
            associatedEmoji: row.associated?.emoji ?? null,
            threadGuid: row.replyToGuid ?? null,
            threadPart: row.replyToGuid ? '0:0:1' : null,
            itemType: row.groupEvent?.itemType ?? 0,
            groupTitle: row.groupEvent?.title ?? null,
            groupActionType: row.groupEvent?.action ?? 0,
            otherHandle: row.groupEvent?.otherHandle ?? null,
          }).lastInsertRowid,
        );
        this.joinChat.run({ messageId, date: row.date, chatGuid });
        for (const filename of row.attachments) {
          const attachmentId = this.insertAttachment.run({
            guid: randomUUID().toUpperCase(),
            date: row.date,
            filename,
            mimeType: mimeTypeOf(filename),
            transferName: filename.split('/').pop() ?? filename,
            totalBytes: fileSize(filename),
          }).lastInsertRowid;
          this.joinAttachment.run({ messageId, attachmentId });
        }
        return { rowId: messageId, error, neverDeliver: fault?.neverDeliver === 1, service };
      })
      .immediate();
  }

  addFaults(count: number, fault: SimulatedFault): void {
    this.db
      .transaction(() => {
        for (let i = 0; i < count; i += 1)
          this.addFault.run({
            error: fault.error ?? (fault.neverDeliver ? 0 : 1),
            neverDeliver: fault.neverDeliver ? 1 : 0,
          });
      })
      .immediate();
  }

  /** Whether a recipient is reached on iMessage in the simulated world: not when SMS-only or without iMessage. */
  hasImessage(handle: string): boolean {
    return this.smsOnly.get({ handle }) === undefined && this.noImessage.get({ handle }) === undefined;
  }

  setNoImessage(handle: string, noImessage: boolean): void {
    (noImessage ? this.addNoImessage : this.removeNoImessage).run({ handle });
  }

  setSmsOnly(handle: string, smsOnly: boolean): void {
    (smsOnly ? this.addSmsOnly : this.removeSmsOnly).run({ handle });
  }

  get stalled(): boolean {
    return (this.readStalled.get() as { stalled: number }).stalled === 1;
  }

  set stalled(stalled: boolean) {
    this.setStalled.run({ stalled: stalled ? 1 : 0 });
  }
}

interface MessageRow {
  guid: string;
  handle: string;
  /** A group chat's identifier; undefined for the one-to-one chat with `handle`. */
  group: string | undefined;
  isFromMe: boolean;
  text: string | null;
  attributedBody: Buffer | null;
  /** Apple nanoseconds. */
  date: bigint;
  hasAttachments: boolean;
  /** Local paths recorded as the row's attachments. */
  attachments: string[];
  /** A tapback: its `associated_message_type`, `associated_message_guid` and, for an emoji tapback, the emoji. */
  associated?: { type: number; guid: string; emoji?: string };
  /** `SMS`: sent as SMS on purpose (the agent's fallback). */
  service?: 'SMS';
  /** A reply: the guid of the message it answers (`thread_originator_guid`). */
  replyToGuid?: string;
  /** A group event row: its `item_type`, `group_action_type`, `group_title` and the member (`other_handle`). */
  groupEvent?: { itemType: number; action: number; title?: string; otherHandle?: string };
}

/** Where the simulator appends one JSON line per send it performs. */
export function sendLogPath(dbPath: string): string {
  return `${dbPath}.sent.log`;
}

/** The sends a simulator on this file performed, oldest first (none before the first). */
export async function readSendLog(dbPath: string): Promise<SendLogEntry[]> {
  const text = await readFile(sendLogPath(dbPath), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as SendLogEntry);
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
  /** The service its row went over. */
  service?: string;
}

export class SimulatedMessagesApp implements MessageSender {
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly held: OutgoingMessage[] = [];

  private constructor(
    readonly dbPath: string,
    private readonly writes: SimulatorWrites,
    private readonly options: SimulatorOptions,
  ) {}

  static async open(dbPath: string, options: SimulatorOptions = {}): Promise<SimulatedMessagesApp> {
    // One connection for the app's life: a send is then a few statements, not an open.
    return new SimulatedMessagesApp(dbPath, new SimulatorWrites(await createSimulatedChatDb(dbPath)), options);
  }

  /**
   * Writes the outgoing row as Messages would, then marks it delivered (and
   * read) later, unless a fault was injected (an error, or never delivered). While stalled (`simulate-stall`)
   * it takes the message and writes nothing, like a stuck Messages app; a
   * restart writes what it held.
   */
  async send(message: OutgoingMessage): Promise<SendOutcome> {
    if (this.writes.stalled) {
      this.held.push(message);
      return { ok: true };
    }
    return this.write(message);
  }

  /** Quits and reopens the app: the stall ends and the held messages go out. */
  /** The simulated world's rule for a lookup: a recipient made SMS-only (`simulate-sms-only`) has no iMessage; everyone else has. */
  async availability(handle: string): Promise<{ imessage: boolean | null; source: string }> {
    return { imessage: this.writes.hasImessage(normalizeHandle(handle)), source: 'simulator' };
  }

  async restart(): Promise<void> {
    this.writes.stalled = false;
    for (const message of this.held.splice(0)) await this.write(message);
  }

  private async write(message: OutgoingMessage): Promise<SendOutcome> {
    const handle = normalizeHandle(message.to);
    const guid = randomUUID().toUpperCase();
    const row = this.writes.writeMessage({
      guid,
      handle,
      group: undefined,
      isFromMe: true,
      text: message.body,
      attributedBody: null,
      date: msToAppleNs(Date.now()),
      hasAttachments: message.attachmentPaths.length > 0,
      attachments: [],
      ...(message.service ? { service: message.service } : {}),
    });
    const entry: SendLogEntry = {
      at: new Date().toISOString(),
      messageId: message.messageId,
      attempt: message.attempt,
      to: handle,
      rowId: row.rowId,
      guid,
      error: row.error,
      attachments: message.attachmentPaths.length,
      service: row.service,
    };
    await appendFile(sendLogPath(this.dbPath), `${JSON.stringify(entry)}\n`);
    if (row.error === 0 && !row.neverDeliver)
      this.later(this.options.deliveryDelayMs ?? 500, () => this.markDelivered(row.rowId));
    return { ok: true };
  }

  /** Stops pending delivered/read updates and closes the file. */
  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.writes.db.close();
  }

  private markDelivered(rowId: number): void {
    this.writes.markDelivered.run({ date: msToAppleNs(Date.now()), rowId });
    const readDelayMs = this.options.readDelayMs;
    if (readDelayMs !== undefined) this.later(readDelayMs, () => this.markRead(rowId));
  }

  private markRead(rowId: number): void {
    this.writes.markRead.run({ date: msToAppleNs(Date.now()), rowId });
  }

  private later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      try {
        fn();
      } catch (err) {
        process.emitWarning(`simulator update failed: ${(err as Error).message}`);
      }
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
  /** A reply in the thread of the message with this guid (`thread_originator_guid`), as Messages writes one. */
  replyToGuid?: string;
}

/** Writes a message "received" from someone, as Messages would. Used by tests and `simulate-inbound`. */
export async function simulateInbound(
  dbPath: string,
  message: InboundInjection,
): Promise<{ rowId: number; guid: string }> {
  const guid = randomUUID().toUpperCase();
  const row = await withSimulatorWrites(dbPath, (writes) =>
    writes.writeMessage({
      guid,
      handle: normalizeHandle(message.from),
      group: message.groupId,
      isFromMe: false,
      text: message.attributedBodyOnly ? null : message.body,
      attributedBody: message.attributedBodyOnly ? encodeAttributedBody(message.body) : null,
      date: msToAppleNs(Date.now()),
      hasAttachments: (message.attachments ?? []).length > 0,
      attachments: message.attachments ?? [],
      ...(message.replyToGuid ? { replyToGuid: message.replyToGuid } : {}),
    }),
  );
  return { rowId: row.rowId, guid };
}

/** Writes a reply "received" from someone in the thread of the message with `replyToGuid`, as Messages would. */
export function simulateReply(
  dbPath: string,
  reply: { from: string; body: string; replyToGuid: string },
): Promise<{ rowId: number; guid: string }> {
  return simulateInbound(dbPath, reply);
}

/**
 * Edits a received message as Messages records the sender's edit: the row
 * (by guid) gets the new text and `date_edited`; false when no row has that guid.
 */
export async function simulateEdit(dbPath: string, edit: { guid: string; body: string }): Promise<boolean> {
  const changes = await withSimulatorWrites(
    dbPath,
    (writes) =>
      writes.edit.run({
        guid: edit.guid,
        text: edit.body,
        attributedBody: encodeAttributedBody(edit.body),
        date: msToAppleNs(Date.now()),
      }).changes,
  );
  return changes > 0;
}

/** Unsends a received message as Messages records it: the row's text is emptied and `date_retracted` set; false when no row has that guid. */
export async function simulateUnsend(dbPath: string, guid: string): Promise<boolean> {
  const changes = await withSimulatorWrites(
    dbPath,
    (writes) => writes.unsend.run({ guid, date: msToAppleNs(Date.now()) }).changes,
  );
  return changes > 0;
}

/** The tapbacks in `associated_message_type` order (2000 + index; a removal is 3000 + index); `emoji` is macOS 14's. */
export const tapbacks = ['love', 'like', 'dislike', 'laugh', 'emphasize', 'question', 'emoji'] as const;
export type Tapback = (typeof tapbacks)[number];

/** The text Messages writes on a classic tapback's row, for clients that show it as a message. */
const tapbackVerbs: Record<Tapback, string> = {
  love: 'Loved',
  like: 'Liked',
  dislike: 'Disliked',
  laugh: 'Laughed at',
  emphasize: 'Emphasized',
  question: 'Questioned',
  emoji: 'Reacted to',
};

export interface ReactionInjection {
  from: string;
  /** The guid of the message reacted to (a row of this file, sent or received). */
  targetGuid: string;
  tapback: Tapback;
  /** For `emoji`: the emoji (macOS 14 and later write it in `associated_message_emoji`). */
  emoji?: string;
  /** A removal of that tapback (3000 + index) rather than its addition (2000 + index). */
  removed?: boolean;
}

/**
 * Writes a tapback "received" from someone, as Messages does: a row of its
 * own with `associated_message_type` 2000–2006 (3000–3006 for a removal),
 * `associated_message_guid` `p:0/<target guid>` (part 0 of the target), the
 * emoji of an emoji tapback in `associated_message_emoji`, and a text older
 * clients show (`Loved a message`).
 */
export async function simulateReaction(
  dbPath: string,
  reaction: ReactionInjection,
): Promise<{ rowId: number; guid: string }> {
  const index = tapbacks.indexOf(reaction.tapback);
  if (index < 0) throw new Error(`tapback must be one of ${tapbacks.join(', ')}, got ${reaction.tapback}`);
  if (reaction.tapback === 'emoji' && !reaction.emoji) throw new Error('an emoji tapback needs its emoji');
  const guid = randomUUID().toUpperCase();
  const verb = reaction.removed ? 'Removed a reaction from' : tapbackVerbs[reaction.tapback];
  const row = await withSimulatorWrites(dbPath, (writes) =>
    writes.writeMessage({
      guid,
      handle: normalizeHandle(reaction.from),
      group: undefined,
      isFromMe: false,
      text: `${verb} a message`,
      attributedBody: null,
      date: msToAppleNs(Date.now()),
      hasAttachments: false,
      attachments: [],
      associated: {
        type: (reaction.removed ? 3000 : 2000) + index,
        guid: `p:0/${reaction.targetGuid}`,
        ...(reaction.emoji ? { emoji: reaction.emoji } : {}),
      },
    }),
  );
  return { rowId: row.rowId, guid };
}

export type GroupChange =
  | { change: 'renamed'; name: string }
  | { change: 'participant_added' | 'participant_removed'; handle: string }
  | { change: 'participant_left' };

/**
 * Writes a group event in the group chat `group` as Messages does, made by
 * `from`: a rename (item_type 2 with `group_title`), a member added or
 * removed (item_type 1, group_action_type 0 or 1, the member in
 * `other_handle`), or `from` leaving (item_type 3, group_action_type 0).
 */
export async function simulateGroupEvent(
  dbPath: string,
  event: { group: string; from: string } & GroupChange,
): Promise<{ rowId: number; guid: string }> {
  const guid = randomUUID().toUpperCase();
  const groupEvent =
    event.change === 'renamed'
      ? { itemType: 2, action: 0, title: event.name }
      : event.change === 'participant_left'
        ? { itemType: 3, action: 0 }
        : {
            itemType: 1,
            action: event.change === 'participant_added' ? 0 : 1,
            otherHandle: normalizeHandle(event.handle),
          };
  const row = await withSimulatorWrites(dbPath, (writes) =>
    writes.writeMessage({
      guid,
      handle: normalizeHandle(event.from),
      group: event.group,
      isFromMe: false,
      text: null,
      attributedBody: null,
      date: msToAppleNs(Date.now()),
      hasAttachments: false,
      attachments: [],
      groupEvent,
    }),
  );
  return { rowId: row.rowId, guid };
}

/** What an injected fault does to a send's row: Messages' `error` code on it (1 unless given), or no error and never delivered. */
export interface SimulatedFault {
  error?: number;
  neverDeliver?: boolean;
}

/**
 * Makes the next `count` sends of any simulator on this file fail with the
 * fault's error code (1 by default), or, with `neverDeliver`, be sent and never
 * delivered. Faults are used in the order they were added.
 */
export async function simulateFailures(dbPath: string, count: number, fault: SimulatedFault = {}): Promise<void> {
  if (!Number.isSafeInteger(count) || count < 0) throw new Error(`count must be a non-negative integer, got ${count}`);
  if (fault.error !== undefined && (!Number.isSafeInteger(fault.error) || fault.error === 0))
    throw new Error(`the error code must be a non-zero integer, got ${fault.error}`);
  if (fault.error !== undefined && fault.neverDeliver)
    throw new Error('a fault is an error or never delivered, not both');
  await withSimulatorWrites(dbPath, (writes) => writes.addFaults(count, fault));
}

/**
 * Gives a recipient no iMessage (or, with `noImessage` false, gives it back):
 * a send over iMessage fails with error 22, as Messages fails it; one sent
 * as SMS goes. A lookup answers false.
 */
export async function simulateNoImessage(dbPath: string, handle: string, noImessage = true): Promise<void> {
  await withSimulatorWrites(dbPath, (writes) => writes.setNoImessage(normalizeHandle(handle), noImessage));
}

/** Makes a recipient reachable by SMS only (or, with `smsOnly` false, by iMessage again): its rows are written on the SMS service. */
export async function simulateSmsOnly(dbPath: string, handle: string, smsOnly = true): Promise<void> {
  await withSimulatorWrites(dbPath, (writes) => writes.setSmsOnly(normalizeHandle(handle), smsOnly));
}

/** Makes every simulator on this file stop writing rows for its sends (a stuck Messages app) until it restarts, or `stalled` false. */
export async function simulateStall(dbPath: string, stalled = true): Promise<void> {
  await withSimulatorWrites(dbPath, (writes) => {
    writes.stalled = stalled;
  });
}

async function withSimulatorWrites<T>(dbPath: string, write: (writes: SimulatorWrites) => T): Promise<T> {
  const db = await createSimulatedChatDb(dbPath);
  try {
    return write(new SimulatorWrites(db));
  } finally {
    db.close();
  }
}

/** What Messages records of a file's type, from its extension (the simulator knows a few). */
function mimeTypeOf(path: string): string | null {
  const types: Record<string, string> = {
    png: 'image/png',
    jpg: 'image/jpeg',
    jpeg: 'image/jpeg',
    pdf: 'application/pdf',
    txt: 'text/plain',
    mov: 'video/quicktime',
  };
  return types[path.split('.').pop()?.toLowerCase() ?? ''] ?? null;
}

/** `total_bytes` of a file on this machine; 0 (unknown) for one that is not there. */
function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

import { appleEpochMs, appleTimeToMs, msToAppleNs } from './apple-time.ts';
import { reactionKinds } from 'relaybox-relay-protocol/frames.ts';
import type { Logger } from './agent-logger.ts';
import { decodeAttributedBody, readAttributedBody, type AttributedBody } from './attributed-body.ts';
import { normalizeBody } from './message-sender.ts';
import { asChatDbError, openSqliteFile, type SqliteDatabase, type SqliteStatement } from './sqlite-file.ts';

/** One row of `message` with what the agent needs from its handle and chat. */
export interface ChatRow {
  rowId: number;
  guid: string;
  isFromMe: boolean;
  /** `text`, or the string decoded from `attributedBody` when `text` is NULL; U+FFFC attachment marks removed. */
  body: string;
  /** The other party's handle (`handle.id`), or the chat identifier when the row has no handle. */
  handle: string | undefined;
  chatGuid: string | undefined;
  isGroup: boolean;
  /** Epoch milliseconds. */
  dateMs: number | undefined;
  dateDeliveredMs: number | undefined;
  dateReadMs: number | undefined;
  isDelivered: boolean;
  isRead: boolean;
  isSent: boolean;
  /** Messages' error code; 0 is none. */
  error: number;
  /** The service the row went over or came by (`iMessage`, `SMS`, `RCS`), as Messages names it. */
  service: string | undefined;
  /** The row's attachments, with their local paths (`attachment.filename`, `~` for the home folder). */
  attachments: ChatAttachment[];
  /** A tapback row (`associated_message_type` 2000–2007, removals 3000–3007): what it does to which message. */
  reaction?: ChatReaction;
  /** A reply in a thread: the guid of the thread's first message (`thread_originator_guid`, macOS 11 and later). */
  replyToGuid?: string;
  /** When the sender last edited it (`date_edited`, macOS 13 and later), epoch milliseconds. */
  dateEditedMs?: number;
  /** When the sender unsent it (`date_retracted`, macOS 13 and later), epoch milliseconds. */
  dateRetractedMs?: number;
  /** A group event row: the group renamed, or a member added or gone (`handle` is who did it). */
  groupEvent?: ChatGroupEvent;
}

export interface ChatAttachment {
  /** `attachment.guid`: what the agent uploads it by. */
  guid: string;
  path: string;
  /** `transfer_name`: the name the sender gave it; else the path's last segment. */
  name: string;
  mimeType?: string;
  /** `total_bytes`, when Messages knows it. */
  size?: number;
}

export interface ChatGroupEvent {
  change: 'renamed' | 'participant_added' | 'participant_left';
  /** For `renamed`: the new name (`group_title`; empty when the name was removed). */
  name?: string;
  /** For a member change: the member (`other_handle`; who left, for one who left themselves). */
  handle?: string;
}

export { reactionKinds };

export interface ChatReaction {
  kind: (typeof reactionKinds)[number];
  /** The guid of the message reacted to (from `associated_message_guid`, `p:<part>/<guid>` or `bp:<guid>`). */
  targetGuid: string;
  /** An emoji tapback's emoji (`associated_message_emoji`, macOS 14 and later). */
  emoji?: string;
  removed: boolean;
}

interface RawRow {
  rowId: number;
  guid: string;
  text: string | null;
  attributedBody: ArrayBuffer | null;
  isFromMe: number;
  date: number | null;
  dateDelivered: number | null;
  dateRead: number | null;
  isDelivered: number | null;
  isRead: number | null;
  isSent: number | null;
  error: number | null;
  service: string | null;
  handle: string | null;
  chatGuid: string | null;
  chatStyle: number | null;
  roomName: string | null;
  attachmentsJson: string | null;
  associatedType?: number | null;
  associatedGuid?: string | null;
  associatedEmoji?: string | null;
  threadOriginatorGuid?: string | null;
  dateEdited?: number | null;
  dateRetracted?: number | null;
  itemType?: number | null;
  groupTitle?: string | null;
  groupActionType?: number | null;
  otherHandle?: string | null;
}

/** Rows a reader remembers having logged a cut body for (a few bytes each). */
const cutRowsRemembered = 1_000;

/** chat.style of a group conversation (45 is one-to-one). */
const groupChatStyle = 43;

// A message joined to several chats (rare) is reported with the lowest chat id, once.
const selectRows = `
SELECT m.ROWID AS rowId, m.guid AS guid, m.text AS text, m.attributedBody AS attributedBody,
  m.is_from_me AS isFromMe, m.date AS date, m.date_delivered AS dateDelivered, m.date_read AS dateRead,
  m.is_delivered AS isDelivered, m.is_read AS isRead, m.is_sent AS isSent, m.error AS error, m.service AS service,
  COALESCE(h.id, c.chat_identifier) AS handle, c.guid AS chatGuid, c.style AS chatStyle, m.cache_roomnames AS roomName,
  (SELECT json_group_array(json_object('guid', a.guid, 'path', a.filename, 'name', a.transfer_name,
      'mimeType', a.mime_type, 'size', a.total_bytes))
    FROM message_attachment_join maj JOIN attachment a ON a.ROWID = maj.attachment_id
    WHERE maj.message_id = m.ROWID AND a.filename IS NOT NULL) AS attachmentsJson
FROM message m
LEFT JOIN handle h ON h.ROWID = m.handle_id
LEFT JOIN chat c ON c.ROWID = (SELECT cmj.chat_id FROM chat_message_join cmj WHERE cmj.message_id = m.ROWID ORDER BY cmj.chat_id LIMIT 1)`;

/** Ordinary messages only: no tapbacks/reactions (associated_message_type) and no group events (item_type). */
const ordinaryMessage = 'm.item_type = 0 AND m.associated_message_type = 0';
/** A followed row not yet delivered that now shows delivery, a read or an error. */
const deliveryNews = '(m.is_delivered = 1 OR m.date_delivered > 0 OR m.is_read = 1 OR m.date_read > 0 OR m.error != 0)';
const readNews = '(m.is_read = 1 OR m.date_read > 0)';
/** A list of ROWIDs is bound as one JSON array, so one prepared statement serves any length. */
const rowIdIn = 'm.ROWID IN (SELECT value FROM json_each(?))';

/** Tapbacks others made: classic and emoji ones, and their removals (stickers, 2007 and 3007, too). */
const reactionRow =
  'm.item_type = 0 AND (m.associated_message_type BETWEEN 2000 AND 2007 OR m.associated_message_type BETWEEN 3000 AND 3007)';

/** Columns that only newer chat.db files have, read as NULL where absent. */
const optionalColumns = {
  /** macOS 14. */
  associated_message_emoji: 'associatedEmoji',
  /** macOS 11. */
  thread_originator_guid: 'threadOriginatorGuid',
  /** macOS 13. */
  date_edited: 'dateEdited',
  date_retracted: 'dateRetracted',
  /** A group event's new name, kind and the member it is about (the actor is the row's handle). */
  group_title: 'groupTitle',
  group_action_type: 'groupActionType',
  other_handle: 'otherHandle',
} as const;
type OptionalColumn = keyof typeof optionalColumns;
/** Read through another table: the other handle's address, not its ROWID. */
const columnExpressions: Partial<Record<OptionalColumn, string>> = {
  other_handle: '(SELECT oh.id FROM handle oh WHERE oh.ROWID = m.other_handle)',
};

/** The row columns with the tapback, reply, edit and unsend columns the file has. */
const selectRowsWith = (present: ReadonlySet<string>) =>
  selectRows.replace(
    'FROM message m',
    `, m.associated_message_type AS associatedType, m.associated_message_guid AS associatedGuid, m.item_type AS itemType,
  ${Object.entries(optionalColumns)
    .map(([column, alias]) => {
      const expression = columnExpressions[column as OptionalColumn] ?? `m.${column}`;
      return `${present.has(column) ? expression : 'NULL'} AS ${alias}`;
    })
    .join(', ')}
FROM message m`,
  );

/** A row's latest edit or unsend (Apple time); 0 for one never changed, NULL for every row of a file without the columns. */
const changedAt = (present: ReadonlySet<string>) =>
  present.has('date_edited') && present.has('date_retracted')
    ? 'MAX(COALESCE(m.date_edited, 0), COALESCE(m.date_retracted, 0))'
    : 'NULL';

/**
 * Group events in a group chat: a member added or removed (item_type 1,
 * group_action_type 0 or 1), the group renamed (item_type 2), a member who
 * left (item_type 3, group_action_type 0). Others (a photo changed) are read
 * and not forwarded.
 */
const groupEventRow = 'm.item_type IN (1, 2, 3) AND m.associated_message_type = 0';

/** Every query the reader runs, prepared once per connection; values are only ever bound. */
const queriesFor = (present: ReadonlySet<string>) => {
  const select = selectRowsWith(present);
  return {
    maxRowId: 'SELECT MAX(ROWID) AS maxRowId FROM message',
    // The newest one-to-one row with the handle, either way: the service Messages last reached it on.
    lastService:
      'SELECT m.service AS service FROM message m JOIN handle h ON h.ROWID = m.handle_id WHERE h.id = ? AND m.error = 0 ORDER BY m.ROWID DESC LIMIT 1',
    // Rows this Apple ID sent to the handle at or after a time (Apple nanoseconds), for a failover check.
    sentSince:
      'SELECT m.guid AS guid, m.text AS text, m.attributedBody AS attributedBody FROM message m JOIN handle h ON h.ROWID = m.handle_id WHERE h.id = ? AND m.is_from_me = 1 AND m.date >= ? ORDER BY m.ROWID LIMIT 500',
    // Messages writes the signed-in account on each iMessage row: `e:` and an Apple ID email, or `p:` and a phone number.
    account:
      "SELECT account FROM message WHERE service = 'iMessage' AND account LIKE '_:%' ORDER BY ROWID DESC LIMIT 1",
    // Received messages and tapbacks, in the one ROWID order the inbound cursor follows.
    incoming: `${select}\nWHERE m.ROWID > ? AND m.is_from_me = 0 AND ((${ordinaryMessage}) OR (${reactionRow}) OR (${groupEventRow}))\nORDER BY m.ROWID\nLIMIT ?`,
    reactions: `${select}\nWHERE m.ROWID > ? AND m.is_from_me = 0 AND ${reactionRow}\nORDER BY m.ROWID\nLIMIT ?`,
    // Received messages edited or unsent at or after a time (Apple nanoseconds), oldest change first.
    changed: `${select}\nWHERE m.is_from_me = 0 AND ${ordinaryMessage} AND ${changedAt(present)} >= ?\nORDER BY ${changedAt(present)}, m.ROWID\nLIMIT ?`,
    // The members of a group chat as Messages has them now.
    members:
      'SELECT h.id AS handle FROM chat c JOIN chat_handle_join chj ON chj.chat_id = c.ROWID JOIN handle h ON h.ROWID = chj.handle_id WHERE c.guid = ? ORDER BY h.id',
    outgoing: `${selectRows}\nWHERE m.ROWID > ? AND m.is_from_me = 1 AND ${ordinaryMessage}\nORDER BY m.ROWID\nLIMIT ?`,
    rows: `${selectRows}\nWHERE ${rowIdIn}\nORDER BY m.ROWID`,
    deliveryNews: `${selectRows}\nWHERE ${rowIdIn} AND ${deliveryNews}\nORDER BY m.ROWID`,
    readNews: `${selectRows}\nWHERE ${rowIdIn} AND ${readNews}\nORDER BY m.ROWID`,
  };
};

const presentColumns = `SELECT name FROM pragma_table_info('message') WHERE name IN (${Object.keys(optionalColumns)
  .map((c) => `'${c}'`)
  .join(', ')})`;

type Statements = Record<keyof ReturnType<typeof queriesFor>, SqliteStatement>;

/**
 * Reads ~/Library/Messages/chat.db (or a simulator file of the same schema)
 * strictly read-only, through one connection held for the reader's life and
 * opened on first use. Each statement runs in its own read transaction and is
 * reset when done, so the reader never holds a snapshot between polls (which
 * would keep Messages' WAL from being checkpointed); in WAL mode it never
 * blocks Messages' writes, and it waits up to `busyTimeoutMs` for a lock.
 * After a failure the connection is dropped and the next call opens a new one.
 */
export class ChatDbReader {
  private db: SqliteDatabase | undefined;
  private statements: Statements | undefined;
  /** Rows whose cut body was logged already: a followed row is read again at every poll, and one line says enough. */
  private readonly cutRowsLogged = new Set<number>();

  constructor(
    readonly dbPath: string,
    private readonly log?: Pick<Logger, 'warn'>,
  ) {}

  async close(): Promise<void> {
    const db = this.db;
    this.db = undefined;
    this.statements = undefined;
    db?.close();
  }

  /** Fails with a `ChatDbError` when the file cannot be read (on macOS: no Full Disk Access). */
  async maxRowId(): Promise<number> {
    const row = this.run((s) => s.maxRowId.get()) as { maxRowId: number | null } | undefined;
    return row?.maxRowId ?? 0;
  }

  /** The service of the newest message with `handle` (as `handle.id` holds it) that did not fail, or undefined when there is none. */
  async lastService(handle: string): Promise<string | undefined> {
    const row = this.run((s) => s.lastService.get(handle)) as { service: string | null } | undefined;
    return row?.service ?? undefined;
  }

  /**
   * The guid of a message this Apple ID sent to `handle` with this text at or
   * after `sinceMs` (epoch ms), whichever Mac sent it (iCloud brings the
   * other Mac's rows here); undefined when there is none.
   */
  async sentSince(handle: string, body: string, sinceMs: number): Promise<string | undefined> {
    const rows = this.run((s) => s.sentSince.all(handle, msToAppleNs(sinceMs))) as Array<{
      guid: string;
      text: string | null;
      attributedBody: ArrayBuffer | null;
    }>;
    const want = normalizeBody(body);
    const textOf = (r: (typeof rows)[number]) =>
      r.text ?? (r.attributedBody ? decodeAttributedBody(new Uint8Array(r.attributedBody)) : undefined) ?? '';
    return rows.find((r) => normalizeBody(textOf(r)) === want)?.guid;
  }

  /** The iMessage account of the newest iMessage row (`jane@icloud.com`, `+14155550123`); undefined before any. */
  async iMessageAccount(): Promise<string | undefined> {
    const row = this.run((s) => s.account.get()) as { account: string } | undefined;
    return row?.account.slice(2);
  }

  /** Messages others sent, oldest first, after a ROWID cursor. */
  async readIncoming(afterRowId: number, limit: number): Promise<ChatRow[]> {
    return this.read((s) => s.incoming.all(afterRowId, limit));
  }

  /** Tapbacks others made (and their removals), oldest first, after a ROWID cursor; each row has its `reaction`. */
  async readReactions(afterRowId: number, limit: number): Promise<ChatRow[]> {
    return this.read((s) => s.reactions.all(afterRowId, limit)).filter((r) => r.reaction !== undefined);
  }

  /**
   * Received messages edited or unsent at or after `sinceMs` (epoch
   * milliseconds), oldest change first; each has its `dateEditedMs` or
   * `dateRetractedMs`. None from a chat.db before macOS 13.
   */
  async readChanged(sinceMs: number, limit: number): Promise<ChatRow[]> {
    // Bound as a bigint: Apple nanoseconds are past 2^53, so a number would round.
    const since = sinceMs <= appleEpochMs ? 1n : msToAppleNs(sinceMs);
    return this.read((s) => s.changed.all(since, limit));
  }

  /** The handles of a chat's members now (`chat_handle_join`), this Mac's account aside; none for an unknown chat. */
  async chatMembers(chatGuid: string): Promise<string[]> {
    return (this.run((s) => s.members.all(chatGuid)) as Array<{ handle: string }>).map((r) => r.handle);
  }

  /** Messages this Mac sent (by the agent or by hand), oldest first, after a ROWID cursor. */
  async readOutgoing(afterRowId: number, limit: number): Promise<ChatRow[]> {
    return this.read((s) => s.outgoing.all(afterRowId, limit));
  }

  /** The current state of given rows, to follow a sent message to delivered and read. */
  async readRows(rowIds: number[]): Promise<ChatRow[]> {
    if (rowIds.length === 0) return [];
    return this.read((s) => s.rows.all(JSON.stringify(rowIds)));
  }

  /**
   * Of rows the agent follows, those with news: a row not yet delivered that
   * now shows delivery, a read or an error; a delivered row that now shows a
   * read. A poll over thousands of followed rows then returns only the few
   * that changed.
   */
  async readRowsWithNews(awaitingDelivery: number[], awaitingRead: number[]): Promise<ChatRow[]> {
    const rows: ChatRow[] = [];
    if (awaitingDelivery.length > 0)
      rows.push(...this.read((s) => s.deliveryNews.all(JSON.stringify(awaitingDelivery))));
    if (awaitingRead.length > 0) rows.push(...this.read((s) => s.readNews.all(JSON.stringify(awaitingRead))));
    return rows;
  }

  private read(query: (statements: Statements) => unknown[]): ChatRow[] {
    return (this.run(query) as RawRow[]).map((r) => toChatRow(r, (cut) => this.bodyCut(r, cut)));
  }

  /** The handle is logged for support and masked by the agent's logger; the body never is. */
  private bodyCut(r: RawRow, cut: NonNullable<AttributedBody['cut']>): void {
    if (this.cutRowsLogged.has(r.rowId)) return;
    if (this.cutRowsLogged.size >= cutRowsRemembered) this.cutRowsLogged.clear();
    this.cutRowsLogged.add(r.rowId);
    this.log?.warn(
      { rowId: r.rowId, guid: r.guid, handle: r.handle ?? undefined, ...cut },
      'a message body in chat.db ends before the length its archive declares: it is read as far as it goes',
    );
  }

  private run<T>(query: (statements: Statements) => T): T {
    try {
      return query(this.open());
    } catch (err) {
      void this.close();
      throw asChatDbError(err, this.dbPath);
    }
  }

  private open(): Statements {
    if (this.statements) return this.statements;
    const db = (this.db = openSqliteFile(this.dbPath, 'readonly'));
    const present = new Set((db.prepare(presentColumns).all() as Array<{ name: OptionalColumn }>).map((r) => r.name));
    const entries = Object.entries(queriesFor(present)).map(([name, sql]) => [name, db.prepare(sql)]);
    return (this.statements = Object.fromEntries(entries) as Statements);
  }
}

function toChatRow(r: RawRow, onCut: (cut: NonNullable<AttributedBody['cut']>) => void): ChatRow {
  const decoded =
    r.text === null && r.attributedBody ? readAttributedBody(new Uint8Array(r.attributedBody)) : undefined;
  if (decoded?.cut) onCut(decoded.cut);
  const raw = r.text ?? decoded?.text ?? '';
  // U+FFFC stands where an attachment sits in the text; the attachments are reported on their own.
  const text = raw.includes('\uFFFC') ? raw.replace(/\uFFFC/g, '').trim() : raw;
  return {
    rowId: r.rowId,
    guid: r.guid,
    isFromMe: r.isFromMe === 1,
    body: text,
    handle: r.handle ?? undefined,
    chatGuid: r.chatGuid ?? undefined,
    isGroup: r.chatStyle === groupChatStyle || (r.roomName !== null && r.roomName !== ''),
    dateMs: appleTimeToMs(r.date),
    dateDeliveredMs: appleTimeToMs(r.dateDelivered),
    dateReadMs: appleTimeToMs(r.dateRead),
    isDelivered: r.isDelivered === 1,
    isRead: r.isRead === 1,
    isSent: r.isSent === 1,
    error: r.error ?? 0,
    service: r.service ?? undefined,
    attachments: parseAttachments(r.attachmentsJson),
    ...reactionOf(r),
    ...(r.threadOriginatorGuid ? { replyToGuid: r.threadOriginatorGuid } : {}),
    ...groupEventOf(r),
    ...optionalTime('dateEditedMs', r.dateEdited),
    ...optionalTime('dateRetractedMs', r.dateRetracted),
  };
}

function optionalTime<K extends string>(key: K, value: number | null | undefined): Partial<Record<K, number>> {
  const ms = appleTimeToMs(value);
  return ms === undefined ? {} : ({ [key]: ms } as Record<K, number>);
}

/** The reaction of a tapback row; nothing for another row, or one whose target guid cannot be read. */
function reactionOf(r: RawRow): { reaction?: ChatReaction } {
  const type = r.associatedType ?? 0;
  const removed = type >= 3000;
  const kind = reactionKinds[type - (removed ? 3000 : 2000)];
  const targetGuid = /^(?:p:\d+\/|bp:)?(.+)$/.exec(r.associatedGuid ?? '')?.[1];
  if (!kind || !targetGuid) return {};
  return { reaction: { kind, targetGuid, removed, ...(r.associatedEmoji ? { emoji: r.associatedEmoji } : {}) } };
}

/** The group event of an item_type row; nothing for another row, or a kind the agent does not forward. */
function groupEventOf(r: RawRow): { groupEvent?: ChatGroupEvent } {
  const action = r.groupActionType ?? 0;
  const member = r.otherHandle ?? undefined;
  if (r.itemType === 2) return { groupEvent: { change: 'renamed', name: r.groupTitle ?? '' } };
  if (r.itemType === 1 && member && (action === 0 || action === 1))
    return { groupEvent: { change: action === 0 ? 'participant_added' : 'participant_left', handle: member } };
  if (r.itemType === 3 && action === 0 && r.handle)
    return { groupEvent: { change: 'participant_left', handle: r.handle } };
  return {};
}

function parseAttachments(json: string | null): ChatAttachment[] {
  if (!json) return [];
  const list = JSON.parse(json) as unknown;
  if (!Array.isArray(list)) return [];
  const found: ChatAttachment[] = [];
  for (const raw of list as Array<Record<string, unknown>>) {
    if (typeof raw?.guid !== 'string' || typeof raw.path !== 'string') continue;
    const name = typeof raw.name === 'string' && raw.name !== '' ? raw.name : (raw.path.split('/').pop() ?? '');
    found.push({
      guid: raw.guid,
      path: raw.path,
      name: name || 'attachment',
      ...(typeof raw.mimeType === 'string' && raw.mimeType !== '' ? { mimeType: raw.mimeType } : {}),
      ...(typeof raw.size === 'number' && raw.size > 0 ? { size: raw.size } : {}),
    });
  }
  return found;
}

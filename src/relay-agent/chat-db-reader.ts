import { appleTimeToMs } from './apple-time.ts';
import { decodeAttributedBody } from './attributed-body.ts';
import { SqliteCli, sqlInteger } from './sqlite-cli.ts';

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
  /** Local paths of the row's attachments (`attachment.filename`). */
  attachments: string[];
}

interface RawRow {
  rowId: number;
  guid: string;
  text: string | null;
  attributedBodyHex: string | null;
  isFromMe: number;
  date: number | null;
  dateDelivered: number | null;
  dateRead: number | null;
  isDelivered: number | null;
  isRead: number | null;
  isSent: number | null;
  error: number | null;
  handle: string | null;
  chatGuid: string | null;
  chatStyle: number | null;
  roomName: string | null;
  attachmentsJson: string | null;
}

/** chat.style of a group conversation (45 is one-to-one). */
const groupChatStyle = 43;

// A message joined to several chats (rare) is reported with the lowest chat id, once.
const selectRows = `
SELECT m.ROWID AS rowId, m.guid AS guid, m.text AS text, hex(m.attributedBody) AS attributedBodyHex,
  m.is_from_me AS isFromMe, m.date AS date, m.date_delivered AS dateDelivered, m.date_read AS dateRead,
  m.is_delivered AS isDelivered, m.is_read AS isRead, m.is_sent AS isSent, m.error AS error,
  COALESCE(h.id, c.chat_identifier) AS handle, c.guid AS chatGuid, c.style AS chatStyle, m.cache_roomnames AS roomName,
  (SELECT json_group_array(a.filename) FROM message_attachment_join maj JOIN attachment a ON a.ROWID = maj.attachment_id
    WHERE maj.message_id = m.ROWID AND a.filename IS NOT NULL) AS attachmentsJson
FROM message m
LEFT JOIN handle h ON h.ROWID = m.handle_id
LEFT JOIN chat c ON c.ROWID = (SELECT cmj.chat_id FROM chat_message_join cmj WHERE cmj.message_id = m.ROWID ORDER BY cmj.chat_id LIMIT 1)`;

/** Ordinary messages only: no tapbacks/reactions (associated_message_type) and no group events (item_type). */
const ordinaryMessage = 'm.item_type = 0 AND m.associated_message_type = 0';

/**
 * Reads ~/Library/Messages/chat.db (or a simulator file of the same schema)
 * strictly read-only. Every query is constant text plus integers checked by
 * `sqlInteger`; nothing from a message ever becomes SQL.
 */
export class ChatDbReader {
  private readonly db: SqliteCli;

  constructor(readonly dbPath: string, options: { sqlite3Program?: string } = {}) {
    // Polled every second or so: one sqlite3 program for the reader's life rather than one per query.
    this.db = new SqliteCli(dbPath, { readonly: true, longLived: true, ...(options.sqlite3Program ? { program: options.sqlite3Program } : {}) });
  }

  async close(): Promise<void> {
    await this.db.close();
  }

  /** Fails with a `SqliteError` when the file cannot be read (on macOS: no Full Disk Access). */
  async maxRowId(): Promise<number> {
    const rows = await this.db.query<{ maxRowId: number | null }>('SELECT MAX(ROWID) AS maxRowId FROM message');
    return rows[0]?.maxRowId ?? 0;
  }

  /** Messages others sent, oldest first, after a ROWID cursor. */
  async readIncoming(afterRowId: number, limit: number): Promise<ChatRow[]> {
    return this.read(`m.ROWID > ${sqlInteger(afterRowId)} AND m.is_from_me = 0 AND ${ordinaryMessage}`, limit);
  }

  /** Messages this Mac sent (by the agent or by hand), oldest first, after a ROWID cursor. */
  async readOutgoing(afterRowId: number, limit: number): Promise<ChatRow[]> {
    return this.read(`m.ROWID > ${sqlInteger(afterRowId)} AND m.is_from_me = 1 AND ${ordinaryMessage}`, limit);
  }

  /** The current state of given rows, to follow a sent message to delivered and read. */
  async readRows(rowIds: number[]): Promise<ChatRow[]> {
    if (rowIds.length === 0) return [];
    const rows: ChatRow[] = [];
    for (let i = 0; i < rowIds.length; i += 500) {
      const chunk = rowIds.slice(i, i + 500).map(sqlInteger).join(',');
      rows.push(...(await this.read(`m.ROWID IN (${chunk})`, 500)));
    }
    return rows;
  }

  /**
   * Of rows the agent follows, those with news: a row not yet delivered that
   * now shows delivery, a read or an error; a delivered row that now shows a
   * read. A poll over thousands of followed rows then returns only the few
   * that changed.
   */
  async readRowsWithNews(awaitingDelivery: number[], awaitingRead: number[]): Promise<ChatRow[]> {
    const delivery = '(m.is_delivered = 1 OR m.date_delivered > 0 OR m.is_read = 1 OR m.date_read > 0 OR m.error != 0)';
    const read = '(m.is_read = 1 OR m.date_read > 0)';
    const rows: ChatRow[] = [];
    for (const [ids, news] of [[awaitingDelivery, delivery], [awaitingRead, read]] as const) {
      for (let i = 0; i < ids.length; i += 1_000) {
        const chunk = ids.slice(i, i + 1_000);
        rows.push(...(await this.read(`m.ROWID IN (${chunk.map(sqlInteger).join(',')}) AND ${news}`, chunk.length)));
      }
    }
    return rows;
  }

  private async read(where: string, limit: number): Promise<ChatRow[]> {
    const raw = await this.db.query<RawRow>(`${selectRows}\nWHERE ${where}\nORDER BY m.ROWID\nLIMIT ${sqlInteger(limit)}`);
    return raw.map(toChatRow);
  }
}

function toChatRow(r: RawRow): ChatRow {
  const blob = r.attributedBodyHex ? Buffer.from(r.attributedBodyHex, 'hex') : undefined;
  const raw = r.text ?? decodeAttributedBody(blob) ?? '';
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
    attachments: parseAttachments(r.attachmentsJson),
  };
}

function parseAttachments(json: string | null): string[] {
  if (!json) return [];
  const list = JSON.parse(json) as unknown;
  return Array.isArray(list) ? list.filter((x): x is string => typeof x === 'string') : [];
}

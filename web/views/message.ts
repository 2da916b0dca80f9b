import { h, replace, table, when } from '../dom.ts';
import { api } from '../session.ts';
import type { PageContext } from '../page.ts';
import type { Message } from './messages.ts';

interface StatusRecord {
  status: string;
  waitingFor: string | null;
  notBefore: string | null;
  checkpoints: Array<{ hop: string; at: string }>;
  jobId: string | null;
  attempts: number;
  lastError: string | null;
  failureReason: string | null;
  service: string | null;
  readAt: string | null;
}
interface DomainEvent {
  id: string;
  event: string;
  timestamp: string;
  data: { id?: string; hop?: string; messageId?: string; reaction?: string; emoji?: string; removed?: boolean };
}
interface Webhook {
  id: string;
  url: string;
  events: string[];
}
interface Delivery {
  id: string;
  event: string;
  eventId: string;
  status: string;
  attempts: number;
  responseStatus: number | null;
  lastError: string | null;
  createdAt: string;
}

const hopNames: Record<string, string> = {
  accepted: 'Accepted by the API',
  handed_to_relay: 'Handed to a relay',
  relay_received: 'Received by the relay',
  handed_to_app: 'Handed to Messages',
  seen_in_database: 'Seen in the Messages database',
  sent: 'Sent',
  undelivered: 'Not delivered within the window',
  delivered: 'Delivered',
  read: 'Read',
  failed: 'Failed',
  edited: 'Edited by its sender',
  unsent: 'Unsent by its sender',
  reaction: 'Reaction',
};
/** The hops the service stamps; every other hop is stamped by the relay agent with the Mac's clock. */
const serverHops = new Set(['accepted', 'handed_to_relay', 'undelivered', 'failed']);
const clockNames = { server: "the server's clock", mac: "the Mac's clock (the relay agent's)" };

/** Events of this message among the organization's latest (newest first), read back to its creation, 5 pages at most. */
async function eventsOf(m: Message): Promise<DomainEvent[]> {
  const found: DomainEvent[] = [];
  for (let page = 1; page <= 5; page++) {
    const answer = await api<{ data: DomainEvent[]; pagination: { totalPages: number } }>(
      'GET',
      `/api/v1/events?limit=100&page=${page}`,
    );
    // A reaction names the message it is on as messageId.
    found.push(...answer.data.filter((e) => e.data.id === m.id || e.data.messageId === m.id));
    const oldest = answer.data.at(-1);
    if (!oldest || oldest.timestamp < m.createdAt || page >= answer.pagination.totalPages) break;
  }
  return found.sort((a, b) => a.timestamp.localeCompare(b.timestamp));
}

/** The deliveries each webhook made of these events (`eventId` filter), for the webhooks that take them. */
async function deliveriesOf(events: DomainEvent[]): Promise<Array<Delivery & { url: string; webhookId: string }>> {
  if (events.length === 0) return [];
  const hooks = await api<{ data: Webhook[] }>('GET', '/api/v1/webhooks?limit=100');
  const asks = hooks.data.flatMap((w) => events.filter((e) => w.events.includes(e.event)).map((e) => ({ w, e })));
  const answers = await Promise.all(
    asks
      .slice(0, 30)
      .map(({ w, e }) =>
        api<{ data: Delivery[] }>(
          'GET',
          `/api/v1/webhooks/${w.id}/deliveries?eventId=${encodeURIComponent(e.id)}`,
        ).then((d) => d.data.map((x) => ({ ...x, url: w.url, webhookId: w.id }))),
      ),
  );
  return answers.flat().sort((a, b) => a.createdAt.localeCompare(b.createdAt));
}

/** A reaction as the page shows it: `love from +1415…`, `🌮 from …`. */
const reactionText = (r: { reaction: string; emoji?: string; from: string }) =>
  `${r.emoji ?? r.reaction} from ${r.from}`;

/**
 * The hops in time order, with its sender's edit or unsend and the reactions
 * on it (times of the Mac that received them); where consecutive hops were
 * stamped by different clocks, a line says so.
 */
function timeline(record: StatusRecord, m: Message): HTMLElement {
  const hops: Array<{ hop: string; at: string; note?: string }> = [...record.checkpoints];
  if (record.readAt) hops.push({ hop: 'read', at: record.readAt });
  if (m.editedAt) hops.push({ hop: 'edited', at: m.editedAt });
  if (m.unsentAt) hops.push({ hop: 'unsent', at: m.unsentAt });
  for (const r of m.reactions ?? []) hops.push({ hop: 'reaction', at: r.at, note: reactionText(r) });
  if (hops.length === 0) return h('p', null, 'No hop recorded yet.');
  const order = (hop: string) => Object.keys(hopNames).indexOf(hop);
  hops.sort((a, b) => Date.parse(a.at) - Date.parse(b.at) || order(a.hop) - order(b.hop));
  const start = Date.parse(record.checkpoints.find((c) => c.hop === 'accepted')?.at ?? hops[0]!.at);
  const items: HTMLElement[] = [];
  let clock: 'server' | 'mac' | undefined;
  for (const c of hops) {
    const here = serverHops.has(c.hop) ? 'server' : 'mac';
    if (clock !== undefined && here !== clock)
      items.push(
        h(
          'li',
          { class: 'clock', 'data-clock-change': here },
          `From here the times are ${clockNames[here]}; the two clocks may differ by a few seconds.`,
        ),
      );
    clock = here;
    const since = Date.parse(c.at) - start;
    items.push(
      h(
        'li',
        { 'data-hop': c.hop, 'data-clock': here },
        h('strong', null, hopNames[c.hop] ?? c.hop),
        c.note ? ` ${c.note}` : '',
        ' ',
        h('time', { datetime: c.at }, when(c.at)),
        c.hop !== 'accepted'
          ? h('span', { class: 'hint' }, ` (${since < 0 ? '−' : '+'}${Math.abs(since).toLocaleString('en')} ms)`)
          : null,
      ),
    );
  }
  return h(
    'div',
    null,
    h('p', { class: 'hint' }, `Times start on ${clockNames[serverHops.has(hops[0]!.hop) ? 'server' : 'mac']}.`),
    h('ol', { id: 'message-timeline', class: 'timeline' }, items),
  );
}

const facts = (rows: Array<[string, string | Node | null]>) =>
  h(
    'dl',
    { class: 'facts' },
    rows.filter(([, v]) => v !== null && v !== '').flatMap(([k, v]) => [h('dt', null, k), h('dd', null, v)]),
  );

/** Why a queued message waits, in words (docs/pacing.md#why-a-message-waits); an unknown reason as it is. */
const waitingReasons: Record<string, string> = {
  line_rate: "its line's rate: the line sent its allowance, or spaces its first messages to new recipients",
  new_contact_cap: "its line's new-contact cap: the line wrote to its cap of new recipients in the last 24 h",
  unanswered_cap:
    "its line's unanswered cap: the recipient has not replied to the line's last messages; it goes once they write",
  follow_up_cap: "its line's follow-up cap: the line followed up its cap of silent recipients in the last 24 h",
  quiet_hours: 'quiet hours: it is night where the recipient is',
  relay_offline: 'a relay: none of the organization is online',
  relay_busy: 'a relay: every relay is sending all it can take',
  retry_backoff: 'its retry: an attempt failed and the next one waits',
  queue: 'the messages before it',
};
const waitingText = (reason: string) => waitingReasons[reason] ?? reason.replaceAll('_', ' ');

/** One message: who and what, its status, its timeline, the events it produced and their webhook deliveries. */
export async function messageView({ main }: PageContext, id?: string): Promise<void> {
  if (!id) return;
  const [m, record] = await Promise.all([
    api<Message>('GET', `/api/v1/messages/${encodeURIComponent(id)}`),
    api<StatusRecord>('GET', `/api/v1/messages/${encodeURIComponent(id)}/status`),
  ]);
  const [files, events] = await Promise.all([
    m.attachments.length
      ? api<{
          data: Array<{
            id: string;
            url: string | null;
            filename: string;
            size: number | null;
            status: string;
            reason?: string;
          }>;
        }>('GET', `/api/v1/messages/${encodeURIComponent(id)}/attachments`).then((a) => a.data)
      : Promise.resolve([]),
    eventsOf(m).catch(() => [] as DomainEvent[]),
  ]);
  const deliveries = await deliveriesOf(events).catch(() => []);
  const jobId = record.jobId ?? m.jobId ?? null;
  replace(
    main,
    h('h1', null, 'Message ', h('code', null, m.id)),
    h(
      'div',
      { class: 'cards' },
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'message-who' },
        h('h2', { id: 'message-who' }, m.direction === 'sent' ? 'Sent message' : 'Received message'),
        facts([
          ['Recipient', h('span', { id: 'message-to' }, m.to)],
          ['Sender', h('span', { id: 'message-from' }, m.from ?? m.fromNumber ?? 'any line (the relay chose)')],
          ['Created', when(m.createdAt)],
          ['Priority', String(m.priority)],
          [
            'Conversation',
            h('a', { href: `#/conversations/${m.conversationId}`, id: 'message-conversation' }, m.conversationId),
          ],
          ['Bulk job', jobId ? h('a', { href: `#/jobs/${jobId}` }, jobId) : 'none'],
          [
            'Reply to',
            m.replyTo ? h('a', { href: `#/messages/${m.replyTo}`, id: 'message-reply-to' }, m.replyTo) : null,
          ],
          [
            'Reactions',
            m.reactions?.length
              ? h('span', { id: 'message-reactions' }, m.reactions.map(reactionText).join(', '))
              : null,
          ],
        ]),
        h('h3', null, 'Body'),
        h('p', { class: 'body', id: 'message-body' }, m.body || '(no text)'),
        files.length
          ? h(
              'div',
              null,
              h('h3', null, 'Attachments'),
              h(
                'ul',
                { id: 'message-attachments' },
                files.map((f) =>
                  h(
                    'li',
                    null,
                    // A received file is a link once its relay uploaded it; until then, or if it never comes, its state says why.
                    f.url ? h('a', { href: f.url }, f.filename) : f.filename,
                    f.size === null ? '' : ` (${f.size.toLocaleString('en')} bytes)`,
                    f.status === 'ready' ? '' : ` — ${f.status}${f.reason ? `: ${f.reason}` : ''}`,
                  ),
                ),
              ),
            )
          : null,
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'message-state' },
        h('h2', { id: 'message-state' }, 'Status'),
        facts([
          ['Status', h('strong', { id: 'message-status', class: `st st-${record.status}` }, record.status)],
          ['Attempts', String(record.attempts)],
          [
            'Waiting for',
            record.waitingFor
              ? h('span', { id: 'message-waiting', 'data-reason': record.waitingFor }, waitingText(record.waitingFor))
              : null,
          ],
          ['Not before', record.notBefore ? when(record.notBefore) : null],
          ['Last error', record.lastError],
          ['Failure reason', record.failureReason ? record.failureReason.replaceAll('_', ' ') : null],
          ['Sent over', record.service],
        ]),
        h('h3', null, 'Timeline'),
        timeline(record, m),
      ),
    ),
    h(
      'section',
      { class: 'card', 'aria-labelledby': 'message-events' },
      h('h2', { id: 'message-events' }, 'Events'),
      events.length
        ? table(
            'Events of this message, oldest first',
            ['Event', 'At', 'Id'],
            events.map((e) => [
              e.data.hop
                ? `${e.event} (${e.data.hop})`
                : e.data.reaction
                  ? `${e.event} (${e.data.emoji ?? e.data.reaction}${e.data.removed ? ', removed' : ''})`
                  : e.event,
              when(e.timestamp),
              h('code', null, e.id),
            ]),
          )
        : h('p', null, 'No event of this message among the latest 500 of the organization.'),
      h('h2', { id: 'message-deliveries' }, 'Webhook deliveries'),
      deliveries.length
        ? h(
            'div',
            { id: 'message-deliveries-list' },
            table(
              'Webhook deliveries of these events',
              ['Webhook', 'Event', 'Status', 'Attempts', 'Answer', 'Created'],
              deliveries.map((d) => [
                h('a', { href: `#/webhooks/${d.webhookId}` }, d.url),
                d.event,
                h('span', { class: `st st-${d.status}` }, d.status),
                String(d.attempts),
                d.responseStatus === null ? (d.lastError ?? '—') : String(d.responseStatus),
                when(d.createdAt),
              ]),
            ),
          )
        : h('p', null, 'No webhook delivery of these events.'),
    ),
    h('p', null, h('a', { href: '#/messages' }, 'Back to the search')),
  );
}

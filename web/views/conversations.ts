import { h, replace, table, when } from '../dom.ts';
import { api } from '../session.ts';
import type { PageContext } from '../page.ts';

interface Conversation {
  id: string;
  participant: string;
  participantName: string | null;
  lastMessage: string;
  lastMessageAt: string;
  unreadCount: number;
}
interface Message {
  id: string;
  direction: 'sent' | 'received';
  status: string;
  to: string;
  from: string | null;
  body: string;
  lastError: string | null;
  createdAt: string;
  queuedAt: string | null;
  sentAt: string | null;
  deliveredAt: string | null;
  readAt: string | null;
}

/** Conversations with search; bodies and names are always text. */
export async function conversationsView({ main }: PageContext): Promise<void> {
  const list = h('div', { id: 'conversation-list' });
  const search = h('input', { id: 'conversation-search', type: 'search', placeholder: 'name, phone or email' });
  async function load(): Promise<void> {
    const q = search.value.trim();
    const page = await api<{ data: Conversation[] }>(
      'GET',
      `/api/v1/conversations?limit=100${q ? `&search=${encodeURIComponent(q)}` : ''}`,
    );
    replace(
      list,
      page.data.length === 0
        ? h('p', null, 'No conversations.')
        : table(
            'Conversations',
            ['With', 'Last message', 'At', 'Unread'],
            page.data.map((c) => [
              h(
                'a',
                { href: `#/conversations/${c.id}` },
                c.participantName ? `${c.participantName} (${c.participant})` : c.participant,
              ),
              h('span', { class: 'body' }, c.lastMessage),
              when(c.lastMessageAt),
              c.unreadCount,
            ]),
          ),
    );
  }
  replace(
    main,
    h('h1', null, 'Conversations'),
    h(
      'form',
      { role: 'search', onsubmit: (e: Event) => (e.preventDefault(), void load()) },
      h('label', { for: 'conversation-search' }, 'Search '),
      search,
      h('button', { type: 'submit' }, 'Search'),
    ),
    list,
  );
  await load();
}

export async function conversationView({ main }: PageContext, id?: string): Promise<void> {
  if (!id) return;
  const c = await api<Conversation & { messages: Message[] }>('GET', `/api/v1/conversations/${id}?limit=100`);
  const stamps = (m: Message) =>
    [
      ['queued', m.queuedAt],
      ['sent', m.sentAt],
      ['delivered', m.deliveredAt],
      ['read', m.readAt],
    ]
      .filter(([, t]) => t)
      .map(([k, t]) => `${k} ${when(t)}`)
      .join(' · ');
  replace(
    main,
    h('p', null, h('a', { href: '#/conversations' }, '← Conversations')),
    h('h1', null, c.participantName ? `${c.participantName} (${c.participant})` : c.participant),
    h(
      'ol',
      { class: 'thread', id: 'thread' },
      [...c.messages]
        .reverse()
        .map((m) =>
          h(
            'li',
            { class: `msg ${m.direction}` },
            h('p', { class: 'body' }, m.body),
            h(
              'p',
              { class: 'meta' },
              `${m.direction === 'sent' ? 'Sent' : 'Received'} ${when(m.createdAt)} — `,
              h('span', { class: `st st-${m.status}` }, m.status),
              stamps(m) ? ` (${stamps(m)})` : '',
              m.lastError ? ` — ${m.lastError}` : '',
            ),
          ),
        ),
    ),
  );
}

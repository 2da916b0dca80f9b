import { announce, field, h, replace, table, when } from '../dom.ts';
import { cursorPages } from '../cursor-pages.ts';
import { api, can, describeError } from '../session.ts';
import type { PageContext } from '../page.ts';

/** A message as the history lists it (and `GET /api/v1/messages/{id}` answers it). */
export interface Message {
  id: string;
  status: string;
  direction: 'sent' | 'received';
  to: string;
  from: string | null;
  body: string;
  createdAt: string;
  fromNumber?: string | null;
  priority: number;
  attachments: string[];
  conversationId: string;
  jobId?: string | null;
  /** Tapbacks on it, one per sender; a received reply's message; a received message's sender edited or unsent it. */
  reactions?: Array<{ reaction: string; emoji?: string; from: string; at: string }>;
  replyTo?: string;
  editedAt?: string;
  unsentAt?: string;
}

const statuses = ['queued', 'processing', 'sent', 'delivered', 'failed'] as const;
const pageSize = 100;

/** Send one message: recipient, text, priority and, when the organization has registered numbers, the number to send from. */
export async function sendView({ me, main }: PageContext): Promise<void> {
  if (!can(me, 'member')) {
    replace(main, h('h1', null, 'Send a message'), h('p', null, 'Your role (viewer) can read messages but not send.'));
    return;
  }
  const phones = await api<{ data: Array<{ number: string; label: string | null; status: string }> }>(
    'GET',
    '/api/v1/phone-numbers',
  );
  const to = h('input', { id: 'send-to', required: true, autocomplete: 'off', 'aria-describedby': 'send-to-hint' });
  const text = h('textarea', { id: 'send-body', rows: '4', required: true, maxlength: '10000' });
  const priority = h('input', {
    id: 'send-priority',
    type: 'number',
    min: '0',
    max: '100',
    value: '0',
    'aria-describedby': 'send-priority-hint',
  });
  const from = h(
    'select',
    { id: 'send-from' },
    h('option', { value: '' }, 'Any (the relay chooses)'),
    phones.data
      .filter((p) => p.status === 'active')
      .map((p) => h('option', { value: p.number }, p.label ? `${p.number} (${p.label})` : p.number)),
  );
  const error = h('p', { class: 'error', role: 'alert', id: 'send-error' });
  const done = h('p', { id: 'send-done', role: 'status' });
  const submit = h('button', { type: 'submit' }, 'Send');
  const form = h(
    'form',
    {
      id: 'send-one',
      async onsubmit(e: Event) {
        e.preventDefault();
        error.textContent = '';
        done.textContent = '';
        submit.disabled = true;
        try {
          const body = {
            to: to.value.trim(),
            body: text.value,
            priority: Number(priority.value || 0),
            ...(from.value ? { fromNumber: from.value } : {}),
          };
          const sent = await api<{ id: string; status: string }>('POST', '/api/v1/messages', body);
          replace(done, 'Queued: ', h('a', { href: `#/messages/${sent.id}` }, sent.id));
          announce('Message queued');
          text.value = '';
        } catch (err) {
          error.textContent = describeError(err);
        } finally {
          submit.disabled = false;
        }
      },
    },
    field(
      'send-to',
      'To',
      to,
      'A phone number (E.164 or national with a country code), an email address, or a contact group ID.',
    ),
    field('send-body', 'Message', text),
    field('send-priority', 'Priority', priority, '0 to 100; higher is sent first.'),
    field('send-from', 'From number', from),
    error,
    submit,
    done,
  );
  replace(main, h('h1', null, 'Send a message'), form);
}

/** Search messages by recipient, status, date range or bulk job; each result opens its status record and timeline. */
export function messagesView({ main }: PageContext): void {
  const recipient = h('input', { id: 'search-recipient', autocomplete: 'off' });
  const status = h(
    'select',
    { id: 'search-status' },
    h('option', { value: '' }, 'Any'),
    statuses.map((s) => h('option', { value: s }, s)),
  );
  const since = h('input', { id: 'search-from', type: 'datetime-local' });
  const until = h('input', { id: 'search-to', type: 'datetime-local' });
  const job = h('input', { id: 'search-job', autocomplete: 'off', 'aria-describedby': 'search-job-hint' });
  const out = h('section', { id: 'search-results', 'aria-live': 'polite', 'aria-label': 'Search results' });
  const form = h(
    'form',
    {
      id: 'message-search',
      class: 'filters',
      onsubmit(e: Event) {
        e.preventDefault();
        search();
      },
    },
    field('search-recipient', 'Recipient (phone or email)', recipient),
    field('search-status', 'Status', status),
    field('search-from', 'Created from', since),
    field('search-to', 'Created before', until),
    field('search-job', 'Bulk job', job, 'A job ID: its messages only.'),
    h('button', { type: 'submit' }, 'Search'),
  );

  // The one on opening may still be reading when the reader searches: only the latest search shows its answer.
  const search = cursorPages(out, {
    reading: 'Searching…',
    read(after) {
      const qs = new URLSearchParams({ limit: String(pageSize) });
      if (recipient.value.trim()) qs.set('participant', recipient.value.trim());
      if (status.value) qs.set('status', status.value);
      if (job.value.trim()) qs.set('jobId', job.value.trim());
      if (since.value) qs.set('since', new Date(since.value).toISOString());
      if (until.value) qs.set('until', new Date(until.value).toISOString());
      if (after) qs.set('after', after);
      return api<{ data: Message[]; nextCursor?: string | null; pagination: { total: number | null } }>(
        'GET',
        `/api/v1/messages?${qs}`,
      );
    },
    render: (page) => {
      // A page read by cursor counts nothing: its total is null.
      const total = page.pagination.total;
      return [
        h(
          'h2',
          null,
          total === null ? `Older messages: ${page.data.length}` : `${total} message${total === 1 ? '' : 's'}`,
        ),
        page.data.length
          ? table(
              'Messages found, newest first',
              ['Message', 'Direction', 'Recipient or sender', 'Status', 'Created', 'Text'],
              page.data.map((m) => [
                h('a', { href: `#/messages/${m.id}` }, m.id),
                m.direction,
                m.direction === 'sent' ? m.to : (m.from ?? m.to),
                h('span', { class: `st st-${m.status}` }, m.status),
                when(m.createdAt),
                h('span', { class: 'body' }, m.body),
              ]),
            )
          : null,
      ];
    },
    more: `Next ${pageSize}`,
    said: ({ data, pagination: { total } }) =>
      total === null ? `${data.length} more messages` : `${total} message${total === 1 ? '' : 's'} found`,
  });

  replace(main, h('h1', null, 'Messages'), form, out);
  search();
}

import { cursorPages } from '../cursor-pages.ts';
import { field, h, replace, table, when } from '../dom.ts';
import { api } from '../session.ts';
import type { PageContext } from '../page.ts';

/** An entry as `GET /api/v1/request-log` lists it. */
interface RequestLogEntry {
  id: string;
  at: string;
  method: string;
  route: string;
  path: string;
  status: number;
  keyId: string | null;
  requestId: string;
  durationMs: number;
  error: string | null;
}

const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
const pageSize = 50;

/** A status as its class shows it: 2xx and 3xx as done, 4xx as the caller's, 5xx as ours. */
const statusClass = (status: number) => (status >= 500 ? 'st-failed' : status >= 400 ? 'st-queued' : 'st-delivered');

/** The organization's API requests of the last 7 days, newest first, with the API's filters; a request shows about a second after its answer. */
export function requestLogView({ main }: PageContext): void {
  const status = h('input', {
    id: 'log-status',
    autocomplete: 'off',
    placeholder: '4xx',
    pattern: '[1-5]([0-9]{2}|[xX]{2})',
    'aria-describedby': 'log-status-hint',
  });
  const method = h(
    'select',
    { id: 'log-method' },
    h('option', { value: '' }, 'Any'),
    methods.map((m) => h('option', { value: m }, m)),
  );
  const path = h('input', {
    id: 'log-path',
    autocomplete: 'off',
    placeholder: '/api/v1/messages',
    'aria-describedby': 'log-path-hint',
  });
  const keyId = h('input', { id: 'log-key', autocomplete: 'off' });
  const requestId = h('input', { id: 'log-request-id', autocomplete: 'off' });
  const since = h('input', { id: 'log-since', type: 'datetime-local' });
  const until = h('input', { id: 'log-until', type: 'datetime-local' });
  const out = h('section', { id: 'request-log', 'aria-live': 'polite', 'aria-label': 'Requests' });
  const form = h(
    'form',
    {
      id: 'request-log-filters',
      class: 'filters',
      onsubmit(e: Event) {
        e.preventDefault();
        show();
      },
    },
    field('log-status', 'Status', status, 'A status (404) or a class (4xx).'),
    field('log-method', 'Method', method),
    field('log-path', 'Path starts with', path, 'Without the query string.'),
    field('log-key', 'API key ID', keyId),
    field('log-request-id', 'Request ID', requestId),
    field('log-since', 'From', since),
    field('log-until', 'Before', until),
    h('button', { type: 'submit' }, 'Show'),
  );

  const show = cursorPages(out, {
    reading: 'Reading…',
    read(after) {
      const qs = new URLSearchParams({ limit: String(pageSize) });
      // Each filter as the API names it; an empty field is no filter.
      const filters = {
        status: status.value.toLowerCase(),
        method: method.value,
        path: path.value,
        keyId: keyId.value,
      };
      for (const [name, value] of Object.entries({ ...filters, requestId: requestId.value }))
        if (value.trim()) qs.set(name, value.trim());
      for (const [name, input] of Object.entries({ since, until }))
        if (input.value) qs.set(name, new Date(input.value).toISOString());
      if (after) qs.set('after', after);
      return api<{ data: RequestLogEntry[]; nextCursor: string | null }>('GET', `/api/v1/request-log?${qs}`);
    },
    render: ({ data }, after) => [
      data.length
        ? table(
            'API requests, newest first',
            ['Time', 'Method', 'Path', 'Status', 'API key', 'Request ID', 'Duration', 'Error'],
            data.map((e) => [
              when(e.at),
              e.method,
              h('code', { title: e.route }, e.path),
              h('span', { class: `st ${statusClass(e.status)}` }, String(e.status)),
              e.keyId ?? 'user session',
              h('code', null, e.requestId),
              `${e.durationMs} ms`,
              e.error ?? '—',
            ]),
            (i) => ({ 'data-request-id': data[i]!.requestId }),
          )
        : h('p', null, after ? 'No older requests.' : 'No requests match in the last 7 days.'),
    ],
    more: `Older ${pageSize}`,
    said: ({ data }) => `${data.length} request${data.length === 1 ? '' : 's'}`,
  });

  replace(
    main,
    h('h1', null, 'Request log'),
    h(
      'p',
      { class: 'hint' },
      "The organization's API requests of the last 7 days, newest first. A request shows about a second after its answer.",
    ),
    form,
    out,
  );
  show();
}

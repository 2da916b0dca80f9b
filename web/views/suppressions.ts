import { cursorPages } from '../cursor-pages.ts';
import { announce, field, h, replace, table, when } from '../dom.ts';
import { api, can, describeError } from '../session.ts';
import type { PageContext } from '../page.ts';

/** A handle on the suppression list, as `GET /api/v1/suppressions` lists it. */
interface Suppression {
  id: string;
  handle: string;
  reason: string | null;
  source: 'keyword' | 'api' | 'import';
  createdAt: string;
}

interface OptOutSettings {
  stopKeywords?: string[];
  helpText?: string | null;
}

const pageSize = 50;
const sources: Record<Suppression['source'], string> = {
  keyword: 'texted a stop keyword',
  api: 'added by hand or API',
  import: 'imported',
};

/**
 * The organization's suppression list: who opted out, how and when; a member
 * adds a handle (it only ever stops sends), an admin takes one off (it lets
 * sends reach someone who opted out). The stop keywords and help text in force
 * are shown beside it.
 */
export async function suppressionsView(ctx: PageContext): Promise<void> {
  const { me, main } = ctx;
  const settings = await api<OptOutSettings>('GET', '/api/v1/organization/opt-outs');
  const lookFor = h('input', { id: 'optout-find', autocomplete: 'off', placeholder: '+14155550100' });
  const out = h('section', { id: 'suppressions', 'aria-live': 'polite', 'aria-label': 'Suppression list' });
  const error = h('p', { class: 'error', role: 'alert', id: 'optout-error' });

  const show = cursorPages(out, {
    reading: 'Reading…',
    read(after) {
      const qs = new URLSearchParams({ limit: String(pageSize) });
      if (lookFor.value.trim()) qs.set('handle', lookFor.value.trim());
      if (after) qs.set('after', after);
      return api<{ data: Suppression[]; nextCursor: string | null }>('GET', `/api/v1/suppressions?${qs}`);
    },
    render: ({ data }, after) => [
      data.length
        ? table(
            'Suppressed handles, newest first',
            ['Handle', 'How', 'Reason', 'Since', ...(can(me, 'admin') ? [''] : [])],
            data.map((s) => [
              h('code', null, s.handle),
              sources[s.source],
              s.reason ?? '—',
              when(s.createdAt),
              ...(can(me, 'admin')
                ? [
                    h(
                      'button',
                      {
                        type: 'button',
                        class: 'secondary',
                        'aria-label': `Remove ${s.handle}`,
                        onclick: async () => {
                          if (!confirm(`Remove ${s.handle}? Sends will reach them again.`)) return;
                          try {
                            await api('DELETE', `/api/v1/suppressions/${encodeURIComponent(s.handle)}`);
                            announce(`${s.handle} removed`);
                            show();
                          } catch (err) {
                            error.textContent = describeError(err);
                          }
                        },
                      },
                      'Remove',
                    ),
                  ]
                : []),
            ]),
            (i) => ({ 'data-handle': data[i]!.handle }),
          )
        : h('p', null, after ? 'No more handles.' : 'Nobody is on the suppression list.'),
    ],
    more: `Next ${pageSize}`,
    said: ({ data }) => `${data.length} handle${data.length === 1 ? '' : 's'}`,
  });

  const handle = h('input', { id: 'optout-handle', name: 'handle', required: true, maxlength: '320' });
  const reason = h('input', { id: 'optout-reason', name: 'reason', maxlength: '500' });
  const addForm = can(me, 'member')
    ? h(
        'form',
        {
          id: 'optout-form',
          async onsubmit(e: Event) {
            e.preventDefault();
            error.textContent = '';
            try {
              await api('POST', '/api/v1/suppressions', {
                handle: handle.value.trim(),
                ...(reason.value.trim() ? { reason: reason.value.trim() } : {}),
              });
              announce(`${handle.value.trim()} added`);
              handle.value = '';
              reason.value = '';
              show();
            } catch (err) {
              error.textContent = describeError(err);
            }
          },
        },
        h('h2', null, 'Add a handle'),
        field('optout-handle', 'Phone number or email', handle),
        field('optout-reason', 'Reason (optional)', reason),
        error,
        h('button', { type: 'submit' }, 'Add'),
      )
    : null;

  const keywords = settings.stopKeywords ?? [];
  replace(
    main,
    h('h1', null, 'Opt-outs'),
    h(
      'p',
      { class: 'hint' },
      'Every send checks this list: a single send to a handle on it is refused, a bulk job skips it. ',
      'A received STOP, STOPALL, UNSUBSCRIBE, CANCEL, END or QUIT puts its sender here; START or UNSTOP takes them off.',
    ),
    h(
      'dl',
      { class: 'facts', id: 'optout-settings' },
      h('dt', null, "The organization's own stop keywords"),
      h('dd', null, keywords.length ? keywords.join(', ') : 'none'),
      h('dt', null, 'Help text (the answer to HELP)'),
      h('dd', null, settings.helpText ?? 'none: HELP is not answered'),
    ),
    h(
      'form',
      {
        id: 'optout-filter',
        class: 'filters',
        onsubmit(e: Event) {
          e.preventDefault();
          show();
        },
      },
      field('optout-find', 'Handle', lookFor, 'Empty: the whole list.'),
      h('button', { type: 'submit' }, 'Show'),
    ),
    out,
    addForm,
  );
  show();
}

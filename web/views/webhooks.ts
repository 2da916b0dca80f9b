import { h, replace, table, when } from '../dom.ts';
import { api, ApiError, can } from '../session.ts';
import { webhookEvents } from '../event-names.ts';
import type { PageContext } from '../page.ts';

/** Events a new webhook leaves out unless ticked: one per message, or several per send. */
const optInEvents = new Set<string>(['message.queued', 'message.checkpoint']);

interface Webhook {
  id: string;
  url: string;
  events: string[];
  enabled: boolean;
  hasSecret: boolean;
  createdAt: string;
}
interface Delivery {
  id: string;
  event: string;
  status: string;
  attempts: number;
  responseStatus: number | null;
  lastError: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
}

export async function webhooksView({ me, main }: PageContext): Promise<void> {
  const hooks = await api<{ data: Webhook[] }>('GET', '/api/v1/webhooks?limit=100');
  const admin = can(me, 'admin');
  const error = h('p', { class: 'error', role: 'alert' });
  const create = admin
    ? h(
        'form',
        {
          id: 'webhook-form',
          async onsubmit(e: Event) {
            e.preventDefault();
            const data = new FormData(e.target as HTMLFormElement);
            const events = data.getAll('events').map(String);
            const secret = String(data.get('secret') ?? '');
            try {
              await api('POST', '/api/v1/webhooks', {
                url: String(data.get('url')),
                events,
                ...(secret ? { secret } : {}),
              });
              await webhooksView({ me, main, onLeave: () => {} });
            } catch (err) {
              error.textContent =
                err instanceof ApiError && err.details.length
                  ? err.details.map((d) => `${d.path} ${d.message}`).join('; ')
                  : (err as Error).message;
            }
          },
        },
        h('h2', null, 'New webhook'),
        h(
          'div',
          { class: 'field' },
          h('label', { for: 'webhook-url' }, 'URL (http or https, public address)'),
          h('input', { id: 'webhook-url', name: 'url', type: 'url', required: true }),
        ),
        h(
          'fieldset',
          null,
          h('legend', null, 'Events'),
          webhookEvents.map((ev) =>
            h(
              'label',
              { class: 'check' },
              h('input', { type: 'checkbox', name: 'events', value: ev, checked: !optInEvents.has(ev) }),
              ` ${ev}`,
            ),
          ),
        ),
        h(
          'div',
          { class: 'field' },
          h('label', { for: 'webhook-secret' }, 'Signing secret (optional)'),
          h('input', { id: 'webhook-secret', name: 'secret', type: 'password', autocomplete: 'off' }),
        ),
        error,
        h('button', { type: 'submit' }, 'Create webhook'),
      )
    : null;
  replace(
    main,
    h('h1', null, 'Webhooks'),
    hooks.data.length === 0
      ? h('p', null, 'No webhooks.')
      : table(
          'Webhooks',
          ['URL', 'Events', 'State', 'Created', ''],
          hooks.data.map((w) => [
            h('a', { href: `#/webhooks/${w.id}` }, w.url),
            w.events.join(', '),
            w.enabled ? 'enabled' : 'disabled',
            when(w.createdAt),
            admin
              ? h(
                  'button',
                  {
                    type: 'button',
                    'aria-label': `${w.enabled ? 'Disable' : 'Enable'} ${w.url}`,
                    onclick: async () => {
                      await api('PATCH', `/api/v1/webhooks/${w.id}/toggle`, {});
                      await webhooksView({ me, main, onLeave: () => {} });
                    },
                  },
                  w.enabled ? 'Disable' : 'Enable',
                )
              : '',
          ]),
        ),
    create,
  );
}

/** A webhook's delivery log, newest first, with retry. */
export async function webhookView({ me, main }: PageContext, id?: string): Promise<void> {
  if (!id) return;
  const hook = await api<Webhook>('GET', `/api/v1/webhooks/${id}`);
  const log = await api<{ data: Delivery[] }>('GET', `/api/v1/webhooks/${id}/deliveries?limit=100`);
  const admin = can(me, 'admin');
  replace(
    main,
    h('p', null, h('a', { href: '#/webhooks' }, '← Webhooks')),
    h('h1', null, 'Webhook ', h('code', null, hook.url)),
    h('p', null, `${hook.enabled ? 'Enabled' : 'Disabled'}; events: ${hook.events.join(', ')}`),
    h('h2', null, 'Delivery log'),
    log.data.length === 0
      ? h('p', null, 'No deliveries yet.')
      : table(
          'Deliveries',
          ['Event', 'Status', 'Attempts', 'Answer', 'Error', 'Next attempt', 'Created', ''],
          log.data.map((d) => [
            d.event,
            d.status,
            d.attempts,
            d.responseStatus ?? '—',
            d.lastError ?? '',
            when(d.nextAttemptAt),
            when(d.createdAt),
            admin
              ? h(
                  'button',
                  {
                    type: 'button',
                    onclick: async () => {
                      await api('POST', `/api/v1/webhooks/${id}/deliveries/${d.id}/retry`, {});
                      await webhookView({ me, main, onLeave: () => {} }, id);
                    },
                  },
                  'Retry',
                )
              : '',
          ]),
        ),
  );
}

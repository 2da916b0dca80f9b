import { h, replace, table, when } from '../dom.ts';
import { api, can } from '../session.ts';
import type { PageContext } from '../page.ts';

interface ApiKey {
  id: string;
  name: string;
  role: string;
  mode: 'live' | 'test';
  prefix: string;
  createdAt: string;
}

/** API keys: a new key is shown once, here, and never again; revoke ends it. */
export async function apiKeysView(ctx: PageContext, shown?: string): Promise<void> {
  const { me, main } = ctx;
  if (!can(me, 'admin'))
    return void replace(main, h('h1', null, 'API keys'), h('p', null, 'Only admins and owners manage API keys.'));
  const keys = await api<{ data: ApiKey[] }>('GET', '/api/v1/api-keys');
  const error = h('p', { class: 'error', role: 'alert', id: 'api-key-error' });
  replace(
    main,
    h('h1', null, 'API keys'),
    shown
      ? h(
          'div',
          { class: 'notice', role: 'alert' },
          h('p', null, 'Your new key. Copy it now: it is not shown again.'),
          h('pre', null, h('code', { id: 'new-key' }, shown)),
        )
      : null,
    keys.data.length === 0
      ? h('p', null, 'No API keys.')
      : table(
          'API keys',
          ['Name', 'Role', 'Mode', 'Starts with', 'Created', ''],
          keys.data.map((k) => [
            k.name,
            k.role,
            k.mode,
            k.prefix,
            when(k.createdAt),
            h(
              'button',
              {
                type: 'button',
                'aria-label': `Revoke ${k.name}`,
                onclick: async () => {
                  if (confirm(`Revoke ${k.name}? Clients using it stop working.`)) {
                    await api('DELETE', `/api/v1/api-keys/${k.id}`);
                    await apiKeysView(ctx);
                  }
                },
              },
              'Revoke',
            ),
          ]),
        ),
    h(
      'form',
      {
        id: 'api-key-form',
        async onsubmit(e: Event) {
          e.preventDefault();
          const data = new FormData(e.target as HTMLFormElement);
          try {
            const created = await api<{ key: string }>('POST', '/api/v1/api-keys', {
              name: String(data.get('name')),
              role: String(data.get('role')),
              mode: String(data.get('mode')),
            });
            await apiKeysView(ctx, created.key);
          } catch (err) {
            error.textContent = (err as Error).message;
          }
        },
      },
      h('h2', null, 'New key'),
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'key-name' }, 'Name'),
        h('input', { id: 'key-name', name: 'name', required: true, maxlength: '200' }),
      ),
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'key-role' }, 'Role'),
        h(
          'select',
          { id: 'key-role', name: 'role' },
          ['member', 'viewer', 'admin'].map((r) => h('option', { value: r }, r)),
        ),
      ),
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'key-mode' }, 'Mode'),
        h(
          'select',
          { id: 'key-mode', name: 'mode', 'aria-describedby': 'key-mode-help' },
          // Test data shows test keys only: a live key is made from live data.
          (me.livemode ? ['live', 'test'] : ['test']).map((m) => h('option', { value: m }, m)),
        ),
        h(
          'p',
          { id: 'key-mode-help', class: 'hint' },
          'A test key (rb_test_) reaches only test data, sent by the built-in simulated relay: no Mac needed.',
        ),
      ),
      error,
      h('button', { type: 'submit' }, 'Create key'),
    ),
  );
}

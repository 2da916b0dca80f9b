import { h, replace } from '../dom.ts';
import { api, apiAnswer, can, type Me } from '../session.ts';
import type { PageContext } from '../page.ts';
import { optOutForm, paceForm, type OptOutSettings, type Pace } from './settings-forms.ts';

interface RetryPolicy {
  maxAttempts: number;
  firstRetryMs: number;
  factor: number;
  maxDelayMs: number;
  jitter: number;
}

const facts = (rows: Array<[string, string | Node]>) =>
  h(
    'dl',
    { class: 'facts' },
    rows.flatMap(([k, v]) => [h('dt', null, k), h('dd', null, v)]),
  );

function duration(ms: number): string {
  if (ms < 60_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toLocaleString('en', { maximumFractionDigits: 1 })} h`;
}

/** The waits between attempts, as the policy gives them before jitter. */
function waits(p: RetryPolicy): string {
  const out: string[] = [];
  for (let i = 0; i < p.maxAttempts - 1; i++)
    out.push(duration(Math.min(p.firstRetryMs * p.factor ** i, p.maxDelayMs)));
  return out.join(', ') || 'none';
}

function offset(): string {
  const minutes = -new Date().getTimezoneOffset();
  const sign = minutes < 0 ? '−' : '+';
  const abs = Math.abs(minutes);
  return `UTC${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

/** The organization's settings: what admins may change (the sender pace and line health, the stop keywords and help text) and what is in force, read-only. */
export async function settingsView({ me, main }: PageContext): Promise<void> {
  if (!can(me, 'admin')) {
    replace(
      main,
      h('h1', null, 'Settings'),
      h('p', null, `Settings are for admins and owners; your role is ${me.role}.`),
    );
    return;
  }
  const [pace, policy, answer, optOuts] = await Promise.all([
    api<Pace>('GET', '/api/v1/organization/pacing'),
    api<RetryPolicy>('GET', '/api/v1/webhooks/retry-policy'),
    apiAnswer<Me>('GET', '/api/v1/me'),
    api<OptOutSettings>('GET', '/api/v1/organization/opt-outs'),
  ]);
  const base = `${location.origin}/api/v1`;
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const limit = answer.headers.get('ratelimit-limit');
  const policyHeader = answer.headers.get('ratelimit-policy');
  replace(
    main,
    h('h1', null, 'Settings'),
    h(
      'div',
      { class: 'cards' },
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'settings-org' },
        h('h2', { id: 'settings-org' }, 'Organization'),
        facts([
          ['Name', h('span', { id: 'settings-org-name' }, me.organization?.name ?? '—')],
          ['Time zone', h('span', { id: 'settings-time-zone' }, `${zone} (${offset()})`)],
        ]),
        h(
          'p',
          { class: 'hint' },
          "Times are shown in each reader's own time zone (this browser's above); the API answers them in UTC. The name is the one given at sign-up.",
        ),
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'settings-api' },
        h('h2', { id: 'settings-api' }, 'API'),
        facts([
          ['Base URL', h('code', { id: 'settings-base-url' }, base)],
          ['Reference', h('a', { href: '/docs' }, 'API reference')],
        ]),
        h('p', { class: 'hint' }, 'Create a key under ', h('a', { href: '#/api-keys' }, 'API keys'), '.'),
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'settings-limits' },
        h('h2', { id: 'settings-limits' }, 'Rate limits in force'),
        facts([
          ['Requests a minute', h('span', { id: 'settings-rate-limit' }, limit ?? '—')],
          ['Policy', h('code', null, policyHeader ?? '—')],
        ]),
        h(
          'p',
          { class: 'hint' },
          'Per organization, as every answer states in its RateLimit headers; a 429 says when to try again. Set by the service operator.',
        ),
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'settings-retry' },
        h('h2', { id: 'settings-retry' }, 'Webhook retry policy'),
        facts([
          ['Attempts in all', h('span', { id: 'settings-retry-attempts' }, String(policy.maxAttempts))],
          ['Waits between attempts', waits(policy)],
          ['Jitter', `±${Math.round(policy.jitter * 100)} %`],
        ]),
        h(
          'p',
          { class: 'hint' },
          'Read-only: set by the service operator. A Retry-After answer is honoured up to the longest wait.',
        ),
      ),
    ),
    paceForm(pace),
    optOutForm(optOuts),
  );
}

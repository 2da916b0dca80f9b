import './style.css';
import { announce, h, replace } from './dom.ts';
import { api, can, resume, session, signOut, type Me } from './session.ts';
import { authView } from './views/auth.ts';
import { apiKeysView } from './views/api-keys.ts';
import { bulkView } from './views/bulk.ts';
import { conversationsView, conversationView } from './views/conversations.ts';
import { jobsView, jobView } from './views/jobs.ts';
import { relaysView } from './views/relays.ts';
import { webhooksView, webhookView } from './views/webhooks.ts';
import { overviewView } from './views/overview.ts';
import { messagesView, messageView, sendView } from './views/messages.ts';
import { automationsView, automationView } from './views/automations.ts';
import { membersView } from './views/members.ts';
import type { PageContext } from './page.ts';

type Page = (ctx: PageContext, param?: string) => void | Promise<void>;

const routes: Array<{ pattern: RegExp; title: string; page: Page; nav?: string }> = [
  { pattern: /^#\/overview$/, title: 'Overview', page: overviewView, nav: 'overview' },
  { pattern: /^#\/send$/, title: 'Send a message', page: sendView, nav: 'send' },
  { pattern: /^#\/messages$/, title: 'Messages', page: messagesView, nav: 'messages' },
  { pattern: /^#\/messages\/([\w-]+)$/, title: 'Message', page: messageView, nav: 'messages' },
  { pattern: /^#\/automations$/, title: 'Automations', page: automationsView, nav: 'automations' },
  { pattern: /^#\/automations\/([\w-]+)$/, title: 'Automation', page: automationView, nav: 'automations' },
  { pattern: /^#\/members$/, title: 'Members and teams', page: membersView, nav: 'members' },
  { pattern: /^#\/bulk$/, title: 'Bulk send', page: bulkView, nav: 'bulk' },
  { pattern: /^#\/jobs$/, title: 'Bulk jobs', page: jobsView, nav: 'jobs' },
  { pattern: /^#\/jobs\/([\w-]+)$/, title: 'Bulk job', page: jobView, nav: 'jobs' },
  { pattern: /^#\/conversations$/, title: 'Conversations', page: conversationsView, nav: 'conversations' },
  { pattern: /^#\/conversations\/([\w-]+)$/, title: 'Conversation', page: conversationView, nav: 'conversations' },
  { pattern: /^#\/relays$/, title: 'Relays', page: relaysView, nav: 'relays' },
  { pattern: /^#\/webhooks$/, title: 'Webhooks', page: webhooksView, nav: 'webhooks' },
  { pattern: /^#\/webhooks\/([\w-]+)$/, title: 'Webhook', page: webhookView, nav: 'webhooks' },
  { pattern: /^#\/api-keys$/, title: 'API keys', page: apiKeysView, nav: 'api-keys' },
];

const root = document.getElementById('app')!;
let me: Me | undefined;
let leaving: Array<() => void> = [];

function navLinks(current: Me): Array<[string, string]> {
  const links: Array<[string, string]> = [['overview', 'Overview']];
  if (can(current, 'member')) links.push(['send', 'Send'], ['bulk', 'Bulk send']);
  links.push(
    ['jobs', 'Bulk jobs'],
    ['messages', 'Messages'],
    ['conversations', 'Conversations'],
    ['relays', 'Relays'],
    ['automations', 'Automations'],
    ['webhooks', 'Webhooks'],
    ['members', 'Members'],
  );
  if (can(current, 'admin')) links.push(['api-keys', 'API keys']);
  return links;
}

function shell(current: Me): HTMLElement {
  const main = h('main', { id: 'main', tabindex: '-1' });
  const teams =
    current.teams.length > 1
      ? h(
          'label',
          { class: 'team' },
          'Team ',
          h(
            'select',
            {
              id: 'team-switcher',
              onchange: (e: Event) => {
                session.teamId = (e.target as HTMLSelectElement).value;
                announce(`Team ${current.teams.find((t) => t.id === session.teamId)?.name ?? ''} selected`);
                void render();
              },
            },
            current.teams.map((t) => h('option', { value: t.id, selected: t.id === session.teamId }, t.name)),
          ),
        )
      : null;
  replace(
    root,
    h(
      'a',
      { class: 'skip', href: '#main', onclick: (e: Event) => (e.preventDefault(), main.focus()) },
      'Skip to content',
    ),
    h(
      'header',
      null,
      h('span', { class: 'brand' }, 'Relaybox'),
      h('span', { class: 'org' }, current.organization?.name ?? ''),
      teams,
      h('span', { class: 'who' }, `${current.user?.email ?? ''} (${current.role})`),
      h(
        'button',
        {
          type: 'button',
          id: 'sign-out',
          onclick: async () => {
            await signOut();
          },
        },
        'Sign out',
      ),
    ),
    h(
      'nav',
      { 'aria-label': 'Dashboard' },
      h(
        'ul',
        null,
        navLinks(current).map(([id, label]) => h('li', null, h('a', { href: `#/${id}`, 'data-nav': id }, label))),
        h('li', null, h('a', { href: '/docs' }, 'API reference')),
      ),
    ),
    main,
    h('p', { id: 'status', role: 'status', 'aria-live': 'polite', class: 'status-line' }),
  );
  return main;
}

async function render(): Promise<void> {
  for (const stop of leaving) stop();
  leaving = [];
  if (!session.signedIn) {
    replace(root, h('p', { id: 'status', role: 'status', 'aria-live': 'polite', class: 'status-line' }));
    authView(root, () => void start());
    return;
  }
  if (!me) return;
  const hash = location.hash || '#/overview';
  const route = routes.find((r) => r.pattern.test(hash)) ?? routes[0]!;
  const param = route.pattern.exec(hash)?.[1];
  const main = shell(me);
  document.title = `${route.title} · Relaybox`;
  for (const a of root.querySelectorAll<HTMLAnchorElement>('nav a[data-nav]')) {
    if (a.dataset.nav === route.nav) a.setAttribute('aria-current', 'page');
  }
  try {
    await route.page({ me, main, onLeave: (stop) => leaving.push(stop) }, param);
  } catch (err) {
    replace(main, h('p', { class: 'error', role: 'alert' }, err instanceof Error ? err.message : String(err)));
  }
}

async function start(): Promise<void> {
  me = await api<Me>('GET', '/api/v1/me');
  if (!session.teamId || !me.teams.some((t) => t.id === session.teamId))
    session.teamId = me.organization?.defaultTeamId ?? me.teams[0]?.id;
  await render();
}

session.whenSignedOut(() => {
  me = undefined;
  void render();
});
window.addEventListener('hashchange', () => void render());

void (async () => {
  if (await resume()) await start().catch(() => render());
  else await render();
})();

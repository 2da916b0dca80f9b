import './style.css';
import { h, replace } from './dom.ts';
import { api, resume, session, type Me } from './session.ts';
import { applyTheme, shell } from './shell.ts';
import { settingsView } from './views/settings.ts';
import { authView } from './views/auth.ts';
import { apiKeysView } from './views/api-keys.ts';
import { bulkView } from './views/bulk.ts';
import { conversationsView, conversationView } from './views/conversations.ts';
import { jobsView, jobView } from './views/jobs.ts';
import { relaysView } from './views/relays.ts';
import { webhooksView, webhookView } from './views/webhooks.ts';
import { overviewView } from './views/overview.ts';
import { messagesView, sendView } from './views/messages.ts';
import { messageView } from './views/message.ts';
import { automationsView, automationView } from './views/automations.ts';
import { membersView } from './views/members.ts';
import { requestLogView } from './views/request-log.ts';
import { suppressionsView } from './views/suppressions.ts';
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
  { pattern: /^#\/request-log$/, title: 'Request log', page: requestLogView, nav: 'request-log' },
  { pattern: /^#\/opt-outs$/, title: 'Opt-outs', page: suppressionsView, nav: 'opt-outs' },
  { pattern: /^#\/settings$/, title: 'Settings', page: settingsView, nav: 'settings' },
];

const root = document.getElementById('app')!;
let me: Me | undefined;
let leaving: Array<() => void> = [];

/** An address no page answers: say so, rather than show another page in its place. */
function notFound({ main }: PageContext): void {
  replace(
    main,
    h('h1', null, 'Page not found'),
    h('p', null, 'Nothing is at ', h('code', null, location.hash), '.'),
    h('p', null, h('a', { href: '#/overview' }, 'Go to the overview')),
  );
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
  // No address, or the sign-in page's, is the overview once signed in.
  const hash = ['', '#', '#/', '#/signin', '#/signup'].includes(location.hash) ? '#/overview' : location.hash;
  const route: (typeof routes)[number] = routes.find((r) => r.pattern.test(hash)) ?? {
    title: 'Page not found',
    page: notFound,
    pattern: /$^/,
  };
  const param = route.pattern.exec(hash)?.[1];
  const frame = shell(
    me,
    () => void render(),
    () => {
      // The teams of the other data are others: its default team is chosen again.
      session.teamId = undefined;
      void start().catch(() => render());
    },
  );
  replace(root, frame.nodes);
  const main = frame.main;
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
applyTheme();

void (async () => {
  if (await resume()) await start().catch(() => render());
  else await render();
})();

import { announce, h } from './dom.ts';
import { can, session, signOut, type Me } from './session.ts';

const svgNs = 'http://www.w3.org/2000/svg';
function svg(tag: string, attrs: Record<string, string>, ...children: SVGElement[]): SVGElement {
  const el = document.createElementNS(svgNs, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  el.append(...children);
  return el;
}

/** The mark: a message bubble with a relay's arrow through it, drawn inline (no request, works offline). */
export function logo(size = 28): SVGElement {
  return svg(
    'svg',
    { width: String(size), height: String(size), viewBox: '0 0 32 32', 'aria-hidden': 'true', focusable: 'false' },
    svg('rect', { x: '1', y: '1', width: '30', height: '30', rx: '8', fill: '#0b5cad' }),
    svg('path', {
      d: 'M8 10.5A2.5 2.5 0 0 1 10.5 8h11A2.5 2.5 0 0 1 24 10.5v7a2.5 2.5 0 0 1-2.5 2.5H14l-4.5 4v-4A2.5 2.5 0 0 1 8 17.5z',
      fill: '#fff',
    }),
    svg('path', {
      d: 'M12 14h8m-3-3 3 3-3 3',
      stroke: '#0b5cad',
      'stroke-width': '2',
      fill: 'none',
      'stroke-linecap': 'round',
      'stroke-linejoin': 'round',
    }),
  );
}

export const brand = () => h('a', { class: 'brand', href: '#/overview' }, logo(), 'Relaybox');

type Theme = 'light' | 'dark';
const themeKey = 'relaybox-theme';

const systemDark = matchMedia('(prefers-color-scheme: dark)');
const chosen = (): Theme | null => {
  const stored = localStorage.getItem(themeKey);
  return stored === 'light' || stored === 'dark' ? stored : null;
};
const currentTheme = (): Theme => chosen() ?? (systemDark.matches ? 'dark' : 'light');

function setTheme(theme: Theme): void {
  document.documentElement.dataset.theme = theme;
  document.dispatchEvent(new Event('themechange'));
}

/** The theme the reader chose on this browser, else the system's, followed as it changes. Only the choice is kept, nothing of the session. */
export function applyTheme(): void {
  setTheme(currentTheme());
  systemDark.addEventListener('change', () => chosen() ?? setTheme(currentTheme()));
}

function themeToggle(): HTMLButtonElement {
  const button = h('button', { type: 'button', class: 'secondary', id: 'theme-toggle' });
  const show = () => button.setAttribute('aria-pressed', String(currentTheme() === 'dark'));
  button.textContent = 'Dark theme';
  button.addEventListener('click', () => {
    const next: Theme = currentTheme() === 'dark' ? 'light' : 'dark';
    localStorage.setItem(themeKey, next);
    setTheme(next);
    show();
  });
  show();
  return button;
}

/** The sidebar's sections and links; what a role cannot use is left out. */
function sections(me: Me): Array<[string, Array<[string, string]>]> {
  const messaging: Array<[string, string]> = [];
  if (can(me, 'member')) messaging.push(['send', 'Send']);
  messaging.push(['messages', 'Messages'], ['conversations', 'Conversations']);
  if (can(me, 'member')) messaging.push(['bulk', 'Bulk send']);
  messaging.push(['jobs', 'Bulk jobs']);
  const organization: Array<[string, string]> = [['members', 'Members']];
  if (can(me, 'admin')) organization.push(['api-keys', 'API keys'], ['settings', 'Settings']);
  return [
    [
      'Monitor',
      [
        ['overview', 'Overview'],
        ['request-log', 'Request log'],
      ],
    ],
    ['Messaging', messaging],
    [
      'Delivery',
      [
        ['relays', 'Relays'],
        ['opt-outs', 'Opt-outs'],
        ['automations', 'Automations'],
        ['webhooks', 'Webhooks'],
      ],
    ],
    ['Organization', organization],
  ];
}

/** The frame every signed-in page shares: skip link, sidebar (a top bar with a menu on narrow screens), page, status toast. */
export function shell(
  me: Me,
  onTeamChange: () => void,
  onModeChange: () => void,
): { nodes: Node[]; main: HTMLElement } {
  const main = h('main', { id: 'main', tabindex: '-1' });
  const testData = !me.livemode;
  const teams =
    me.teams.length > 1
      ? h(
          'label',
          { class: 'team field' },
          'Team',
          h(
            'select',
            {
              id: 'team-switcher',
              onchange: (e: Event) => {
                session.teamId = (e.target as HTMLSelectElement).value;
                announce(`Team ${me.teams.find((t) => t.id === session.teamId)?.name ?? ''} selected`);
                onTeamChange();
              },
            },
            me.teams.map((t) => h('option', { value: t.id, selected: t.id === session.teamId }, t.name)),
          ),
        )
      : null;
  const side = h('header', { class: 'side' });
  const menu = h(
    'button',
    {
      type: 'button',
      class: 'menu-button secondary',
      'aria-expanded': 'false',
      'aria-controls': 'sidebar-nav',
      onclick: () => {
        const open = side.classList.toggle('open');
        menu.setAttribute('aria-expanded', String(open));
      },
    },
    'Menu',
  );
  side.append(
    brand(),
    menu,
    h(
      'nav',
      { id: 'sidebar-nav', 'aria-label': 'Dashboard' },
      sections(me).flatMap(([title, links], i) => [
        h('h2', { id: `nav-section-${i}` }, title),
        h(
          'ul',
          { 'aria-labelledby': `nav-section-${i}` },
          links.map(([id, label]) => h('li', null, h('a', { href: `#/${id}`, 'data-nav': id }, label))),
        ),
      ]),
      h('h2', { id: 'nav-section-help' }, 'Help'),
      h('ul', { 'aria-labelledby': 'nav-section-help' }, h('li', null, h('a', { href: '/docs' }, 'API reference'))),
    ),
    h(
      'div',
      { class: 'account' },
      h('span', { class: 'org' }, me.organization?.name ?? ''),
      teams,
      h(
        'button',
        {
          type: 'button',
          id: 'test-mode-toggle',
          class: 'secondary',
          'aria-pressed': String(testData),
          title: "Show the organization's test data: what test keys send, through the built-in simulated relay",
          onclick: () => {
            session.testMode = !testData;
            announce(session.testMode ? 'Showing test data' : 'Showing live data');
            onModeChange();
          },
        },
        'Test data',
      ),
      h('span', { class: 'who' }, `${me.user?.email ?? ''} (${me.role})`),
      h(
        'div',
        { class: 'row' },
        themeToggle(),
        h('button', { type: 'button', id: 'sign-out', class: 'secondary', onclick: () => void signOut() }, 'Sign out'),
      ),
    ),
  );
  const skip = h(
    'a',
    { class: 'skip', href: '#main', onclick: (e: Event) => (e.preventDefault(), main.focus()) },
    'Skip to content',
  );
  return {
    main,
    nodes: [
      skip,
      h(
        'div',
        { class: 'frame' },
        side,
        testData
          ? h(
              'div',
              { class: 'main-column' },
              h(
                'p',
                { class: 'test-banner', id: 'test-banner' },
                'Test data: what test keys create, sent by the built-in simulated relay. Live data is not shown.',
              ),
              main,
            )
          : main,
      ),
      h('p', { id: 'status', role: 'status', 'aria-live': 'polite', class: 'status-line' }),
    ],
  };
}

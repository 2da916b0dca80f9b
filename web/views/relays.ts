import { h, replace, table, when } from '../dom.ts';
import { api, can } from '../session.ts';
import { poll, type PageContext } from '../page.ts';
import { timeChart, type Chart } from '../chart.ts';
import { messageStats, volumeData } from '../stats.ts';
import { onlineShare, onlineSpans, type RelayEvent, type Span } from '../relay-history.ts';

interface Relay {
  id: string;
  name: string;
  status: 'online' | 'offline';
  degraded: string | null;
  lastHeartbeat: string | null;
  capacity: number;
  phoneNumbers: string[];
  systemInfo: { hostname: string; hostOsVersion: string };
}
interface Health {
  cpuPercent: number;
  memoryUsedBytes: number;
  memoryTotalBytes: number;
  messagesPerMinute: number;
  queueDepth: number;
  reportedAt: string;
}

interface PhoneNumber {
  id: string;
  number: string;
  label: string | null;
  status: 'active' | 'deactivated';
}
interface Usage {
  pace: {
    perSecond: number;
    burst: number;
    newContactsPerDay: number;
    unansweredCap?: number;
    followUpsPerDay?: number;
    quietHours?: { start: string; end: string } | false;
  };
  sentLastMinute: number;
  newContactsToday: number;
  followUpsToday?: number;
  awaitingReply?: number;
  nextSlotAt: string;
  nextNewContactSlotAt: string;
  nextFollowUpSlotAt?: string;
  /** The line's health over the recipients it first wrote to in the window (absent from an older service). */
  health?: {
    windowDays: number;
    recipients: number;
    replied: number;
    unanswered: number;
    replyRate: number | null;
    unansweredShare: number | null;
  };
}

/** A line's health beside its pace: recipients it waits on, follow-ups against their cap, its quiet hours. */
const lineHealth = (u: Usage): string =>
  [
    `${u.awaitingReply ?? 0} awaiting a reply (cap ${u.pace.unansweredCap ?? '—'} unanswered)`,
    `${u.followUpsToday ?? 0} of ${u.pace.followUpsPerDay ?? '—'} follow-ups`,
    u.pace.quietHours ? `quiet ${u.pace.quietHours.start}–${u.pace.quietHours.end} their time` : 'no quiet hours',
  ].join('; ');

const percent = (share: number) => `${Math.round(share * 100)}%`;

/** The line's reply rate and unanswered share over the recipients it first wrote to in the window, with their counts. */
function recentRecipients(u: Usage): string {
  const x = u.health;
  if (!x) return '—';
  if (x.replyRate === null || x.unansweredShare === null) return `no new recipient in ${x.windowDays} days`;
  return [
    `reply rate ${percent(x.replyRate)} (${x.replied} of ${x.recipients})`,
    `unanswered ${percent(x.unansweredShare)} (${x.unanswered} of ${x.recipients})`,
  ].join('; ');
}

/** When the line may send next: any message, a first message to a new recipient, a follow-up. */
const nextSlots = (u: Usage): string =>
  [
    `send ${soon(u.nextSlotAt)}`,
    `new contact ${soon(u.nextNewContactSlotAt)}`,
    `follow-up ${u.nextFollowUpSlotAt ? soon(u.nextFollowUpSlotAt) : '—'}`,
  ].join('; ');

/** What holds the line's messages now, as its usage tells: its rate, its caps, recipients it waits on for a reply. */
function holding(u: Usage, now = Date.now()): string {
  const until = (iso: string | undefined) => (iso && Date.parse(iso) > now + 500 ? iso : undefined);
  const held: string[] = [];
  const rate = until(u.nextSlotAt);
  if (rate) held.push(`its rate, until ${when(rate)}`);
  const contacts = until(u.nextNewContactSlotAt);
  if (contacts && u.newContactsToday >= u.pace.newContactsPerDay)
    held.push(`new recipients: the new-contact cap, until ${when(contacts)}`);
  else if (contacts && !rate) held.push(`new recipients: the spacing between first messages, until ${when(contacts)}`);
  const followUps = until(u.nextFollowUpSlotAt);
  if (followUps && !rate) held.push(`follow-ups: the follow-up cap, until ${when(followUps)}`);
  if ((u.awaitingReply ?? 0) > 0)
    held.push(
      `${u.awaitingReply} recipient${u.awaitingReply === 1 ? '' : 's'} at the unanswered cap: until they reply`,
    );
  return held.length > 0 ? held.join('; ') : 'nothing: it may send now';
}

/** A table wider than the page scrolls on its own, the page does not. */
const scrollable = (t: HTMLTableElement) => h('div', { class: 'table-scroll' }, t);

/** Relays, their sends a minute and the numbers' usage are read again every 10 s. */
const pollMs = 10_000;

const health = (x: Health | null | undefined) =>
  x
    ? `CPU ${x.cpuPercent.toFixed(0)}%, memory ${Math.round((x.memoryUsedBytes / Math.max(1, x.memoryTotalBytes)) * 100)}%, ${x.messagesPerMinute}/min, queue ${x.queueDepth}`
    : '—';
/** The online history covers the last 24 hours, from the organization's last 100 relay.online and 100 relay.offline events. */
const historyMs = 86_400_000;

async function relayEvents(): Promise<RelayEvent[]> {
  const read = (type: string) =>
    api<{ data: RelayEvent[] }>('GET', `/api/v1/events?type=${type}&limit=100`).then(
      (p) => p.data,
      () => [],
    );
  const [online, offline] = await Promise.all([read('relay.online'), read('relay.offline')]);
  return [...online, ...offline];
}

const clock = (ms: number) => new Date(ms).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });

/** A strip of the last 24 hours, green where the relay was online, and the same in words. */
function showHistory(el: HTMLElement, spans: Span[], status: string): void {
  const total = spans.reduce((n, s) => n + s.end - s.start, 0) || 1;
  const share = onlineShare(spans);
  const changes = spans
    .filter((s) => s.online !== null)
    .slice(-5)
    .reverse();
  el.dataset.spans = JSON.stringify(
    spans.map((s) => ({
      start: new Date(s.start).toISOString(),
      end: new Date(s.end).toISOString(),
      online: s.online,
    })),
  );
  replace(
    el,
    h(
      'p',
      { class: 'hint' },
      'Online history, last 24 hours: ',
      share === null
        ? 'no connection recorded.'
        : `online ${(share * 100).toFixed(1)}% of the recorded time; ${status} now.`,
    ),
    h(
      'div',
      { class: 'strip', 'aria-hidden': 'true' },
      spans.map((s) => {
        const part = h('span', {
          class: s.online === null ? 'unknown' : s.online ? 'up' : 'down',
          title: `${s.online === null ? 'no record' : s.online ? 'online' : 'offline'} ${clock(s.start)}–${clock(s.end)}`,
        });
        // Set through the style object: the page's policy refuses inline style attributes.
        part.style.width = `${((s.end - s.start) / total) * 100}%`;
        return part;
      }),
    ),
    changes.length
      ? h(
          'ul',
          { class: 'plain changes' },
          changes.map((s) =>
            h('li', null, `${s.online ? 'Online' : 'Offline'} from ${when(new Date(s.start).toISOString())}`),
          ),
        )
      : null,
  );
}

const soon = (iso: string) => (Date.parse(iso) <= Date.now() + 500 ? 'now' : when(iso));

/**
 * Relays with their state and health, each relay's sends a minute over the
 * last hour, and each sender number's pace and usage; "add a relay" shows the
 * exact agent command for a fresh registration token.
 */
export async function relaysView({ me, main, onLeave }: PageContext): Promise<void> {
  const list = h('div', { id: 'relay-list' });
  const charts = h('div', { class: 'charts small', id: 'relay-charts' });
  const numbers = h('section', { id: 'phone-numbers', 'aria-labelledby': 'numbers-heading' });
  const made = new Map<string, { chart: Chart; history: HTMLElement }>();
  let left = false;
  onLeave(() => {
    left = true;
    for (const c of made.values()) c.chart.stop();
  });

  async function refresh(): Promise<boolean> {
    const relays = await api<{ data: Relay[] }>('GET', '/api/v1/relays');
    const [details, stats, phones, events] = await Promise.all([
      Promise.all(
        relays.data.map((r) =>
          api<{ health?: Health | null }>('GET', `/api/v1/relays/${r.id}`).catch(() => ({ health: null })),
        ),
      ),
      Promise.all(relays.data.map((r) => messageStats('hour', { relayId: r.id }).catch(() => null))),
      api<{ data: PhoneNumber[] }>('GET', '/api/v1/phone-numbers'),
      relayEvents(),
    ]);
    const activePhones = phones.data.filter((p) => p.status === 'active');
    const usage = await Promise.all(
      activePhones.map((p) => api<Usage>('GET', `/api/v1/phone-numbers/${p.id}/usage`).catch(() => null)),
    );
    if (left) return false;
    replace(
      list,
      relays.data.length === 0
        ? h('p', null, 'No relay yet: messages wait in the queue until one connects.')
        : table(
            'Relays',
            ['Name', 'State', 'Last heartbeat', 'Capacity', 'Numbers', 'Health'],
            relays.data.map((r, i) => [
              r.name,
              r.degraded
                ? h('span', { class: 'st st-degraded', title: r.degraded }, `degraded: ${r.degraded}`)
                : h('span', { class: `st st-${r.status}` }, r.status),
              when(r.lastHeartbeat),
              r.capacity,
              r.phoneNumbers.join(', ') || '—',
              health(details[i]?.health),
            ]),
          ),
    );
    const now = Date.now();
    relays.data.forEach((r, i) => {
      let card = made.get(r.id);
      if (!card) {
        const chart = timeChart(
          `relay-chart-${r.id}`,
          'Messages sent a minute, last hour',
          [{ label: 'sent', color: '#0b5cad' }],
          { height: 120, small: true },
        );
        const history = h('div', { class: 'history', id: `relay-history-${r.id}` });
        const box = h(
          'section',
          { class: 'relay-card', 'data-relay': r.id, 'aria-labelledby': `relay-name-${r.id}` },
          h('h3', { id: `relay-name-${r.id}` }, r.name),
          chart.figure,
          history,
        );
        card = { chart, history };
        made.set(r.id, card);
        charts.append(box);
      }
      const s = stats[i];
      if (s) card.chart.set(volumeData(s, ['sent']));
      showHistory(card.history, onlineSpans(events, r.id, now - historyMs, now), r.status);
    });
    replace(
      numbers,
      h('h2', { id: 'numbers-heading' }, 'Sender numbers'),
      activePhones.length === 0
        ? h('p', null, 'No sender number registered: messages go out from whichever number a relay has.')
        : scrollable(
            table(
              'Sender numbers with their pace and usage',
              [
                'Number',
                'Label',
                'Pace',
                'Sent in the last minute',
                'New contacts (24 h)',
                'Line health (24 h)',
                'New recipients (7 d)',
                'Holding messages now',
                'Next slots',
              ],
              activePhones.map((p, i) => {
                const u = usage[i];
                return [
                  p.number,
                  p.label ?? '—',
                  u ? `${u.pace.perSecond}/s, burst ${u.pace.burst}, ${u.pace.newContactsPerDay} new a day` : '—',
                  u ? u.sentLastMinute : '—',
                  u ? `${u.newContactsToday} of ${u.pace.newContactsPerDay}` : '—',
                  u ? lineHealth(u) : '—',
                  u ? recentRecipients(u) : '—',
                  u ? holding(u) : '—',
                  u ? nextSlots(u) : '—',
                ];
              }),
              (i) => ({ 'data-number': activePhones[i]!.number }),
            ),
          ),
    );
    return true;
  }

  const add = h('section', { id: 'add-relay', 'aria-label': 'Add a relay' });
  replace(
    main,
    h('h1', null, 'Relays'),
    list,
    can(me, 'admin')
      ? h(
          'button',
          {
            type: 'button',
            id: 'add-relay-button',
            async onclick() {
              const token = await api<{ token: string; expiresAt: string }>(
                'POST',
                `/api/v1/tenants/${me.organization!.id}/relay-tokens`,
                {},
              );
              const agent = await api<{ url: string }>('GET', '/downloads/relaybox-relay.json');
              const tarball = `${location.origin}${new URL(agent.url).pathname}`;
              const server = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/api/v1/relays/connect`;
              const command = `npx -y ${tarball} connect --server ${server} --token ${token.token}`;
              const copied = h('span', { role: 'status', 'aria-live': 'polite' });
              replace(
                add,
                h('h2', null, 'Add a relay'),
                h(
                  'p',
                  null,
                  `On the Mac that sends the messages (with Node.js 20 or later), run this command in Terminal: it fetches the relay agent from this server and registers it (the token works once, until ${when(token.expiresAt)}):`,
                ),
                h('pre', null, h('code', { id: 'relay-command' }, command)),
                h(
                  'button',
                  {
                    type: 'button',
                    id: 'copy-command',
                    onclick: async () => {
                      await navigator.clipboard.writeText(command);
                      copied.textContent = 'Copied';
                    },
                  },
                  'Copy command',
                ),
                ' ',
                copied,
                h(
                  'p',
                  { class: 'hint' },
                  `Once it is online, keep it running as a service that starts at login: npm install -g ${tarball} && relaybox-relay service install. Add --simulate to try it on any machine without Messages.`,
                ),
              );
            },
          },
          'Add a relay',
        )
      : null,
    add,
    h('h2', null, 'Throughput and online history'),
    charts,
    numbers,
  );
  await poll(onLeave, pollMs, refresh);
}

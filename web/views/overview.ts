import { timeChart } from '../chart.ts';
import { h, replace } from '../dom.ts';
import { api } from '../session.ts';
import { deliveryRate, latencyData, messageStats, ranges, volumeData, type Range } from '../stats.ts';
import { poll, type PageContext } from '../page.ts';
import { progressBar, setProgress } from './jobs.ts';

interface Relay {
  id: string;
  name: string;
  status: 'online' | 'offline';
  degraded: string | null;
}
interface Health {
  messagesPerMinute: number;
}
interface Job {
  jobId: string;
  status: string;
  totalRecipients: number;
  progress: number;
}
interface Queue {
  pending: number;
  processing: number;
  failed: number;
  deadLetter: number;
}

/** Every 5 s: the stats, the relays, the queue, its oldest message and the running jobs (5 to 6, and one per online relay: well inside the request budget). */
const pollMs = 5_000;

const colors = {
  accepted: '#57606a',
  sent: '#0b5cad',
  delivered: '#1a7f37',
  read: '#8250df',
  failed: '#b42318',
  received: '#bc4c00',
};

/** The team's oldest queued message's creation time: the last of its queued messages, newest first, is the oldest. */
async function oldestQueued(): Promise<string | null> {
  const first = await api<{ pagination: { total: number } }>('GET', '/api/v1/messages?status=queued&limit=1');
  if (first.pagination.total === 0) return null;
  const last = await api<{ data: Array<{ createdAt: string }> }>(
    'GET',
    `/api/v1/messages?status=queued&limit=1&page=${Math.min(first.pagination.total, 1_000_000)}`,
  );
  return last.data[0]?.createdAt ?? null;
}

function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return s < 172_800 ? `${Math.round(s / 3600)} h` : `${Math.round(s / 86_400)} days`;
}

/** The landing page: volume by outcome and delivery latency over an hour, a day or 30 days, and what is happening now. */
export async function overviewView({ main, onLeave }: PageContext): Promise<void> {
  let range: Range = 'hour';
  const volume = timeChart(
    'chart-volume',
    'Messages by outcome',
    Object.entries(colors).map(([label, color]) => ({ label, color })),
  );
  const latency = timeChart(
    'chart-latency',
    'Delivery latency after accepted',
    [
      { label: 'sent p50', color: colors.sent },
      { label: 'delivered p50', color: colors.delivered },
      { label: 'delivered p95', color: '#9a6700' },
    ],
    { duration: true, points: true },
  );
  const picker = h(
    'fieldset',
    { class: 'range' },
    h('legend', null, 'Range'),
    Object.entries(ranges).map(([key, r]) =>
      h(
        'label',
        null,
        h('input', {
          type: 'radio',
          name: 'range',
          value: key,
          checked: key === range,
          onchange: () => ((range = key as Range), void refresh().catch(() => undefined)),
        }),
        ` ${r.label}`,
      ),
    ),
  );
  const chartsProblem = h('p', { class: 'error', role: 'alert', id: 'charts-problem' });
  const tiles = h('dl', { class: 'tiles', id: 'overview-tiles' });
  const relays = h('section', { id: 'overview-relays', 'aria-labelledby': 'relays-heading' });
  const jobs = h('section', { id: 'overview-jobs', 'aria-labelledby': 'jobs-heading' });
  replace(
    main,
    h('h1', null, 'Overview'),
    picker,
    tiles,
    chartsProblem,
    h('div', { class: 'charts' }, volume.figure, latency.figure),
    relays,
    jobs,
  );
  let left = false;
  onLeave(() => {
    left = true;
    volume.stop();
    latency.stop();
  });

  const tile = (id: string, label: string, value: string) =>
    h('div', { class: 'tile' }, h('dt', null, label), h('dd', { id }, value));

  async function refresh(): Promise<boolean> {
    const shown = range;
    const [stats, relayList, queue, running, oldest] = await Promise.all([
      messageStats(shown).catch((err: Error) => err),
      api<{ data: Relay[] }>('GET', '/api/v1/relays'),
      api<Queue>('GET', '/api/v1/messages/queue/stats'),
      api<{ data: Job[] }>('GET', '/api/v1/messages/bulk?status=processing&limit=20'),
      oldestQueued(),
    ]);
    const health = await Promise.all(
      relayList.data.map((r) =>
        r.status === 'online'
          ? api<{ health: Health | null }>('GET', `/api/v1/relays/${r.id}`).then(
              (d) => d.health,
              () => null,
            )
          : null,
      ),
    );
    if (left || shown !== range) return true;
    if (stats instanceof Error) chartsProblem.textContent = `The charts could not be read: ${stats.message}`;
    else {
      chartsProblem.textContent = '';
      volume.set(volumeData(stats));
      latency.set(latencyData(stats));
    }
    const rate = stats instanceof Error ? null : deliveryRate(stats);
    const online = relayList.data.filter((r) => r.status === 'online');
    replace(
      tiles,
      tile(
        'tile-rate',
        `Delivery rate (${ranges[shown].label.toLowerCase()})`,
        rate === null ? '—' : `${(rate * 100).toFixed(1)}%`,
      ),
      tile('tile-relays', 'Relays online', `${online.length} of ${relayList.data.length}`),
      tile('tile-queued', 'Queued now', String(queue.pending)),
      tile('tile-oldest', 'Oldest queued (this team)', oldest ? age(Date.now() - Date.parse(oldest)) : '—'),
      tile('tile-processing', 'With a relay now', String(queue.processing)),
      tile('tile-dead', 'Failed after every retry', String(queue.deadLetter)),
    );
    replace(
      relays,
      h('h2', { id: 'relays-heading' }, 'Relays'),
      relayList.data.length === 0
        ? h('p', null, 'No relay yet: ', h('a', { href: '#/relays' }, 'add one'), '.')
        : h(
            'ul',
            { class: 'plain' },
            relayList.data.map((r, i) =>
              h(
                'li',
                null,
                h('span', { class: `st st-${r.degraded ? 'degraded' : r.status}` }, r.degraded ? 'degraded' : r.status),
                ` ${r.name}`,
                health[i] ? ` — ${health[i]!.messagesPerMinute} messages a minute` : '',
              ),
            ),
          ),
    );
    replace(
      jobs,
      h('h2', { id: 'jobs-heading' }, 'Running bulk jobs'),
      running.data.length === 0
        ? h('p', null, 'None running.')
        : h(
            'ul',
            { class: 'plain' },
            running.data.map((j) => {
              const bar = progressBar({ 'aria-label': `Progress of ${j.jobId}`, 'data-job': j.jobId });
              setProgress(bar, j.progress);
              return h(
                'li',
                null,
                h('a', { href: `#/jobs/${j.jobId}` }, j.jobId),
                ` (${j.totalRecipients} recipients) `,
                bar,
              );
            }),
          ),
    );
    return true;
  }
  await poll(onLeave, pollMs, refresh);
}

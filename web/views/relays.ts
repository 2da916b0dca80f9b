import { h, replace, table, when } from '../dom.ts';
import { api, can } from '../session.ts';
import type { PageContext } from '../page.ts';

interface Relay { id: string; name: string; status: 'online' | 'offline'; degraded: string | null; lastHeartbeat: string | null; capacity: number; phoneNumbers: string[]; systemInfo: { hostname: string; hostOsVersion: string } }
interface Health { cpuPercent: number; memoryUsedBytes: number; memoryTotalBytes: number; messagesPerMinute: number; queueDepth: number; reportedAt: string }

/** Relays with their state and health; "add a relay" shows the exact agent command for a fresh registration token. */
export async function relaysView({ me, main }: PageContext): Promise<void> {
  const relays = await api<{ data: Relay[] }>('GET', '/api/v1/relays');
  const details = await Promise.all(relays.data.map((r) => api<{ health?: Health | null }>('GET', `/api/v1/relays/${r.id}`).catch(() => ({ health: null }))));
  const health = (x: Health | null | undefined) => x ? `CPU ${x.cpuPercent.toFixed(0)}%, memory ${Math.round((x.memoryUsedBytes / Math.max(1, x.memoryTotalBytes)) * 100)}%, ${x.messagesPerMinute}/min, queue ${x.queueDepth}` : '—';
  const add = h('section', { id: 'add-relay', 'aria-label': 'Add a relay' });
  replace(main, h('h1', null, 'Relays'),
    relays.data.length === 0 ? h('p', null, 'No relay yet: messages wait in the queue until one connects.') : table('Relays', ['Name', 'State', 'Last heartbeat', 'Capacity', 'Numbers', 'Health'],
      relays.data.map((r, i) => [r.name, r.degraded ? h('span', { class: 'st st-degraded', title: r.degraded }, `degraded: ${r.degraded}`) : h('span', { class: `st st-${r.status}` }, r.status), when(r.lastHeartbeat), r.capacity, r.phoneNumbers.join(', ') || '—', health(details[i]?.health)])),
    can(me, 'admin') ? h('button', {
      type: 'button', id: 'add-relay-button',
      async onclick() {
        const token = await api<{ token: string; expiresAt: string }>('POST', `/api/v1/tenants/${me.organization!.id}/relay-tokens`, {});
        const server = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/api/v1/relays/connect`;
        const command = `npm run relay -- --server ${server} --token ${token.token}`;
        const copied = h('span', { role: 'status', 'aria-live': 'polite' });
        replace(add, h('h2', null, 'Add a relay'),
          h('p', null, `On the Mac that sends the messages, in a checkout of Relaybox, run this command (the token works once, until ${when(token.expiresAt)}):`),
          h('pre', null, h('code', { id: 'relay-command' }, command)),
          h('button', { type: 'button', id: 'copy-command', onclick: async () => { await navigator.clipboard.writeText(command); copied.textContent = 'Copied'; } }, 'Copy command'), ' ', copied,
          h('p', { class: 'hint' }, 'Add --simulate to try it on any machine without Messages.'));
      },
    }, 'Add a relay') : null,
    add);
}

import { storedRecipient, toCsv, type PreviewRow } from '../bulk-rows.ts';
import { announce, h, replace, table, when } from '../dom.ts';
import { allPages, api, can } from '../session.ts';
import { poll, type PageContext } from '../page.ts';

interface Job {
  jobId: string;
  status: 'scheduled' | 'processing' | 'completed' | 'cancelled';
  totalRecipients: number;
  progress: number;
  counts: Record<string, number>;
  createdAt: string;
  scheduledAt: string | null;
  startedAt: string | null;
  completedAt: string | null;
  cancelledAt: string | null;
  estimatedCompletionAt?: string | null;
}
interface Result {
  messageId: string;
  to: string;
  status: string;
  error: string | null;
}

/** The bodies of jobs sent from this page, so a failed row downloads with its body (results carry recipient and error only). */
const sentRows = new Map<string, Map<string, string>>();
export function rememberRows(jobId: string, rows: PreviewRow[]): void {
  // Keyed by the recipient as stored (E.164, lower-case email), so a number written with spaces still matches.
  sentRows.set(jobId, new Map(rows.map((r) => [storedRecipient(r.to), r.body])));
}

/** A progress element that says its value to screen readers too. */
export function progressBar(props: Record<string, string>): HTMLProgressElement {
  return h('progress', { max: '100', value: '0', ...props });
}

export function setProgress(bar: HTMLProgressElement, fraction: number): void {
  const percent = Math.round(fraction * 100);
  bar.value = percent;
  bar.textContent = `${percent}%`;
  bar.setAttribute('aria-valuetext', `${percent}% done`);
}

const active = (j: Pick<Job, 'status'>) => j.status === 'scheduled' || j.status === 'processing';
const listPollMs = 2_000;

/** Every job with a progress bar; while one is scheduled or running, the list is read again every 2 s and its rows updated in place. */
export async function jobsView({ main, onLeave }: PageContext): Promise<void> {
  const rows = new Map<string, { status: HTMLElement; bar: HTMLProgressElement; row: HTMLTableRowElement }>();
  const body = h('tbody');
  const list = h(
    'table',
    { id: 'jobs-table' },
    h('caption', { class: 'sr-only' }, 'Bulk jobs, newest first'),
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        ['Job', 'Status', 'Recipients', 'Progress', 'Created', 'Scheduled for'].map((c) =>
          h('th', { scope: 'col' }, c),
        ),
      ),
    ),
    body,
  );
  let left = false;
  onLeave(() => (left = true));

  async function refresh(): Promise<boolean> {
    const jobs = await api<{ data: Job[] }>('GET', '/api/v1/messages/bulk?limit=100');
    if (left) return false;
    if (jobs.data.length === 0) {
      replace(main, h('h1', null, 'Bulk jobs'), h('p', null, 'No bulk jobs yet.'));
      return false;
    }
    const order: HTMLTableRowElement[] = [];
    for (const j of jobs.data) {
      let row = rows.get(j.jobId);
      if (!row) {
        const status = h('span');
        const bar = progressBar({ 'aria-label': `Progress of ${j.jobId}`, 'data-job': j.jobId });
        const tr = h(
          'tr',
          { 'data-job': j.jobId },
          h('td', null, h('a', { href: `#/jobs/${j.jobId}` }, j.jobId)),
          h('td', null, status),
          h('td', null, String(j.totalRecipients)),
          h('td', null, bar),
          h('td', null, when(j.createdAt)),
          h('td', null, when(j.scheduledAt)),
        );
        row = { status, bar, row: tr };
        rows.set(j.jobId, row);
      }
      row.status.className = `st st-${j.status}`;
      row.status.textContent = j.status;
      setProgress(row.bar, j.progress);
      order.push(row.row);
    }
    body.replaceChildren(...order);
    if (!main.contains(list)) replace(main, h('h1', null, 'Bulk jobs'), list);
    return jobs.data.some(active);
  }
  await poll(onLeave, listPollMs, refresh);
}

/** The API allows 100 requests a minute: the detail is read every 1.5 s, the results at most every 5 s and once at the end. */
const pollMs = 1_500;
const resultsEveryMs = 5_000;

/** A job: live progress and counts, estimated completion, results, failed rows as CSV, cancel. */
export async function jobView({ me, main, onLeave }: PageContext, jobId?: string): Promise<void> {
  if (!jobId) return;
  const heading = h('h1', null, 'Bulk job ', h('code', null, jobId));
  const status = h('p', { id: 'job-status' });
  const bar = progressBar({ id: 'job-progress', 'aria-label': 'Progress' });
  const counts = h('dl', { id: 'job-counts', class: 'counts' });
  const eta = h('p', { id: 'job-eta' });
  const actions = h('div', { class: 'actions' });
  const results = h('section', { id: 'job-results', 'aria-label': 'Results' });
  replace(main, heading, status, bar, counts, eta, actions, results);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  onLeave(() => ((stopped = true), clearTimeout(timer)));
  let lastStatus: string | undefined;
  let resultsAt = 0;
  let resultsOf = '';

  async function refresh(): Promise<void> {
    const job = await api<Job>('GET', `/api/v1/messages/bulk/${jobId}`);
    if (stopped) return;
    replace(
      status,
      'Status: ',
      h('strong', { id: 'job-status-value' }, job.status),
      job.status === 'scheduled' && job.scheduledAt ? ` — starts ${when(job.scheduledAt)}` : '',
      job.completedAt ? ` — completed ${when(job.completedAt)}` : '',
      job.cancelledAt ? ` — cancelled ${when(job.cancelledAt)}` : '',
    );
    setProgress(bar, job.progress);
    replace(
      counts,
      Object.entries(job.counts).flatMap(([k, v]) => [h('dt', null, k), h('dd', { id: `count-${k}` }, String(v))]),
      h('dt', null, 'total'),
      h('dd', null, String(job.totalRecipients)),
    );
    replace(
      eta,
      job.status === 'processing'
        ? `Estimated completion: ${job.estimatedCompletionAt ? when(job.estimatedCompletionAt) : 'unknown (no relay online)'}`
        : '',
    );
    const running = active(job);
    replace(
      actions,
      running && can(me, 'member')
        ? h(
            'button',
            {
              type: 'button',
              id: 'cancel-job',
              async onclick() {
                if (!confirm('Cancel this job? Messages not yet handed to a relay will not be sent.')) return;
                await api('POST', `/api/v1/messages/bulk/${jobId}/cancel`, {});
                clearTimeout(timer);
                await refresh();
              },
            },
            'Cancel job',
          )
        : null,
      job.counts.failed
        ? h(
            'button',
            { type: 'button', id: 'download-failed', onclick: () => void downloadFailed() },
            'Download failed rows as CSV',
          )
        : null,
    );
    if (lastStatus !== undefined && lastStatus !== job.status) announce(`Job ${job.status}`);
    const seen = JSON.stringify(job.counts);
    if (seen !== resultsOf && (!running || Date.now() - resultsAt >= resultsEveryMs)) {
      resultsAt = Date.now();
      resultsOf = seen;
      await showResults(job.counts.failed ?? 0);
    }
    lastStatus = job.status;
    if (running) timer = setTimeout(() => void refresh().catch(() => undefined), pollMs);
    else announce(`Job ${job.status}: ${job.counts.delivered ?? 0} delivered, ${job.counts.failed ?? 0} failed`);
  }

  async function showResults(failedCount: number): Promise<void> {
    const page = await api<{ data: Result[]; pagination: { total: number } }>(
      'GET',
      `/api/v1/messages/bulk/${jobId}/results?limit=100`,
    );
    const failed =
      failedCount > 0
        ? await api<{ data: Result[]; pagination: { total: number } }>(
            'GET',
            `/api/v1/messages/bulk/${jobId}/results?status=failed&limit=100`,
          )
        : { data: [] };
    if (stopped) return;
    replace(
      results,
      h('h2', null, 'Failed rows'),
      failed.data.length
        ? table(
            'Failed rows and their errors',
            ['To', 'Error'],
            failed.data.map((r) => [r.to, r.error ?? '']),
          )
        : h('p', null, 'None.'),
      h('h2', null, 'Results'),
      h('p', null, `First ${page.data.length} of ${page.pagination.total}, in request order.`),
      table(
        'Per-recipient results',
        ['To', 'Status', 'Error'],
        page.data.map((r) => [r.to, h('span', { class: `st st-${r.status}` }, r.status), r.error ?? '']),
      ),
    );
  }

  async function downloadFailed(): Promise<void> {
    const failed = await allPages<Result>(`/api/v1/messages/bulk/${jobId}/results?status=failed`);
    const bodies = sentRows.get(jobId!);
    const csv = toCsv(
      ['to', 'body', 'error'],
      failed.map((r) => [r.to, bodies?.get(storedRecipient(r.to)) ?? '', r.error ?? '']),
    );
    const link = h('a', {
      href: URL.createObjectURL(new Blob(['\uFEFF', csv], { type: 'text/csv' })),
      download: `${jobId}-failed.csv`,
    });
    document.body.append(link);
    link.click();
    link.remove();
  }

  await refresh();
}

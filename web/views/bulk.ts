import { parseUpload, summarize, type ParsedUpload, type PreviewRow, limits } from '../bulk-rows.ts';
import { announce, h, replace } from '../dom.ts';
import { api, ApiError, can } from '../session.ts';
import type { PageContext } from '../page.ts';
import { rememberRows } from './jobs.ts';

const pageSize = 100;

/** Upload a CSV or JSON list, check it against the API's rules, then send it now or at a chosen time. */
export function bulkView({ me, main }: PageContext): void {
  if (!can(me, 'member')) {
    replace(
      main,
      h('h1', null, 'Bulk send'),
      h('p', null, 'Your role (viewer) can read jobs and messages but not send.'),
    );
    return;
  }
  let upload: ParsedUpload = { rows: [] };
  let page = 0;
  let onlyInvalid = false;
  const summary = h('div', { id: 'preview-summary', 'aria-live': 'polite' });
  const preview = h('div', { id: 'preview' });
  const sendArea = h('div', { id: 'send-area' });
  const fileInput = h('input', {
    id: 'bulk-file',
    type: 'file',
    accept: '.csv,.json,text/csv,application/json',
    onchange: () => void load(fileInput.files?.[0]),
  });
  const drop = h(
    'div',
    {
      class: 'drop',
      id: 'drop-zone',
      ondragover: (e: DragEvent) => (e.preventDefault(), drop.classList.add('over')),
      ondragleave: () => drop.classList.remove('over'),
      ondrop: (e: DragEvent) => {
        e.preventDefault();
        drop.classList.remove('over');
        void load(e.dataTransfer?.files[0]);
      },
    },
    h('label', { for: 'bulk-file' }, 'Choose a CSV or JSON file, or drop it here'),
    fileInput,
    h(
      'p',
      { class: 'hint' },
      'CSV: a header row with the columns to,body (quotes, commas and line breaks inside quotes, UTF-8 with or without BOM). JSON: [{"to": "...", "body": "..."}].',
    ),
  );

  async function load(file: File | undefined): Promise<void> {
    if (!file) return;
    replace(summary, `Reading ${file.name}…`);
    replace(preview);
    replace(sendArea);
    const text = await file.text();
    // Parsing and checking 10,000 rows takes a moment: let the page paint first.
    await new Promise((r) => setTimeout(r, 0));
    upload = parseUpload(file.name, text);
    page = 0;
    onlyInvalid = false;
    show();
  }

  function visibleRows(): PreviewRow[] {
    return onlyInvalid ? upload.rows.filter((r) => r.problems.length > 0) : upload.rows;
  }

  function show(): void {
    if (upload.error) {
      replace(summary, h('p', { class: 'error', role: 'alert' }, upload.error));
      return;
    }
    const { valid, invalid } = summarize(upload.rows);
    replace(
      summary,
      h(
        'p',
        null,
        h('strong', { id: 'count-valid' }, String(valid)),
        ' valid, ',
        h('strong', { id: 'count-invalid', class: invalid ? 'bad' : '' }, String(invalid)),
        ' invalid',
        ` (${upload.rows.length} rows)`,
      ),
      invalid > 0
        ? h(
            'label',
            null,
            h('input', {
              type: 'checkbox',
              id: 'only-invalid',
              checked: onlyInvalid,
              onchange: (e: Event) => ((onlyInvalid = (e.target as HTMLInputElement).checked), (page = 0), showTable()),
            }),
            ' Show only invalid rows',
          )
        : null,
    );
    showTable();
    showSend(valid, invalid);
    announce(`Preview: ${valid} valid and ${invalid} invalid rows`);
  }

  function showTable(): void {
    const rows = visibleRows();
    const pages = Math.max(1, Math.ceil(rows.length / pageSize));
    const slice = rows.slice(page * pageSize, (page + 1) * pageSize);
    replace(
      preview,
      h(
        'table',
        { id: 'preview-table' },
        h(
          'caption',
          null,
          `Rows ${rows.length ? page * pageSize + 1 : 0}–${page * pageSize + slice.length} of ${rows.length}`,
        ),
        h(
          'thead',
          null,
          h(
            'tr',
            null,
            ['Line', 'To', 'Body', 'Check'].map((c) => h('th', { scope: 'col' }, c)),
          ),
        ),
        h(
          'tbody',
          null,
          slice.map((r) =>
            h(
              'tr',
              { class: r.problems.length ? 'invalid' : 'valid' },
              h('td', null, String(r.line)),
              h('td', null, r.to),
              h('td', { class: 'body' }, r.body),
              h('td', null, r.problems.length ? h('span', { class: 'reason' }, r.problems.join('; ')) : 'ok'),
            ),
          ),
        ),
      ),
      pages > 1
        ? h(
            'div',
            { class: 'pager' },
            h(
              'button',
              { type: 'button', disabled: page === 0, onclick: () => ((page -= 1), showTable()) },
              'Previous',
            ),
            ` Page ${page + 1} of ${pages} `,
            h(
              'button',
              { type: 'button', disabled: page >= pages - 1, onclick: () => ((page += 1), showTable()) },
              'Next',
            ),
          )
        : null,
    );
  }

  function showSend(valid: number, invalid: number): void {
    const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    const offset = -new Date().getTimezoneOffset();
    const offsetText = `UTC${offset >= 0 ? '+' : '−'}${String(Math.floor(Math.abs(offset) / 60)).padStart(2, '0')}:${String(Math.abs(offset) % 60).padStart(2, '0')}`;
    const error = h('div', { class: 'error', role: 'alert', id: 'send-error' });
    const at = h('input', {
      type: 'datetime-local',
      id: 'schedule-at',
      'aria-describedby': 'schedule-zone',
      disabled: true,
    });
    const leaveOut = h('input', { type: 'checkbox', id: 'leave-out', checked: true, disabled: invalid === 0 });
    const tooMany = valid > limits.jobMessages;
    const form = h('form', {
      id: 'send-form',
      async onsubmit(e: Event) {
        e.preventDefault();
        error.textContent = '';
        const scheduled = (form.querySelector('input[name=when]:checked') as HTMLInputElement).value === 'schedule';
        if (invalid > 0 && !leaveOut.checked)
          return void (error.textContent = 'Leave out the invalid rows, or fix the file and upload it again.');
        const rows = upload.rows.filter((r) => r.problems.length === 0);
        const body: { messages: Array<{ to: string; body: string }>; scheduledAt?: string } = {
          messages: rows.map((r) => ({ to: r.to, body: r.body })),
        };
        if (scheduled) {
          const time = new Date(at.value);
          if (!at.value || Number.isNaN(time.getTime()))
            return void (error.textContent = 'Pick the date and time to send at.');
          body.scheduledAt = time.toISOString();
        }
        submit.disabled = true;
        try {
          const job = await api<{ jobId: string }>('POST', '/api/v1/messages/bulk', body);
          rememberRows(job.jobId, rows);
          location.hash = `#/jobs/${job.jobId}`;
        } catch (err) {
          submit.disabled = false;
          error.textContent =
            err instanceof ApiError && err.details.length
              ? `${err.message}: ${err.details
                  .slice(0, 5)
                  .map((d) => `${d.path} ${d.message}`)
                  .join('; ')}`
              : (err as Error).message;
        }
      },
    });
    const submit = h(
      'button',
      { type: 'submit', id: 'send-button', disabled: valid === 0 || tooMany },
      `Send ${valid} message${valid === 1 ? '' : 's'}`,
    );
    const pick = (value: string, label: string, checked: boolean) =>
      h(
        'label',
        null,
        h('input', {
          type: 'radio',
          name: 'when',
          value,
          checked,
          onchange: () => (at.disabled = value !== 'schedule'),
        }),
        ` ${label}`,
      );
    replace(
      form,
      h(
        'fieldset',
        null,
        h('legend', null, 'When'),
        pick('now', 'Send now', true),
        pick('schedule', 'Schedule', false),
        h(
          'div',
          { class: 'field' },
          h('label', { for: 'schedule-at' }, 'Send at'),
          at,
          h('span', { id: 'schedule-zone', class: 'hint' }, ` Time zone: ${zone} (${offsetText})`),
        ),
      ),
      invalid > 0
        ? h('label', null, leaveOut, ` Leave out the ${invalid} invalid row${invalid === 1 ? '' : 's'}`)
        : null,
      tooMany
        ? h(
            'p',
            { class: 'error' },
            `A job holds at most ${limits.jobMessages.toLocaleString('en')} messages; split the file.`,
          )
        : null,
      error,
      submit,
    );
    replace(sendArea, form);
  }

  replace(main, h('h1', null, 'Bulk send'), drop, summary, preview, sendArea);
}

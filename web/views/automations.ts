import { announce, h, replace, table, when } from '../dom.ts';
import { api, can, describeError } from '../session.ts';
import type { PageContext } from '../page.ts';

interface Condition {
  field: string;
  operator: string;
  value: string;
}
interface Action {
  type: string;
  config: Record<string, unknown>;
}
interface Automation {
  id: string;
  name: string;
  trigger: string;
  logic: 'and' | 'or';
  conditions: Condition[];
  actions: Action[];
  enabled: boolean;
  createdAt: string;
  updatedAt: string;
  lastExecutedAt: string | null;
  executionCount: number;
}
interface Execution {
  id: string;
  messageId: string;
  trigger: string;
  matched: boolean;
  actions: Array<{ type: string; status: string; error: string | null }>;
  createdAt: string;
}
interface DryRun {
  matched: boolean;
  conditionsEvaluated: Array<Condition & { matched: boolean; error?: string }>;
  actionsWouldExecute: string[];
}

const triggers = ['message_received', 'message_sent', 'message_delivered', 'message_read', 'message_reaction'];
const fields = ['body', 'from', 'to'];
const operators = ['contains', 'equals', 'starts_with', 'ends_with', 'matches_regex', 'is_in'];
/** Each action's settings, as the API takes them; a secret or API key is never shown again once saved. */
const actionFields: Record<string, Array<{ key: string; label: string; list?: boolean; secret?: boolean }>> = {
  send_reply: [{ key: 'body', label: 'Reply text' }],
  create_contact: [
    { key: 'firstName', label: 'First name' },
    { key: 'tags', label: 'Tags (comma-separated)', list: true },
  ],
  call_webhook: [
    { key: 'url', label: 'URL' },
    { key: 'secret', label: 'Signing secret', secret: true },
  ],
  log_to_crm: [
    { key: 'url', label: 'URL' },
    { key: 'apiKey', label: 'API key', secret: true },
    { key: 'secret', label: 'Signing secret', secret: true },
  ],
};

const say = (text: string) => text.replaceAll('_', ' ');
const select = (id: string, label: string, values: string[], value: string) =>
  h(
    'select',
    { id, 'aria-label': label },
    values.map((v) => h('option', { value: v, selected: v === value }, say(v))),
  );

/** The organization's automations; admins create one here. */
export async function automationsView({ me, main }: PageContext): Promise<void> {
  const list = await api<{ data: Automation[] }>('GET', '/api/v1/automations?limit=100');
  const admin = can(me, 'admin');
  replace(
    main,
    h('h1', null, 'Automations'),
    h(
      'p',
      { class: 'hint' },
      "An automation runs on every team's messages: when its trigger fires and its conditions match, its actions run.",
    ),
    list.data.length === 0
      ? h('p', null, 'No automation yet.')
      : table(
          'Automations, oldest first',
          ['Name', 'Trigger', 'State', 'Runs', 'Last run'],
          list.data.map((a) => [
            h('a', { href: `#/automations/${a.id}` }, a.name),
            say(a.trigger),
            a.enabled ? 'enabled' : 'disabled',
            a.executionCount,
            when(a.lastExecutedAt),
          ]),
        ),
    admin
      ? h(
          'section',
          { 'aria-labelledby': 'new-automation' },
          h('h2', { id: 'new-automation' }, 'New automation'),
          automationForm(undefined, async (input) => {
            const made = await api<Automation>('POST', '/api/v1/automations', input);
            location.hash = `#/automations/${made.id}`;
          }),
        )
      : h(
          'p',
          { class: 'hint' },
          'Admins and owners create and change automations; your role can read them and dry-run them.',
        ),
  );
}

/** The create and edit form: name, trigger, conditions joined by all or any, and one or more actions. */
function automationForm(current: Automation | undefined, save: (input: unknown) => Promise<void>): HTMLFormElement {
  const name = h('input', { id: 'automation-name', required: true, maxlength: '200', value: current?.name ?? '' });
  const trigger = select('automation-trigger', 'Trigger', triggers, current?.trigger ?? 'message_received');
  const logic = select(
    'automation-logic',
    'Conditions must all match (and) or any (or)',
    ['and', 'or'],
    current?.logic ?? 'and',
  );
  const conditions = h('ol', { class: 'rows', id: 'automation-conditions' });
  const actions = h('ol', { class: 'rows', id: 'automation-actions' });
  const error = h('p', { class: 'error', role: 'alert' });
  let n = 0;

  function addCondition(c?: Condition): void {
    const i = n++;
    const li = h(
      'li',
      null,
      select(`cond-field-${i}`, `Condition ${conditions.children.length + 1} field`, fields, c?.field ?? 'body'),
      select(
        `cond-op-${i}`,
        `Condition ${conditions.children.length + 1} operator`,
        operators,
        c?.operator ?? 'contains',
      ),
      h('input', {
        id: `cond-value-${i}`,
        'aria-label': `Condition ${conditions.children.length + 1} value`,
        value: c?.value ?? '',
        maxlength: '1000',
      }),
      h('button', { type: 'button', class: 'secondary', onclick: () => li.remove() }, 'Remove condition'),
    );
    li.dataset.row = 'condition';
    conditions.append(li);
  }

  function addAction(a?: Action): void {
    const i = n++;
    const number = actions.children.length + 1;
    const settings = h('span', { class: 'settings' });
    const type = select(`action-type-${i}`, `Action ${number}`, Object.keys(actionFields), a?.type ?? 'send_reply');
    const showSettings = () =>
      replace(
        settings,
        actionFields[type.value]!.map((f) => {
          const saved = a?.type === type.value ? a.config[f.key] : undefined;
          return h('input', {
            'data-key': f.key,
            'data-list': f.list ? '1' : null,
            type: f.secret ? 'password' : 'text',
            autocomplete: 'off',
            'aria-label': `Action ${number} ${f.label}`,
            placeholder:
              f.secret && a?.config[f.key === 'apiKey' ? 'hasApiKey' : 'hasSecret']
                ? 'saved: enter again to keep'
                : f.label,
            value: Array.isArray(saved) ? saved.join(', ') : typeof saved === 'string' ? saved : '',
          });
        }),
      );
    type.addEventListener('change', showSettings);
    showSettings();
    const li = h(
      'li',
      null,
      type,
      settings,
      h('button', { type: 'button', class: 'secondary', onclick: () => li.remove() }, 'Remove action'),
    );
    li.dataset.row = 'action';
    actions.append(li);
  }

  for (const c of current?.conditions ?? []) addCondition(c);
  for (const a of current?.actions ?? [{ type: 'send_reply', config: {} }]) addAction(a);

  const form = h(
    'form',
    {
      id: 'automation-form',
      async onsubmit(e: Event) {
        e.preventDefault();
        error.textContent = '';
        const input = {
          name: name.value.trim(),
          trigger: trigger.value,
          logic: logic.value,
          enabled: current?.enabled ?? true,
          conditions: [...conditions.children].map((li) => {
            const [f, o] = li.querySelectorAll('select');
            return { field: f!.value, operator: o!.value, value: li.querySelector('input')!.value };
          }),
          actions: [...actions.children].map((li) => ({
            type: li.querySelector('select')!.value,
            config: Object.fromEntries(
              [...li.querySelectorAll<HTMLInputElement>('.settings input')]
                .filter((x) => x.value.trim() !== '')
                .map((x) => [
                  x.dataset.key!,
                  x.dataset.list
                    ? x.value
                        .split(',')
                        .map((t) => t.trim())
                        .filter(Boolean)
                    : x.value.trim(),
                ]),
            ),
          })),
        };
        try {
          await save(input);
        } catch (err) {
          error.textContent = describeError(err);
        }
      },
    },
    h('div', { class: 'field' }, h('label', { for: 'automation-name' }, 'Name'), name),
    h('div', { class: 'field' }, h('label', { for: 'automation-trigger' }, 'When'), trigger),
    h(
      'fieldset',
      null,
      h('legend', null, 'Conditions (none: every message)'),
      h('label', null, 'Match ', logic),
      conditions,
      h('button', { type: 'button', class: 'secondary', onclick: () => addCondition() }, 'Add condition'),
    ),
    h(
      'fieldset',
      null,
      h('legend', null, 'Actions'),
      actions,
      h('button', { type: 'button', class: 'secondary', onclick: () => addAction() }, 'Add action'),
      current
        ? h(
            'p',
            { class: 'hint' },
            'Saved secrets and API keys are never shown; saving replaces the automation whole, so enter them again to keep them.',
          )
        : null,
    ),
    error,
    h('button', { type: 'submit', id: 'save-automation' }, current ? 'Save changes' : 'Create automation'),
  );
  return form;
}

/** One automation: what it does, enable or disable, edit, delete, a dry run on a sample message, and its executions. */
export async function automationView({ me, main }: PageContext, id?: string): Promise<void> {
  if (!id) return;
  const a = await api<Automation & { executions: Execution[] }>('GET', `/api/v1/automations/${id}`);
  const admin = can(me, 'admin');
  const sampleBody = h('textarea', { id: 'dry-body', rows: '2' });
  const sampleFrom = h('input', { id: 'dry-from', autocomplete: 'off' });
  const sampleTo = h('input', { id: 'dry-to', autocomplete: 'off' });
  const dryOut = h('div', { id: 'dry-run-result', 'aria-live': 'polite' });
  const edit = h('section', { id: 'edit-automation' });
  const dry = h(
    'form',
    {
      id: 'dry-run',
      async onsubmit(e: Event) {
        e.preventDefault();
        try {
          const message = {
            body: sampleBody.value,
            ...(sampleFrom.value ? { from: sampleFrom.value } : {}),
            ...(sampleTo.value ? { to: sampleTo.value } : {}),
          };
          const r = await api<DryRun>('POST', `/api/v1/automations/${id}/test`, { message });
          replace(
            dryOut,
            h(
              'p',
              null,
              h('strong', { id: 'dry-run-matched' }, r.matched ? 'Matches' : 'Does not match'),
              r.matched ? `: it would run ${r.actionsWouldExecute.map(say).join(', ')}.` : '. Nothing would run.',
            ),
            r.conditionsEvaluated.length
              ? table(
                  'Each condition on the sample',
                  ['Field', 'Operator', 'Value', 'Matched'],
                  r.conditionsEvaluated.map((c) => [
                    c.field,
                    say(c.operator),
                    c.value,
                    c.error ? `no (${c.error})` : c.matched ? 'yes' : 'no',
                  ]),
                )
              : null,
          );
          announce(r.matched ? 'The sample matches' : 'The sample does not match');
        } catch (err) {
          replace(dryOut, h('p', { class: 'error', role: 'alert' }, describeError(err)));
        }
      },
    },
    h('div', { class: 'field' }, h('label', { for: 'dry-body' }, 'Sample message text'), sampleBody),
    h('div', { class: 'field' }, h('label', { for: 'dry-from' }, 'From'), sampleFrom),
    h('div', { class: 'field' }, h('label', { for: 'dry-to' }, 'To'), sampleTo),
    h('button', { type: 'submit' }, 'Dry run'),
  );

  replace(
    main,
    h('h1', null, 'Automation: ', a.name),
    h(
      'p',
      null,
      `When ${say(a.trigger)}${a.conditions.length ? `, if ${a.logic === 'and' ? 'all' : 'any'} of: ` : ', on every message'}`,
      a.conditions.map((c, i) => `${i ? '; ' : ''}${c.field} ${say(c.operator)} “${c.value}”`).join(''),
      `. Then: ${a.actions.map((x) => say(x.type)).join(', ')}.`,
    ),
    h(
      'p',
      null,
      'State: ',
      h('strong', { id: 'automation-state' }, a.enabled ? 'enabled' : 'disabled'),
      ` · ${a.executionCount} runs · last ${when(a.lastExecutedAt)}`,
    ),
    admin
      ? h(
          'div',
          { class: 'actions' },
          h(
            'button',
            {
              type: 'button',
              id: 'toggle-automation',
              onclick: async () => {
                await api('PATCH', `/api/v1/automations/${id}/toggle`, {});
                await automationView({ me, main, onLeave: () => {} }, id);
              },
            },
            a.enabled ? 'Disable' : 'Enable',
          ),
          ' ',
          h(
            'button',
            {
              type: 'button',
              class: 'secondary',
              onclick: () =>
                replace(
                  edit,
                  h('h2', null, 'Edit'),
                  automationForm(a, async (input) => {
                    await api('PUT', `/api/v1/automations/${id}`, input);
                    await automationView({ me, main, onLeave: () => {} }, id);
                    announce('Automation saved');
                  }),
                ),
            },
            'Edit',
          ),
          ' ',
          h(
            'button',
            {
              type: 'button',
              class: 'danger',
              onclick: async () => {
                if (confirm(`Delete ${a.name} and its execution log?`)) {
                  await api('DELETE', `/api/v1/automations/${id}`);
                  location.hash = '#/automations';
                }
              },
            },
            'Delete',
          ),
        )
      : null,
    edit,
    h('h2', null, 'Dry run'),
    h(
      'p',
      { class: 'hint' },
      'What a real run would match and do on a sample message; nothing is sent, created or called.',
    ),
    dry,
    dryOut,
    h('h2', null, 'Executions'),
    a.executions.length === 0
      ? h('p', null, 'No execution yet.')
      : table(
          'Most recent executions',
          ['When', 'Message', 'Matched', 'Actions'],
          a.executions.map((x) => [
            when(x.createdAt),
            h('a', { href: `#/messages/${x.messageId}` }, x.messageId),
            x.matched ? 'yes' : 'no',
            x.actions.map((r) => `${say(r.type)}: ${r.status}${r.error ? ` (${r.error})` : ''}`).join('; ') || '—',
          ]),
        ),
  );
}

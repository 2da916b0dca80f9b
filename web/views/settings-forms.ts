import { announce, h, type Child } from '../dom.ts';
import { api, describeError } from '../session.ts';

/** The form's number fields, with their bounds as the API takes them (docs/pacing.md). */
const numberFields = [
  ['perSecond', 'Messages a second', { min: '0.001', max: '1000', step: 'any' }],
  ['burst', 'Burst', { min: '1', max: '1000', step: '1' }],
  ['newContactsPerDay', 'New contacts a day', { min: '0', max: '100000', step: '1' }],
  ['unansweredCap', 'Unanswered cap', { min: '1', max: '100000', step: '1' }],
  ['followUpsPerDay', 'Follow-ups a day', { min: '0', max: '100000', step: '1' }],
  ['jitterMs', 'First-message spacing (ms)', { min: '0', max: '600000', step: '1' }],
] as const;
type NumberField = (typeof numberFields)[number][0];

/** The organization's pace as it set it (`GET /api/v1/organization/pacing`): what it leaves out takes the service's default. */
export type Pace = Partial<Record<NumberField, number>> & {
  quietHours?: { start: string; end: string } | false;
  timeZone?: string;
  /** A setting this form does not know: kept as it is. */
  [other: string]: unknown;
};

/** The organization's own stop keywords and its answer to HELP (`GET /api/v1/organization/opt-outs`). */
export interface OptOutSettings {
  stopKeywords: string[];
  helpText: string | null;
}

const control = (id: string, label: string, input: HTMLElement) =>
  h('div', { class: 'field' }, h('label', { for: id }, label), input);

/**
 * A settings card that saves itself with its `submit` button: `save` answers
 * the request to make (or a sentence saying what to mend first); the API's
 * refusal shows in the form, above the button.
 */
function savingForm(
  id: string,
  [title, submit, saved]: [string, string, string],
  save: (form: HTMLFormElement) => { method: 'PUT'; path: string; body: unknown } | string,
  ...children: Child[]
): HTMLFormElement {
  const error = h('p', { class: 'error', role: 'alert', id: `${id}-error` });
  const form: HTMLFormElement = h(
    'form',
    {
      id,
      class: 'card',
      'aria-labelledby': `${id}-title`,
      async onsubmit(e: Event) {
        e.preventDefault();
        error.textContent = '';
        const request = save(form);
        if (typeof request === 'string') {
          error.textContent = request;
          return;
        }
        try {
          await api(request.method, request.path, request.body);
          announce(saved);
        } catch (err) {
          error.textContent = describeError(err);
        }
      },
    },
    h('h2', { id: `${id}-title` }, title),
    ...children,
    error,
    h('button', { type: 'submit' }, submit),
  );
  return form;
}

/**
 * The organization's default pace and line-health rules for its sender lines;
 * a field left empty takes the service's default. Quiet hours: both times,
 * "no quiet hours", or neither (the default).
 */
export function paceForm(pace: Pace): HTMLElement {
  const quiet = pace.quietHours || undefined;
  const noQuiet = h('input', {
    id: 'quietOff',
    name: 'quietOff',
    type: 'checkbox',
    checked: pace.quietHours === false,
  });
  const time = (id: string, value: string | undefined) =>
    h('input', { id, name: id, type: 'time', value: value ?? '' });
  return savingForm(
    'pace-form',
    ['Pacing and line health', 'Save pacing', 'Pacing saved'],
    (form) => {
      const data = new FormData(form);
      const text = (key: string) => String(data.get(key) ?? '').trim();
      // A PUT replaces the whole setting: what the form does not show goes back as it was read.
      const body: Pace = { ...pace };
      for (const [key] of numberFields) {
        delete body[key];
        if (text(key) !== '') body[key] = Number(text(key));
      }
      delete body.quietHours;
      const [start, end] = [text('quietStart'), text('quietEnd')];
      if (noQuiet.checked) body.quietHours = false;
      else if (start && end) body.quietHours = { start, end };
      else if (start || end) return 'Quiet hours need a start and an end (or leave both empty for the default).';
      delete body.timeZone;
      if (text('timeZone') !== '') body.timeZone = text('timeZone');
      return { method: 'PUT', path: '/api/v1/organization/pacing', body };
    },
    h(
      'p',
      { class: 'hint' },
      "How fast each sender line sends, and how it treats recipients who do not answer, unless the number has a pace of its own. Empty: the service's default.",
    ),
    h(
      'p',
      { class: 'hint' },
      'Unanswered cap: messages to a recipient who has not replied since, before the line waits for their reply. Follow-ups a day: recipients written to again while they have not answered. First-message spacing: the most random wait between first messages to new recipients.',
    ),
    h(
      'div',
      { class: 'filters' },
      numberFields.map(([key, label, bounds]) =>
        control(
          key,
          label,
          h('input', {
            id: key,
            name: key,
            type: 'number',
            value: pace[key] === undefined ? '' : String(pace[key]),
            placeholder: 'default',
            ...bounds,
          }),
        ),
      ),
    ),
    h(
      'div',
      { class: 'filters' },
      control('quietStart', 'Quiet hours start', time('quietStart', quiet?.start)),
      control('quietEnd', 'Quiet hours end', time('quietEnd', quiet?.end)),
      control('quietOff', 'No quiet hours', noQuiet),
      control(
        'timeZone',
        'Time zone of numbers that do not tell theirs',
        h('input', {
          id: 'timeZone',
          name: 'timeZone',
          type: 'text',
          maxlength: '64',
          value: pace.timeZone ?? '',
          placeholder: 'default (UTC)',
        }),
      ),
    ),
    h(
      'p',
      { class: 'hint' },
      "Quiet hours are the recipient's local time; past midnight when the start is later than the end.",
    ),
  );
}

/** The organization's own stop keywords (beside the standard ones) and its answer to HELP. */
export function optOutForm(settings: OptOutSettings): HTMLElement {
  const keywords = h('input', {
    id: 'stopKeywords',
    type: 'text',
    value: settings.stopKeywords.join(', '),
    placeholder: 'none',
    'aria-describedby': 'stopKeywords-hint',
  });
  const helpText = h('textarea', { id: 'helpText', rows: '2', maxlength: '1000' }, settings.helpText ?? '');
  return savingForm(
    'optout-settings-form',
    ['Stop keywords and help text', 'Save opt-out settings', 'Opt-out settings saved'],
    () => {
      const stopKeywords = keywords.value
        .split(',')
        .map((w) => w.trim())
        .filter((w) => w !== '');
      const help = helpText.value.trim();
      return {
        method: 'PUT',
        path: '/api/v1/organization/opt-outs',
        body: { stopKeywords, helpText: help === '' ? null : help },
      };
    },
    control('stopKeywords', 'Own stop keywords', keywords),
    h(
      'p',
      { class: 'hint', id: 'stopKeywords-hint' },
      'Comma-separated, beside STOP, STOPALL, UNSUBSCRIBE, CANCEL, END and QUIT: a received message that is one of them puts its sender on the suppression list.',
    ),
    control('helpText', 'Help text (the answer to HELP; empty: HELP is not answered)', helpText),
  );
}

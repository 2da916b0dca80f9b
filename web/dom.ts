export type Child = Node | string | number | null | undefined | false;
type Props = Record<string, unknown>;

/**
 * Makes an element. Text is always a text node, never parsed as HTML, so a
 * message body such as `<img onerror=...>` shows as the characters it is.
 * `on<event>` props add listeners; `true` sets an empty attribute, `false`
 * and null leave it out; `value` and `checked` are set as properties.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props | null = null,
  ...children: Array<Child | Child[]>
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value as EventListener);
    else if (key === 'value' || key === 'checked') (el as unknown as Record<string, unknown>)[key] = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el: Node, children: Array<Child | Child[]>): void {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

export function replace(el: Element, ...children: Array<Child | Child[]>): void {
  el.replaceChildren();
  append(el, children);
}

/** A form field: its label, its control and, when given, a hint the control names (`aria-describedby` set by the caller). */
export const field = (id: string, label: string, control: HTMLElement, hint?: string): HTMLDivElement =>
  h(
    'div',
    { class: 'field' },
    h('label', { for: id }, label),
    control,
    hint ? h('span', { class: 'hint', id: `${id}-hint` }, hint) : null,
  );

/** A date and time in the reader's locale and time zone, or a dash. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

/** A table; under 600 px each row is a card and each cell is named by its column (`data-label`). */
export function table(
  caption: string,
  head: string[],
  rows: Array<Array<Child>>,
  rowProps?: (i: number) => Props,
): HTMLTableElement {
  return h(
    'table',
    null,
    h('caption', { class: 'sr-only' }, caption),
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        head.map((c) => h('th', { scope: 'col' }, c)),
      ),
    ),
    h(
      'tbody',
      null,
      rows.map((r, i) =>
        h(
          'tr',
          rowProps?.(i) ?? null,
          r.map((c, j) => h('td', { 'data-label': head[j] }, c)),
        ),
      ),
    ),
  );
}

let hideToast: ReturnType<typeof setTimeout> | undefined;

/**
 * Says something to screen readers (a polite live region) and shows it in the
 * status toast for a few seconds; the text stays in the region, only the toast
 * goes, so it never sits over the page.
 */
export function announce(text: string): void {
  const region = document.getElementById('status');
  if (!region) return;
  region.textContent = text;
  region.classList.add('shown');
  clearTimeout(hideToast);
  hideToast = setTimeout(() => region.classList.remove('shown'), 4_000);
}

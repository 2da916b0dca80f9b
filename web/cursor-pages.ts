import { announce, h, replace, type Child } from './dom.ts';
import { describeError } from './session.ts';

/** A page of a list read by cursor, as the API answers it. */
export interface CursorPage<T> {
  data: T[];
  nextCursor?: string | null;
}

/**
 * A list shown a page at a time in `out`: `show()` reads the first page,
 * the button under a page reads the next one. What was asked last is what
 * is shown: an earlier answer that comes later is dropped. An error is
 * shown in its place.
 */
export function cursorPages<T, P extends CursorPage<T>>(
  out: HTMLElement,
  opts: {
    /** Shown while a page is read. */
    reading: string;
    read(after: string | undefined): Promise<P>;
    /** The page as it is shown (above the button). */
    render(page: P, after: string | undefined): Child[];
    /** The button's label, and what is announced once a page is shown. */
    more: string;
    said(page: P): string;
  },
): (after?: string) => void {
  let latest = 0;
  const failed = (err: unknown) => replace(out, h('p', { class: 'error', role: 'alert' }, describeError(err)));
  async function show(after?: string): Promise<void> {
    const mine = ++latest;
    replace(out, h('p', null, opts.reading));
    const page = await opts.read(after);
    if (mine !== latest) return;
    const next = page.nextCursor;
    replace(
      out,
      ...opts.render(page, after),
      next ? h('button', { type: 'button', class: 'secondary', onclick: () => run(next) }, opts.more) : null,
    );
    announce(opts.said(page));
  }
  const run = (after?: string) => void show(after).catch(failed);
  return run;
}

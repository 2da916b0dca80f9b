import type { Me } from './session.ts';

/** What a page gets: the caller, the element to fill, and a way to stop its timers when the reader leaves. */
export interface PageContext {
  me: Me;
  main: HTMLElement;
  onLeave(stop: () => void): void;
}

/**
 * Reads a page's data now and then every `ms` until the reader leaves; `read`
 * answers whether to go on. The first read's error is the caller's (the page
 * shows it); a later one is tried again at the next tick.
 */
export async function poll(onLeave: PageContext['onLeave'], ms: number, read: () => Promise<boolean>): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  onLeave(() => ((stopped = true), clearTimeout(timer)));
  const next = (again: boolean) => {
    if (again && !stopped) timer = setTimeout(() => void read().then(next, () => next(true)), ms);
  };
  next(await read());
}

import type { Me } from './session.ts';

/** What a page gets: the caller, the element to fill, and a way to stop its timers when the reader leaves. */
export interface PageContext {
  me: Me;
  main: HTMLElement;
  onLeave(stop: () => void): void;
}

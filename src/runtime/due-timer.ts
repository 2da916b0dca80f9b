/**
 * The longest delay one Node timer holds: a longer one (2^31 ms is 24.8 days)
 * fires after 1 ms with a TimeoutOverflowWarning. A bulk job may be scheduled
 * 90 days ahead and a secret's grace period is an operator's setting, so no
 * delay a caller hands over goes to `setTimeout` as it is.
 */
export const maxTimerDelayMs = 2 ** 31 - 1;

export interface DueTimer {
  /** It will not fire (a no-op once it has). */
  cancel(): void;
}

/**
 * Calls `fire` once, when the wall clock reads `dueAt` (epoch ms) or later,
 * never before: a due time past what one Node timer holds is waited out in
 * steps, and each wake compares the clock with the due time and arms the
 * rest. Sending at the wrong time is worse than not sending. An infinite due
 * time never fires.
 */
export function timerAt(dueAt: number, fire: () => void): DueTimer {
  let handle: NodeJS.Timeout;
  const arm = () => {
    handle = setTimeout(wake, Math.min(Math.max(dueAt - Date.now(), 0), maxTimerDelayMs));
  };
  const wake = () => (Date.now() < dueAt ? arm() : fire());
  arm();
  return { cancel: () => clearTimeout(handle) };
}

/** `timerAt` `delayMs` from now. */
export const timerAfter = (delayMs: number, fire: () => void): DueTimer => timerAt(Date.now() + delayMs, fire);

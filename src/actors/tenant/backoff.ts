/**
 * The wait before a send is tried again: the base after the first attempt,
 * four times as long after each further one, spread ±20% so a relay coming
 * back is not hit by every retry at once.
 */
export function backoffMs(baseMs: number, attemptsMade: number, random: () => number = Math.random): number {
  const nominal = baseMs * 4 ** Math.max(0, attemptsMade - 1);
  return Math.round(nominal * (0.8 + random() * 0.4));
}

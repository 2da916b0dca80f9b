/** What the send queue needs to know of an online relay to choose it. */
export interface RelayCredit {
  id: string;
  capacity: number;
  phoneNumbers: string[];
  /** Sends it can take now: what its relay actor granted, less what was handed to it since. */
  credits: number;
}

/**
 * The relay that owns `fromNumber` when one online relay does (only among
 * those with credit: a message for a busy owner waits for it); otherwise the
 * least busy relay with credit.
 */
export function pickRelay<R extends RelayCredit>(open: R[], fromNumber: string | null, online: R[]): R | undefined {
  if (fromNumber) {
    const owners = online.filter((r) => r.phoneNumbers.includes(fromNumber));
    if (owners.length > 0) return open.filter((r) => owners.includes(r)).sort(byLoad)[0];
  }
  return [...open].sort(byLoad)[0];
}

/** The share of its capacity a relay has no credit for (in flight, or handed to it on the way). */
const load = (r: RelayCredit) => (r.capacity - r.credits) / Math.max(1, r.capacity);
const byLoad = (a: RelayCredit, b: RelayCredit) => load(a) - load(b);

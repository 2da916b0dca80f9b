/** What the send queue needs to know of an online relay to choose it. */
export interface RelayCredit {
  id: string;
  capacity: number;
  phoneNumbers: string[];
  /** Sends handed to it that it has not reported on yet; each takes one unit of capacity. */
  inFlight: Set<string>;
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

const byLoad = (a: RelayCredit, b: RelayCredit) => a.inFlight.size / Math.max(1, a.capacity) - b.inFlight.size / Math.max(1, b.capacity);

/** What the send queue needs to know of an online relay to choose it. */
export interface RelayCredit {
  id: string;
  capacity: number;
  phoneNumbers: string[];
  /** Sends it can take now: what its relay actor granted, less what was handed to it since. */
  credits: number;
}

/**
 * For a line with a relay chain (its phone number's `relays`: primary, then
 * standbys), the first of them online, and only it: a message waits for its
 * credit, or, with none of them online, for one to come. Otherwise the relay
 * that owns `fromNumber` when one online relay does (only among those with
 * credit: a message for a busy owner waits for it); otherwise the least busy
 * relay with credit. In memory only: a chain has four relays at most.
 */
export function pickRelay<R extends RelayCredit>(
  open: R[],
  fromNumber: string | null,
  online: R[],
  chain?: readonly string[],
): R | undefined {
  if (fromNumber && chain) {
    for (const id of chain) {
      const relay = online.find((r) => r.id === id);
      if (relay) return open.includes(relay) ? relay : undefined;
    }
    return undefined;
  }
  if (fromNumber) {
    const owners = online.filter((r) => r.phoneNumbers.includes(fromNumber));
    if (owners.length > 0) return open.filter((r) => owners.includes(r)).sort(byLoad)[0];
  }
  return [...open].sort(byLoad)[0];
}

/** The share of its capacity a relay has no credit for (in flight, or handed to it on the way). */
const load = (r: RelayCredit) => (r.capacity - r.credits) / Math.max(1, r.capacity);
const byLoad = (a: RelayCredit, b: RelayCredit) => load(a) - load(b);

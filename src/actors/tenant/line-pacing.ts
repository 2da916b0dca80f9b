import type { waitingReasons } from './protocol.ts';

/** How fast one sender line may send: a rate with a small burst, and a cap of first messages to new recipients per rolling day. */
export interface Pace {
  perSecond: number;
  burst: number;
  newContactsPerDay: number;
}

/** Why a queued message is not handed to a relay yet, as its status record says. */
export type WaitingFor = (typeof waitingReasons)[number];

export interface Hold {
  waitingFor: WaitingFor;
  /** Epoch ms before which the line will not send it; absent when it waits for something without a clock (a relay). */
  notBefore?: number;
}

/** A recipient a line wrote to first, and when (epoch ms). */
export interface LineContact {
  line: string;
  to: string;
  firstAt: number;
}

export const dayMs = 24 * 3600 * 1000;

interface Line {
  tokens: number;
  refilledAt: number;
  /** Recipients this line has written to. */
  known: Set<string>;
  /** When each first message to a new recipient went out in the last 24 h, oldest first. */
  newContacts: number[];
  /** Messages sent in each second of the last minute: the count of second `s` is at `s % 60`, valid while `sentSecond - s < 60`. */
  sent: number[];
  sentSecond: number;
}

/** The line of a message: its sender number when it names one, otherwise the relay that sends it. */
export function lineOf(fromNumber: string | null, relayId: string): string {
  return fromNumber ?? `relay:${relayId}`;
}

/**
 * The pacing of an organization's sender lines, in the tenant actor's
 * memory: a token bucket per line for its rate, and the recipients it has
 * written to with the first messages of the last 24 h for its new-contact
 * cap. Nothing here reads or writes the store: the dispatch rebuilds it on
 * activation (`seed`) and records new contacts as it hands them out.
 */
export class LinePacing {
  private readonly lines = new Map<string, Line>();
  /** The organization's pace (its setting over the defaults) and each number's override. */
  private orgPace: Pace;
  private numberPaces = new Map<string, Partial<Pace>>();

  constructor(private readonly defaults: Pace) {
    this.orgPace = defaults;
  }

  configure(org: Partial<Pace> | undefined, numbers: Map<string, Partial<Pace>>): void {
    this.orgPace = { ...this.defaults, ...org };
    this.numberPaces = numbers;
  }

  pace(line: string): Pace {
    return { ...this.orgPace, ...this.numberPaces.get(line) };
  }

  /** Recipients the store says each line wrote to first, and when. */
  seed(contacts: LineContact[], now: number): void {
    for (const c of contacts) {
      const line = this.line(c.line, now);
      line.known.add(c.to);
      if (c.firstAt > now - dayMs) line.newContacts.push(c.firstAt);
    }
    for (const line of this.lines.values()) line.newContacts.sort((a, b) => a - b);
  }

  private line(key: string, now: number): Line {
    let line = this.lines.get(key);
    if (!line) {
      line = {
        tokens: this.pace(key).burst,
        refilledAt: now,
        known: new Set(),
        newContacts: [],
        sent: new Array<number>(60).fill(0),
        sentSecond: Math.floor(now / 1000),
      };
      this.lines.set(key, line);
    }
    const pace = this.pace(key);
    line.tokens = Math.min(pace.burst, line.tokens + ((now - line.refilledAt) / 1000) * pace.perSecond);
    line.refilledAt = now;
    while (line.newContacts.length > 0 && line.newContacts[0]! <= now - dayMs) line.newContacts.shift();
    const second = Math.floor(now / 1000);
    for (let s = Math.max(line.sentSecond + 1, second - 59); s <= second; s++) line.sent[s % 60] = 0;
    line.sentSecond = Math.max(line.sentSecond, second);
    return line;
  }

  /** Null when the line may send to `to` now; otherwise what it waits for and until when. A message with no recipient known to the queue counts as a known contact. */
  hold(key: string, to: string | undefined, now: number): Hold | null {
    const line = this.line(key, now);
    const pace = this.pace(key);
    if (to !== undefined && !line.known.has(to) && line.newContacts.length >= pace.newContactsPerDay) {
      return {
        waitingFor: 'new_contact_cap',
        notBefore: (line.newContacts[line.newContacts.length - pace.newContactsPerDay] ?? now) + dayMs,
      };
    }
    if (line.tokens < 1)
      return { waitingFor: 'line_rate', notBefore: now + Math.ceil(((1 - line.tokens) / pace.perSecond) * 1000) };
    return null;
  }

  /** Counts a send on the line; returns the contact when it is the line's first message to `to`. */
  take(key: string, to: string | undefined, now: number): LineContact | null {
    const line = this.line(key, now);
    line.tokens -= 1;
    line.sent[line.sentSecond % 60]! += 1;
    if (to === undefined || line.known.has(to)) return null;
    line.known.add(to);
    line.newContacts.push(now);
    return { line: key, to, firstAt: now };
  }

  /**
   * When `lines` together will have sent `count` messages, `fresh` of them
   * first messages to recipients new to every one of the lines (epoch ms):
   * their rates after what their buckets hold now, and, when the new
   * recipients are more than the lines' caps have left, the days their caps
   * take to free enough slots.
   */
  drainedAt(lines: string[], count: number, fresh: number, now: number): number | null {
    if (lines.length === 0) return null;
    let rate = 0;
    let ready = 0;
    let capLeft = 0;
    let capPerDay = 0;
    let capFreesAt = Infinity;
    for (const key of lines) {
      const line = this.line(key, now);
      const pace = this.pace(key);
      rate += pace.perSecond;
      ready += Math.floor(line.tokens);
      capLeft += Math.max(0, pace.newContactsPerDay - line.newContacts.length);
      capPerDay += pace.newContactsPerDay;
      if (line.newContacts.length > 0) capFreesAt = Math.min(capFreesAt, line.newContacts[0]! + dayMs);
    }
    const byRate = now + (Math.max(0, count - ready) / rate) * 1000;
    if (fresh <= capLeft) return Math.ceil(byRate);
    if (capPerDay === 0) return null;
    // The first slots to free: the oldest new contact's, or, with none in the last day, those the cap has left, taken now.
    const byCap =
      (Number.isFinite(capFreesAt) ? capFreesAt : now + dayMs) + (Math.ceil((fresh - capLeft) / capPerDay) - 1) * dayMs;
    return Math.ceil(Math.max(byRate, byCap));
  }

  /** Whether the line has written to `to` (without bringing its allowance up to date). */
  knows(key: string, to: string): boolean {
    return this.lines.get(key)?.known.has(to) ?? false;
  }

  /** Whether `to` is a recipient none of `lines` has written to. */
  isNewTo(lines: string[], to: string | undefined, now: number): boolean {
    return to !== undefined && lines.every((key) => !this.line(key, now).known.has(to));
  }

  /** What `GET /phone-numbers/:id/usage` shows of a line. */
  usage(key: string, now: number) {
    const line = this.line(key, now);
    const pace = this.pace(key);
    const rateFree = line.tokens >= 1 ? now : now + Math.ceil(((1 - line.tokens) / pace.perSecond) * 1000);
    const contactsFree =
      line.newContacts.length >= pace.newContactsPerDay
        ? line.newContacts[line.newContacts.length - pace.newContactsPerDay]! + dayMs
        : now;
    return {
      pace,
      sentLastMinute: line.sent.reduce((a, b) => a + b, 0),
      newContactsToday: line.newContacts.length,
      nextSlotAt: rateFree,
      nextNewContactSlotAt: Math.max(rateFree, contactsFree),
    };
  }
}

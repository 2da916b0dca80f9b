import type { waitingReasons } from './protocol.ts';
import type { Config } from '../../config.ts';
import { afterQuietHours, quietUntil, zoneOfNumber } from './quiet-hours.ts';

/**
 * How fast one sender line may send: a rate with a small burst, and a cap of
 * first messages to new recipients per rolling day; and its health rules:
 * the messages a recipient who has not replied may get, the follow-ups a
 * day, a random spacing between first messages, and quiet hours in the
 * recipient's zone (with the zone of recipients the table does not place).
 * The deployment's defaults have the same shape.
 */
export type Pace = Config['pacing'];

/** A recipient's reply opens a window this long in which the line may write to them outside its caps. */
export const replyWindowMs = 24 * 3600 * 1000;
/**
 * A recipient who wrote this recently is in a conversation, awake: quiet
 * hours do not hold a message to them (an answer at 22:05 to a question sent
 * at 22:00, the confirmation of a STOP, the answer to HELP).
 */
export const awakeWindowMs = 3600 * 1000;

/** Why a queued message is not handed to a relay yet, as its status record says. */
export type WaitingFor = (typeof waitingReasons)[number];

export interface Hold {
  waitingFor: WaitingFor;
  /** Epoch ms before which the line will not send it; absent when it waits for something without a clock (a relay, a reply). */
  notBefore?: number;
  /** The hold is the line's for every recipient new to it (its new-contact cap, its spacing between first messages), not this message's alone. */
  fresh?: true;
}

/** A recipient a line wrote to first, and when (epoch ms). */
export interface LineContact {
  line: string;
  to: string;
  firstAt: number;
}

export const dayMs = 24 * 3600 * 1000;

/**
 * A line's reply rate and unanswered share look at the recipients it first
 * wrote to in the last 7 days: long enough to hold a few hundred first
 * messages of a paced line and the replies that come a day or two later,
 * short enough to show within the week a change of what the line sends.
 */
export const healthWindowMs = 7 * dayMs;

interface Line {
  tokens: number;
  refilledAt: number;
  /** Recipients this line has written to, with when it first did (epoch ms). */
  known: Map<string, number>;
  /** When each first message to a new recipient went out in the last 24 h, oldest first. */
  newContacts: number[];
  /** Messages sent to each recipient since their last reply (absent: none). */
  unanswered: Map<string, number>;
  /** The follow-ups of the last 24 h (a message to a recipient who has not answered the line's last one), the first to each recipient in the window, oldest first. */
  followUps: Array<{ at: number; to: string }>;
  /** The recipients of `followUps`. */
  followedUp: Set<string>;
  /** Before this (epoch ms) the line writes to no new recipient: the random spacing after its last first message. */
  nextNewContactAt: number;
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
  private readonly quietMemo = new Map<string, number | null>();
  private quietMemoAt = 0;
  /** When each recipient last wrote to the organization (epoch ms): a reply lifts the holds of every line. */
  private readonly repliedAt = new Map<string, number>();

  constructor(
    private readonly defaults: Pace,
    /** Draws the random spacing between first messages (0 to 1); a test may make it fixed. */
    private readonly random: () => number = Math.random,
  ) {
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
      line.known.set(c.to, Math.min(c.firstAt, line.known.get(c.to) ?? Infinity));
      if (c.firstAt > now - dayMs) line.newContacts.push(c.firstAt);
    }
    for (const line of this.lines.values()) line.newContacts.sort((a, b) => a - b);
  }

  /**
   * What the store says of each recipient's replies (its conversations):
   * when they last wrote, and how many messages were sent to them since.
   * Each line that knows the recipient takes the count as its own (the
   * conversations do not say which line sent them): a line may hold a
   * message sooner than it would have, never later.
   */
  seedReplies(replies: Array<{ to: string; lastInboundAt?: number; sentSinceReply: number }>): void {
    for (const r of replies) {
      if (r.lastInboundAt !== undefined)
        this.repliedAt.set(r.to, Math.max(r.lastInboundAt, this.repliedAt.get(r.to) ?? 0));
      if (r.sentSinceReply <= 0) continue;
      for (const line of this.lines.values())
        if (line.known.has(r.to)) line.unanswered.set(r.to, Math.max(r.sentSinceReply, line.unanswered.get(r.to) ?? 0));
    }
  }

  /** The smallest unanswered cap of the organization's lines (its own, or a number's). */
  smallestUnansweredCap(): number {
    let cap = this.orgPace.unansweredCap;
    for (const pace of this.numberPaces.values()) cap = Math.min(cap, pace.unansweredCap ?? cap);
    return cap;
  }

  /** `to` wrote to the organization at `at`: every line's count of messages they did not answer starts again. */
  replied(to: string, at: number): void {
    if (at <= (this.repliedAt.get(to) ?? 0)) return;
    this.repliedAt.set(to, at);
    for (const line of this.lines.values()) line.unanswered.delete(to);
  }

  /** Whether `to` wrote within the reply window before `now`: a message to them is exempt from the caps. */
  private answering(to: string, now: number): boolean {
    const at = this.repliedAt.get(to);
    return at !== undefined && at > now - replyWindowMs;
  }

  /** Whether `to` wrote within the last hour before `now`: quiet hours do not hold a message to them. */
  private awake(to: string, now: number): boolean {
    const at = this.repliedAt.get(to);
    return at !== undefined && at > now - awakeWindowMs;
  }

  /** Whether a message to `to` would be a first message to a recipient new to the line, outside the reply window. */
  isFresh(key: string, to: string, now: number): boolean {
    return !this.knows(key, to) && !this.answering(to, now);
  }

  /**
   * When the quiet hours `to` is in at `now` end, in their zone (the
   * number's, else the line's), or null. Remembered per zone and window for
   * one `now`: a dispatch pass asks it for every message it looks at.
   */
  private quietUntil(pace: Pace, to: string, now: number): number | null {
    if (!pace.quietHours) return null;
    const zone = zoneOfNumber(to) ?? pace.timeZone;
    if (this.quietMemoAt !== now) {
      this.quietMemo.clear();
      this.quietMemoAt = now;
    }
    const memoKey = `${zone} ${pace.quietHours.start} ${pace.quietHours.end}`;
    let until = this.quietMemo.get(memoKey);
    if (until === undefined) this.quietMemo.set(memoKey, (until = quietUntil(pace.quietHours, zone, now)));
    return until;
  }

  private line(key: string, now: number): Line {
    let line = this.lines.get(key);
    if (!line) {
      line = {
        tokens: this.pace(key).burst,
        refilledAt: now,
        known: new Map(),
        newContacts: [],
        unanswered: new Map(),
        followUps: [],
        followedUp: new Set(),
        nextNewContactAt: 0,
        sent: new Array<number>(60).fill(0),
        sentSecond: Math.floor(now / 1000),
      };
      this.lines.set(key, line);
    }
    const pace = this.pace(key);
    line.tokens = Math.min(pace.burst, line.tokens + ((now - line.refilledAt) / 1000) * pace.perSecond);
    line.refilledAt = now;
    while (line.newContacts.length > 0 && line.newContacts[0]! <= now - dayMs) line.newContacts.shift();
    while (line.followUps.length > 0 && line.followUps[0]!.at <= now - dayMs)
      line.followedUp.delete(line.followUps.shift()!.to);
    const second = Math.floor(now / 1000);
    for (let s = Math.max(line.sentSecond + 1, second - 59); s <= second; s++) line.sent[s % 60] = 0;
    line.sentSecond = Math.max(line.sentSecond, second);
    return line;
  }

  /**
   * Null when the line may send to `to` now; otherwise what it waits for and
   * until when (no time: a reply). A message with no recipient known to the
   * queue counts as a known contact who replied.
   */
  hold(key: string, to: string | undefined, now: number): Hold | null {
    const line = this.line(key, now);
    const pace = this.pace(key);
    if (to !== undefined) {
      const known = line.known.has(to);
      const unanswered = line.unanswered.get(to) ?? 0;
      if (!this.answering(to, now)) {
        if (unanswered >= pace.unansweredCap) return { waitingFor: 'unanswered_cap' };
        if (!known && line.newContacts.length >= pace.newContactsPerDay) {
          return {
            waitingFor: 'new_contact_cap',
            notBefore: (line.newContacts[line.newContacts.length - pace.newContactsPerDay] ?? now) + dayMs,
            fresh: true,
          };
        }
        if (unanswered > 0 && !line.followedUp.has(to) && line.followUps.length >= pace.followUpsPerDay) {
          return {
            waitingFor: 'follow_up_cap',
            notBefore: (line.followUps[line.followUps.length - pace.followUpsPerDay]?.at ?? now) + dayMs,
          };
        }
        if (!known && now < line.nextNewContactAt)
          return { waitingFor: 'line_rate', notBefore: line.nextNewContactAt, fresh: true };
      }
      const quietEnd = this.awake(to, now) ? null : this.quietUntil(pace, to, now);
      if (quietEnd !== null) return { waitingFor: 'quiet_hours', notBefore: quietEnd };
    }
    if (line.tokens < 1)
      return { waitingFor: 'line_rate', notBefore: now + Math.ceil(((1 - line.tokens) / pace.perSecond) * 1000) };
    return null;
  }

  /**
   * Counts a send on the line; returns the contact when it is the line's
   * first message to `to`. A message to a recipient within the reply window
   * counts toward no cap.
   */
  take(key: string, to: string | undefined, now: number): LineContact | null {
    const line = this.line(key, now);
    line.tokens -= 1;
    line.sent[line.sentSecond % 60]! += 1;
    if (to === undefined) return null;
    const answering = this.answering(to, now);
    const known = line.known.has(to);
    if (!answering) {
      const unanswered = line.unanswered.get(to) ?? 0;
      if (unanswered > 0 && !line.followedUp.has(to)) {
        line.followUps.push({ at: now, to });
        line.followedUp.add(to);
      }
      line.unanswered.set(to, unanswered + 1);
    }
    if (known) return null;
    line.known.set(to, now);
    if (!answering) {
      line.newContacts.push(now);
      line.nextNewContactAt = now + Math.floor(this.random() * this.pace(key).jitterMs);
    }
    return { line: key, to, firstAt: now };
  }

  /**
   * When `lines` together will have sent `count` messages, `fresh` of them
   * first messages to recipients new to every one of the lines (epoch ms):
   * their rates after what their buckets hold now (the new recipients no
   * faster than the lines' mean spacing between first messages), and, when
   * the new recipients are more than the lines' caps have left, the days
   * their caps take to free enough slots; the nights of the first line's
   * quiet hours stop the drain, in `zone` (most of the recipients'), else
   * the line's. Messages that will wait for a recipient's reply, and the
   * follow-up cap, are not counted.
   */
  drainedAt(
    lines: string[],
    count: number,
    fresh: number,
    now: number,
    zone?: string,
    /** When the drain starts, if later than `now` (a scheduled job's start): the lines as they stand now, from then on. */
    startAt = now,
  ): number | null {
    if (lines.length === 0) return null;
    let rate = 0;
    let ready = 0;
    let capLeft = 0;
    let capPerDay = 0;
    let capFreesAt = Infinity;
    let spacing = 0;
    for (const key of lines) {
      const line = this.line(key, now);
      const pace = this.pace(key);
      rate += pace.perSecond;
      ready += Math.floor(line.tokens);
      capLeft += Math.max(0, pace.newContactsPerDay - line.newContacts.length);
      capPerDay += pace.newContactsPerDay;
      spacing += pace.jitterMs / 2;
      if (line.newContacts.length > 0) capFreesAt = Math.min(capFreesAt, line.newContacts[0]! + dayMs);
    }
    const sending = Math.max((Math.max(0, count - ready) / rate) * 1000, (fresh * spacing) / lines.length ** 2);
    const { quietHours, timeZone: lineZone } = this.pace(lines[0]!);
    const timeZone = zone ?? lineZone;
    const byRate = quietHours ? afterQuietHours(quietHours, timeZone, startAt, sending) : startAt + sending;
    if (fresh <= capLeft) return Math.ceil(byRate);
    if (capPerDay === 0) return null;
    // The first slots to free: the oldest new contact's, or, with none in the last day, those the cap has left, taken now.
    let byCap =
      (Number.isFinite(capFreesAt) ? capFreesAt : now + dayMs) +
      (Math.ceil((fresh - capLeft) / capPerDay) - 1) * dayMs +
      (startAt - now);
    if (quietHours) byCap = quietUntil(quietHours, timeZone, byCap) ?? byCap;
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
    const followUpsFree =
      line.followUps.length >= pace.followUpsPerDay
        ? line.followUps[line.followUps.length - pace.followUpsPerDay]!.at + dayMs
        : now;
    let awaitingReply = 0;
    for (const [to, count] of line.unanswered)
      if (count >= pace.unansweredCap && !this.answering(to, now)) awaitingReply++;
    return {
      pace,
      sentLastMinute: line.sent.reduce((a, b) => a + b, 0),
      newContactsToday: line.newContacts.length,
      followUpsToday: line.followUps.length,
      awaitingReply,
      nextSlotAt: rateFree,
      nextNewContactSlotAt: Math.max(rateFree, contactsFree, line.nextNewContactAt),
      nextFollowUpSlotAt: Math.max(rateFree, followUpsFree),
      health: this.health(line, now),
    };
  }

  /**
   * Of the recipients the line first wrote to within `healthWindowMs`: how
   * many have written to the organization since (its reply rate), and how
   * many have not answered its latest messages (its unanswered share). From
   * memory: one pass over the recipients the line knows, when asked.
   */
  private health(line: Line, now: number) {
    let recipients = 0;
    let replied = 0;
    let unanswered = 0;
    for (const [to, firstAt] of line.known) {
      if (firstAt <= now - healthWindowMs) continue;
      recipients++;
      if ((this.repliedAt.get(to) ?? -Infinity) > firstAt) replied++;
      if ((line.unanswered.get(to) ?? 0) > 0) unanswered++;
    }
    const share = (n: number) => (recipients === 0 ? null : n / recipients);
    return {
      windowDays: healthWindowMs / dayMs,
      recipients,
      replied,
      unanswered,
      replyRate: share(replied),
      unansweredShare: share(unanswered),
    };
  }
}

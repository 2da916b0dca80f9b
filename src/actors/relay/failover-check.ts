import { randomUUID } from 'node:crypto';
import { nowIso } from '../../ids.ts';
import type { MessageDoc, MessagingCollections } from '../../messages/message-store.ts';
import type { ActorContext } from '../../runtime/actor.ts';
import type { RelayLink } from '../../relays/relay-link.ts';
import { tenantProtocol } from '../tenant/protocol.ts';

/** How long a failover check waits for the standby's answer. */
export const failoverCheckTimeoutMs = 5_000;
/** How long a message whose check was inconclusive waits before it is handed out (and checked) again. */
export const failoverCheckRetryMs = 5_000;
/**
 * How far before its hand-back a message may have been handed to the relay
 * that held it, beyond the send timeout (which settles any attempt older):
 * room for the two Macs' clocks to differ.
 */
const clockSlackMs = 60_000;

/** What a failover check decided for each message a standby claimed. */
export interface Sifted {
  /** To send: no check needed, or the standby's chat.db does not have it. */
  send: MessageDoc[];
  /** Already sent by the relay that held it (the standby's chat.db has it), with the row's guid. */
  sent: Array<{ doc: MessageDoc; guid: string }>;
}

/**
 * The failover check (docs/relay-agent.md, "Standby relays"). A relay that goes
 * offline hands back the sends it held (actors/relay/relay-sends.ts), marked
 * `failoverCheck`: its Mac may have handed them to Messages already. Before
 * another relay of the line's chain sends one, it asks that relay's agent
 * whether its own chat.db has the same text to the same recipient since the
 * hand-over (both Macs share one Apple ID, so iCloud brings the primary's
 * sent rows to the standby). Found: reported sent, never sent twice. Not
 * found: sent. No answer in time (or an agent older than 0.4): the message
 * goes back to the queue, waiting `relay_failover_check`, and is checked
 * again. Messages of lines with no relay chain are sent as before.
 */
export class FailoverCheck {
  constructor(private readonly deps: { db: MessagingCollections; link: RelayLink; sendTimeoutMs: number }) {}

  /** The `failoverCheck` a relay's hand-back marks its messages with: whoever sends them next checks first. */
  mark(relayId: string): NonNullable<MessageDoc['failoverCheck']> {
    return { relayId, since: new Date(Date.now() - this.deps.sendTimeoutMs - clockSlackMs).toISOString() };
  }

  /**
   * Sorts a hand-over's claimed messages: those to check are asked of the
   * claiming relay's agent, all at once (the actor waits `failoverCheckTimeoutMs`
   * at most, not that for each). Returned in the hand-over's order.
   */
  async sift(
    ctx: ActorContext<unknown>,
    tenantId: string,
    relay: { id: string; node: string; session: number },
    claimed: MessageDoc[],
  ): Promise<Sifted> {
    const chained = new Map<string, boolean>();
    const toCheck = new Set<MessageDoc>();
    for (const doc of claimed) {
      const check = doc.failoverCheck;
      if (check && check.relayId !== relay.id && doc.fromNumber && (await this.chained(tenantId, doc, chained)))
        toCheck.add(doc);
    }
    const answers = new Map(
      await Promise.all(
        [...toCheck].map(async (doc) => {
          const answer = await this.deps.link.checkSent(
            relay,
            `chk_${randomUUID()}`,
            doc.to,
            { body: doc.body, since: doc.failoverCheck!.since },
            failoverCheckTimeoutMs,
          );
          return [doc, answer] as const;
        }),
      ),
    );
    const out: Sifted = { send: [], sent: [] };
    for (const doc of claimed) {
      if (!toCheck.has(doc)) {
        out.send.push(doc);
        continue;
      }
      const answer = answers.get(doc);
      if (answer?.sent === undefined) {
        ctx.log.warn(
          { tenantId, relayId: relay.id, messageId: doc.id, refused: answer?.refused },
          'failover check inconclusive: the message waits',
        );
        await this.wait(ctx, tenantId, doc);
        continue;
      }
      await this.deps.db.messages.updateOne(
        { tenantId },
        { id: doc.id, claim: doc.claim },
        { $set: { failoverCheck: null } },
      );
      if (answer.sent) out.sent.push({ doc, guid: answer.guid ?? '' });
      else out.send.push(doc);
    }
    return out;
  }

  /** Whether the message's line has a relay chain (its phone number's `relays`); read once per line and hand-over. */
  private async chained(tenantId: string, doc: MessageDoc, seen: Map<string, boolean>): Promise<boolean> {
    const line = doc.fromNumber!;
    let has = seen.get(line);
    if (has === undefined) {
      const number = await this.deps.db.phoneNumbers.findOne({ tenantId }, { number: line });
      has = (number?.relays?.length ?? 0) > 0;
      seen.set(line, has);
    }
    return has;
  }

  /** An inconclusive check: back to the queue (the attempt does not count), due again after `failoverCheckRetryMs`. */
  private async wait(ctx: ActorContext<unknown>, tenantId: string, doc: MessageDoc): Promise<void> {
    const now = nowIso();
    const back = await this.deps.db.messages.updateOne(
      { tenantId },
      { id: doc.id, status: 'processing', claim: doc.claim },
      {
        $set: {
          status: 'queued',
          relayId: null,
          updatedAt: now,
          nextAttemptAt: new Date(Date.now() + failoverCheckRetryMs).toISOString(),
          failoverCheck: { ...doc.failoverCheck!, waitingSince: doc.failoverCheck?.waitingSince ?? now },
        },
        $inc: { attempts: -1 },
      },
    );
    if (!back) return;
    await ctx.send(
      tenantProtocol,
      tenantId,
      { kind: 'retry', messageId: doc.id, ...(back.attempts >= 1 ? { attempts: back.attempts } : {}) },
      { delayMs: failoverCheckRetryMs },
    );
  }
}

import type { Logger } from '../log.ts';
import { keywordOf, maxKeywordTextChars, type InboundKeywords, type ReceivedText } from './opt-out-keywords.ts';
import type { SuppressionList } from './suppression-list.ts';

/** Sends the organization's help text back to whoever asked, through the send path. */
export type HelpReply = (
  to: { tenantId: string; teamId: string; handle: string; messageId: string },
  text: string,
) => Promise<void>;

/**
 * What a received message that is a keyword does: a stop keyword puts its
 * sender on the organization's suppression list, a start keyword takes them
 * off, HELP is answered with the organization's help text when it has one.
 * Run for every received one-to-one message, after it is stored; a message
 * replayed after a reconnect runs it again, and the list's writes and
 * events are made once.
 */
export class OptOutInbound implements InboundKeywords {
  constructor(private readonly deps: { list: SuppressionList; helpReply: HelpReply; log: Logger }) {}

  async received(text: ReceivedText): Promise<void> {
    // Nearly every message is longer than any keyword: answered before the organization's settings are looked at.
    if (text.body.length > maxKeywordTextChars) return;
    const optOuts = await this.deps.list.optOuts(text.tenantId);
    const kind = keywordOf(text.body, optOuts.stopKeywords);
    if (kind === 'stop') {
      await this.deps.list.add(text.tenantId, [
        { handle: text.handle, reason: 'stop keyword', source: 'keyword', messageId: text.messageId },
      ]);
    } else if (kind === 'start') {
      await this.deps.list.remove(text.tenantId, text.handle, 'keyword', text.messageId);
    } else if (kind === 'help' && optOuts.helpText && text.fresh) {
      await this.deps
        .helpReply(
          { tenantId: text.tenantId, teamId: text.teamId, handle: text.handle, messageId: text.messageId },
          optOuts.helpText,
        )
        .catch((err: unknown) => this.deps.log.warn({ err, tenantId: text.tenantId }, 'could not send the help text'));
    }
  }
}

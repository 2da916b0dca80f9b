import type { Config } from '../config.ts';
import type { ListCursors } from '../http/list-cursors.ts';
import type { Outbox } from '../events/outbox.ts';
import type { AccessTokens } from '../identity/jwt.ts';
import type { Logger } from '../log.ts';
import type { RelayCollections } from '../relays/relay-store.ts';
import type { Transport } from '../runtime/types.ts';
import { AttachmentLinks } from './attachment-links.ts';
import { AttachmentService } from './attachment-service.ts';
import { attachmentBucket } from './attachment-store.ts';
import { attachmentRoutes } from './attachments.routes.ts';
import type { FileStore } from '../store/file-store.ts';
import type { RelayCredential } from '../relay-protocol/frames.ts';
import { conversationRoutes } from './conversations.routes.ts';
import { IdempotencyKeys } from './idempotency.ts';
import { MessageQueries } from './message-queries.ts';
import type { MessagingCollections, WaitingReason } from './message-store.ts';
import { messageRoutes } from './messages.routes.ts';
import { phoneNumberRoutes } from './phone-numbers.routes.ts';
import type { MessageRollups } from './message-rollups.ts';
import { statsRoutes } from './stats.routes.ts';
import { actorClient } from '../runtime/actor.ts';
import { tenantProtocol } from '../actors/tenant/protocol.ts';
import { SendCommitter } from './send-committer.ts';
import { SendService, type ContactLookup, type OptOutCheck } from './send-service.ts';

/** A status read does not wait longer than this for the dispatch to say why a message waits: it answers without the reason. */
const waitingAskMs = 2_000;

export interface MessagingDeps {
  config: Config;
  log: Logger;
  db: MessagingCollections & RelayCollections;
  runtime: Transport;
  /** Writes a new message with its event (events/outbox.ts). */
  outbox: Outbox;
  tokens: AccessTokens;
  contacts: ContactLookup;
  cursors: ListCursors;
  /** Message statistics, counted by the writes (message-rollups.ts). */
  rollups: MessageRollups;
  /** The organization's suppression list, checked by every send. */
  optOuts: OptOutCheck;
  /** Where received attachments' bytes are kept: a bucket of the store (`Store.files`). */
  files(bucket: string): FileStore;
  /** The relay a credential belongs to: an attachment upload's caller. */
  relay(credential: RelayCredential): Promise<{ id: string; tenantId: string } | undefined>;
}

/** The send path, message history, conversations and phone numbers, wired: their routes, and the send path for automations' replies. */
export function createMessaging(deps: MessagingDeps) {
  const log = deps.log.child({ component: 'messaging' });
  const committer = new SendCommitter(
    { db: deps.db, runtime: deps.runtime, outbox: deps.outbox, rollups: deps.rollups, log },
    deps.config.sendBatchMax,
  );
  const send = new SendService({
    db: deps.db,
    committer,
    idempotency: new IdempotencyKeys(deps.db.idempotency),
    contacts: deps.contacts,
    optOuts: deps.optOuts,
    smsFallbackMinSeconds: deps.config.smsFallbackMinSeconds,
  });
  const tenants = actorClient(deps.runtime, tenantProtocol);
  const queries = new MessageQueries({
    db: deps.db,
    contacts: deps.contacts,
    waiting: (tenantId, m) =>
      tenants.ask<{ waitingFor: WaitingReason; notBefore?: number } | null>(
        tenantId,
        { kind: 'waiting', messageId: m.id, fromNumber: m.fromNumber, to: m.to },
        waitingAskMs,
      ),
  });
  const links = new AttachmentLinks(deps.tokens.deriveSecret('attachment-links'));
  const publicBaseUrl = (host: string | undefined) =>
    deps.config.publicBaseUrl ?? `http://${host ?? `localhost:${deps.config.port}`}`;
  const attachments = new AttachmentService({
    attachments: deps.db.attachments,
    files: deps.files(attachmentBucket),
    links,
    queries,
    relay: deps.relay,
    maxBytes: deps.config.attachmentMaxBytes,
    log,
  });
  return {
    /** The send path, for replies automations send. */
    send,
    /** Settles once every accepted send is committed, published and queued. */
    settled: () => committer.idle(),
    routes: [
      ...messageRoutes({ send, queries, cursors: deps.cursors }),
      ...attachmentRoutes({ attachments, publicBaseUrl }),
      ...conversationRoutes(queries, deps.cursors),
      ...phoneNumberRoutes(deps.db, tenants, deps.config.undeliveredAfterMs),
      ...statsRoutes(deps.rollups),
    ],
  };
}

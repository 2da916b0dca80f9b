import { relayActor } from '../actors/relay.actor.ts';
import { tenantActor } from '../actors/tenant.actor.ts';
import type { Config } from '../config.ts';
import type { EventStream } from '../events/event-stream.ts';
import { Outbox } from '../events/outbox.ts';
import type { AccessTokens } from '../identity/jwt.ts';
import type { Logger } from '../log.ts';
import { RelayLink } from '../relays/relay-link.ts';
import type { RelayCollections } from '../relays/relay-store.ts';
import { RelaySends } from '../relays/relay-sends.ts';
import { RelaySessions } from '../relays/relay-sessions.ts';
import type { Transport } from '../runtime/types.ts';
import { AttachmentLinks } from './attachment-links.ts';
import { conversationRoutes } from './conversations.routes.ts';
import { IdempotencyKeys } from './idempotency.ts';
import { InboundRecorder } from './inbound-recorder.ts';
import { MessageQueries } from './message-queries.ts';
import type { MessagingCollections } from './message-store.ts';
import { messageRoutes } from './messages.routes.ts';
import { phoneNumberRoutes } from './phone-numbers.routes.ts';
import { SendCommitter } from './send-committer.ts';
import { SendService, type ContactLookup } from './send-service.ts';
import { TenantDispatcher } from './tenant-dispatcher.ts';

export interface MessagingDeps {
  config: Config;
  log: Logger;
  db: MessagingCollections & RelayCollections;
  runtime: Transport;
  events: EventStream;
  tokens: AccessTokens;
  contacts: ContactLookup;
  /** The organization's cancelled bulk jobs whose messages the dispatch must not hand out. */
  closedSources?: (orgId: string) => Promise<string[]>;
}

/** The send path, message history, conversations, phone numbers and relay sessions, wired: their routes and their actors. */
export function createMessaging(deps: MessagingDeps) {
  const log = deps.log.child({ component: 'messaging' });
  const link = new RelayLink(deps.runtime);
  const outbox = new Outbox(deps.events, log);
  const dispatcher = new TenantDispatcher({ config: deps.config, db: deps.db, outbox, closedSources: deps.closedSources });
  const inbound = new InboundRecorder({ db: deps.db, outbox, link });
  const committer = new SendCommitter({ db: deps.db, runtime: deps.runtime, outbox, log }, deps.config.sendBatchMax);
  const send = new SendService({ db: deps.db, committer, idempotency: new IdempotencyKeys(deps.db.idempotency), contacts: deps.contacts });
  const queries = new MessageQueries({ db: deps.db, contacts: deps.contacts });
  const links = new AttachmentLinks(deps.tokens.deriveSecret('attachment-links'));
  const publicBaseUrl = (host: string | undefined) => deps.config.publicBaseUrl ?? `http://${host ?? `localhost:${deps.config.port}`}`;
  const sends = new RelaySends({ db: deps.db, link, sendTimeoutMs: deps.config.messageSendTimeoutMs });
  const sessions = new RelaySessions({ db: deps.db, outbox, sends, heartbeatTimeoutMs: deps.config.relayHeartbeatTimeoutMs });
  return {
    link,
    /** The send path, for replies automations send. */
    send,
    actors: [tenantActor(dispatcher), relayActor(sessions, sends, inbound)],
    routes: [...messageRoutes({ send, queries, links, publicBaseUrl }), ...conversationRoutes(queries), ...phoneNumberRoutes(deps.db.phoneNumbers)],
  };
}

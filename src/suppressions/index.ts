import type { Config } from '../config.ts';
import type { EventStream } from '../events/event-stream.ts';
import type { Logger } from '../log.ts';
import type { Broadcast } from '../runtime/broadcast.ts';
import { OptOutInbound, type HelpReply } from './opt-out-inbound.ts';
import { SuppressionList } from './suppression-list.ts';
import { SuppressionService } from './suppression-service.ts';
import type { SuppressionCollections } from './suppression-store.ts';
import { suppressionRoutes } from './suppressions.routes.ts';

export { suppressionCollections } from './suppression-store.ts';

/**
 * Opt-outs, wired: the organization's suppression list as every process
 * checks it (the send path, bulk jobs, the job actor), what a received
 * keyword does, and the routes.
 */
export async function createSuppressions(deps: {
  config: Pick<Config, 'suppressionCacheMs'>;
  log: Logger;
  db: SuppressionCollections;
  events: EventStream;
  broadcast: Broadcast;
}) {
  const log = deps.log.child({ component: 'suppressions' });
  const list = new SuppressionList({
    db: deps.db,
    events: deps.events,
    cacheMs: deps.config.suppressionCacheMs,
    broadcast: deps.broadcast,
    log,
  });
  await list.listen();
  const service = new SuppressionService({ db: deps.db, list });
  return {
    list,
    /** What a received stop, start or help keyword does; `helpReply` sends the help text through the send path. */
    keywords: (helpReply: HelpReply) => new OptOutInbound({ list, helpReply, log }),
    routes: suppressionRoutes(service),
  };
}

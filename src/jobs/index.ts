import { jobProtocol } from '../actors/job/protocol.ts';
import { tenantProtocol } from '../actors/tenant/protocol.ts';
import { actorClient } from '../runtime/actor.ts';
import type { Config } from '../config.ts';
import type { ListCursors } from '../http/list-cursors.ts';
import type { EventStream } from '../events/event-stream.ts';
import type { Logger } from '../log.ts';
import { IdempotencyKeys } from '../messages/idempotency.ts';
import type { MessagingCollections } from '../messages/message-store.ts';
import type { MessageRollups } from '../messages/message-rollups.ts';
import type { RelayCollections } from '../relays/relay-store.ts';
import type { Transport } from '../runtime/types.ts';
import { exposeJobGauge } from './job-metrics.ts';
import { JobQueries } from './job-queries.ts';
import { JobService } from './job-service.ts';
import type { OptOutCheck } from '../messages/send-service.ts';
import type { JobCollections } from './job-store.ts';
import { jobRoutes } from './jobs.routes.ts';

export { cancelledJobIds, jobCollections } from './job-store.ts';

/** A job read does not wait longer than this for the dispatch's estimate: it falls back to the job's own rate. */
const estimateAskMs = 2_000;

export interface JobsDeps {
  config: Pick<Config, 'bulkMaxBodyBytes' | 'jobAssumedSendMs' | 'smsFallbackMinSeconds'>;
  log: Logger;
  db: MessagingCollections & RelayCollections & JobCollections;
  runtime: Transport;
  events: EventStream;
  rollups: MessageRollups;
  cursors: ListCursors;
  /** The organization's suppression list: a job's entries to its recipients are skipped. */
  optOuts: OptOutCheck;
}

/** Bulk jobs, wired: their routes. */
export function createJobs(deps: JobsDeps) {
  const log = deps.log.child({ component: 'jobs' });
  const jobs = actorClient(deps.runtime, jobProtocol);
  const tenants = actorClient(deps.runtime, tenantProtocol);
  const service = new JobService({
    db: deps.db,
    events: deps.events,
    rollups: deps.rollups,
    idempotency: new IdempotencyKeys(deps.db.idempotency),
    jobs,
    tenants,
    log,
    optOuts: deps.optOuts,
    smsFallbackMinSeconds: deps.config.smsFallbackMinSeconds,
  });
  const queries = new JobQueries({
    db: deps.db,
    assumedSendMs: deps.config.jobAssumedSendMs,
    paced: (tenantId, jobId) =>
      tenants.ask<number | null>(tenantId, { kind: 'estimate', source: jobId }, estimateAskMs),
    forecast: (tenantId, plan) => tenants.ask<number | null>(tenantId, { kind: 'forecast', ...plan }, estimateAskMs),
  });
  exposeJobGauge(deps.db);
  return {
    routes: jobRoutes({ service, queries, cursors: deps.cursors, maxBodyBytes: deps.config.bulkMaxBodyBytes }),
  };
}

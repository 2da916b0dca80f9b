import { jobActor, jobProtocol } from '../actors/job.actor.ts';
import { tenantProtocol } from '../actors/tenant.actor.ts';
import { actorClient } from '../runtime/actor.ts';
import type { Config } from '../config.ts';
import type { EventStream } from '../events/event-stream.ts';
import { Outbox } from '../events/outbox.ts';
import type { Logger } from '../log.ts';
import { IdempotencyKeys } from '../messages/idempotency.ts';
import type { MessagingCollections } from '../messages/message-store.ts';
import type { RelayCollections } from '../relays/relay-store.ts';
import type { Transport } from '../runtime/types.ts';
import { exposeJobGauge } from './job-metrics.ts';
import { JobQueries } from './job-queries.ts';
import { JobService } from './job-service.ts';
import type { JobCollections } from './job-store.ts';
import { JobTracker } from './job-tracker.ts';
import { jobRoutes } from './jobs.routes.ts';

export { jobCollections } from './job-store.ts';

export interface JobsDeps {
  config: Pick<Config, 'bulkMaxBodyBytes' | 'jobTrackMs' | 'jobAssumedSendMs'>;
  log: Logger;
  db: MessagingCollections & RelayCollections & JobCollections;
  runtime: Transport;
  events: EventStream;
}

/** Bulk jobs, wired: their routes, their actor, and the timers a restart must set again. */
export function createJobs(deps: JobsDeps) {
  const log = deps.log.child({ component: 'jobs' });
  const jobs = actorClient(deps.runtime, jobProtocol);
  const tenants = actorClient(deps.runtime, tenantProtocol);
  const tracker = new JobTracker({ db: deps.db, events: deps.events, jobs, log, trackMs: deps.config.jobTrackMs });
  const service = new JobService({ db: deps.db, events: deps.events, outbox: new Outbox(deps.events, log), idempotency: new IdempotencyKeys(deps.db.idempotency), jobs, tenants, log });
  const queries = new JobQueries({ db: deps.db, assumedSendMs: deps.config.jobAssumedSendMs });
  exposeJobGauge(deps.db);
  return {
    actor: jobActor(tracker),
    routes: jobRoutes({ service, queries, maxBodyBytes: deps.config.bulkMaxBodyBytes }),
    /** After the runtime starts consuming: a transport without durable timers lost them with the last process. */
    async recoverTimers(): Promise<void> {
      if (deps.runtime.name !== 'local') return;
      const count = await tracker.recoverTimers();
      if (count > 0) log.info({ jobs: count }, 'bulk job timers set again after a start');
    },
  };
}

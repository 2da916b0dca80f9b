import type { EventStream } from '../../events/event-stream.ts';
import type { JobCollections } from '../../jobs/job-store.ts';
import type { Logger } from '../../log.ts';
import type { MessagingCollections } from '../../messages/message-store.ts';
import { actorClient } from '../../runtime/actor.ts';
import type { ActorDefinition, Transport } from '../../runtime/types.ts';
import { jobActor } from './job.actor.ts';
import { JobTracker, type SuppressionCheck } from './job-tracker.ts';
import { jobProtocol } from './protocol.ts';

/** The job actor over the stores it follows jobs in, and what sets its timers again after a start. */
export function createJobActor(deps: {
  db: MessagingCollections & JobCollections;
  events: EventStream;
  /** Timers set outside a handler (after a start) go through it. */
  runtime: Transport;
  log: Logger;
  /** How often a running job's progress is looked at. */
  trackMs: number;
  /** The organization's suppression list: a scheduled job's recipients on it when it starts are skipped. */
  optOuts?: SuppressionCheck;
}): { definition: ActorDefinition; recoverTimers(): Promise<void> } {
  const { runtime, log } = deps;
  const tracker = new JobTracker({
    db: deps.db,
    events: deps.events,
    jobs: actorClient(runtime, jobProtocol),
    log,
    trackMs: deps.trackMs,
    optOuts: deps.optOuts,
  });
  return {
    definition: jobActor(tracker),
    /** After the runtime starts consuming: a transport without durable timers lost the bulk jobs' timers with the last process. */
    async recoverTimers(): Promise<void> {
      if (runtime.name !== 'local') return;
      const count = await tracker.recoverTimers();
      if (count > 0) log.info({ jobs: count }, 'bulk job timers set again after a start');
    },
  };
}

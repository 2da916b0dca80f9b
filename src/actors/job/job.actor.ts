import { defineActor } from '../../runtime/actor.ts';
import type { JobTracker } from './job-tracker.ts';
import { jobProtocol } from './protocol.ts';

/** One actor per bulk job: starts a scheduled job on time and follows its progress until every message is done. */
export function jobActor(tracker: JobTracker) {
  return defineActor(jobProtocol, {
    handlers: {
      start: (ctx, m) => tracker.start(ctx, m.tenantId, m.teamId),
      stop: (ctx, m) => tracker.stop(ctx, m.tenantId, m.teamId, m.cancelledAt),
      track: (ctx, m) => tracker.track(ctx, m.tenantId, m.teamId, m.tick),
    },
  });
}

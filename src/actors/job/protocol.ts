import { Type } from '@sinclair/typebox';
import { defineProtocol } from '../../runtime/actor.ts';

const id = Type.String({ minLength: 1, maxLength: 64 });
/** Every message names the job's organization and team: the job actor reads nothing unscoped. */
const owner = { tenantId: id, teamId: id };

/** Messages of the job actor (`job:<jobId>`). */
export const jobProtocol = defineProtocol(
  'job',
  {
    /** Its messages go on the send queue and are announced: at once for a job sent now, by a timer at a scheduled job's `scheduledAt`. */
    start: owner,
    /** The job was cancelled (at `cancelledAt`; absent from a stop sent before the field): its messages still queued are stopped in the store. */
    stop: { ...owner, cancelledAt: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })) },
    /** One look at a running job's progress; `tick` is the chain's position, so two chains never run side by side. */
    track: { ...owner, tick: Type.Integer({ minimum: 0 }) },
  },
  // Messages written before the tenant had one name in code still read.
  { formerNames: { orgId: 'tenantId' } },
);

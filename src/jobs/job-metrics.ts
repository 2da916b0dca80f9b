import { Gauge, register } from 'prom-client';
import { jobIndexScope, jobStatuses, type JobCollections } from './job-store.ts';

const name = 'relaybox_bulk_jobs';
/** How long a scrape waits for the counts (a few index counts take a few ms). */
const collectWaitMs = 250;

/** Bulk jobs by status across the platform, counted when Prometheus scrapes. */
export function exposeJobGauge(db: JobCollections): void {
  // The latest app of the process owns the gauge (tests start several in one process).
  register.removeSingleMetric(name);
  new Gauge({
    name,
    help: 'Bulk jobs by status',
    labelNames: ['status'],
    // A store that cannot answer, or not at once, keeps the last counts: one
    // unreadable gauge must not fail the whole scrape, nor hold it past a
    // short scrape timeout while the driver waits for an unreachable server.
    async collect() {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), collectWaitMs)));
      const counts = await Promise.race([
        Promise.all(jobStatuses.map((status) => db.jobIndex.count(jobIndexScope, { status }))).catch(() => undefined),
        late,
      ]);
      clearTimeout(timer);
      if (counts) jobStatuses.forEach((status, i) => this.set({ status }, counts[i]!));
    },
  });
}

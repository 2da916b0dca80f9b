import { Gauge, register } from 'prom-client';
import { jobIndexScope, jobStatuses, type JobCollections } from './job-store.ts';

const name = 'relaybox_bulk_jobs';

/** Bulk jobs by status across the platform, counted when Prometheus scrapes. */
export function exposeJobGauge(db: JobCollections): void {
  // The latest app of the process owns the gauge (tests start several in one process).
  register.removeSingleMetric(name);
  new Gauge({
    name,
    help: 'Bulk jobs by status',
    labelNames: ['status'],
    // A store that cannot answer keeps the last counts: one unreadable gauge must not fail the whole scrape.
    async collect() {
      const counts = await Promise.all(jobStatuses.map((status) => db.jobIndex.count(jobIndexScope, { status }))).catch(
        () => undefined,
      );
      if (counts) jobStatuses.forEach((status, i) => this.set({ status }, counts[i]!));
    },
  });
}

/**
 * Loaded into each service process of bench/capacity.ts (NODE_OPTIONS
 * --import, before the service): on SIGUSR2 it writes the process's store
 * round trips so far (relaybox_store_operations_total summed) to
 * CAPACITY_PROBE_DIR/<pid>.json. The worker role serves no /metrics, so this is
 * how the bench reads its count.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.CAPACITY_PROBE_DIR;
if (dir) {
  process.on('SIGUSR2', () => {
    void import('prom-client').then(async ({ register }) => {
      const metric = register.getSingleMetric('relaybox_store_operations_total');
      const values = metric ? (await metric.get()).values : [];
      const storeCommands = values.reduce((sum, v) => sum + v.value, 0);
      // Written aside and renamed, so the bench never reads half a file.
      const file = join(dir, `${process.pid}.json`);
      writeFileSync(`${file}.tmp`, JSON.stringify({ storeCommands, at: Date.now() }));
      renameSync(`${file}.tmp`, file);
    });
  });
}

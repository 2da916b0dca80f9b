import assert from 'node:assert/strict';
import { register, type Counter } from 'prom-client';

/** `relaybox_store_operations_total` as it is now (the store adapter's own tally), by `collection.operation`. */
export async function storeOperations(): Promise<Map<string, number>> {
  const metric = register.getSingleMetric('relaybox_store_operations_total') as Counter | undefined;
  assert.ok(metric, 'relaybox_store_operations_total is registered');
  const values = (await metric.get()).values;
  return new Map(values.map((v) => [`${v.labels.collection}.${v.labels.operation}`, v.value]));
}

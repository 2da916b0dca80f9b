import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Histogram, Registry } from 'prom-client';
import { BoundObservations } from '../../src/http/metrics.ts';

function histogram(name: string) {
  const registry = new Registry();
  const metric = new Histogram({
    name,
    help: 'test',
    labelNames: ['route', 'stage'],
    buckets: [0.001, 0.01, 0.1],
    registers: [registry],
  });
  return { registry, metric };
}

const seconds = [0.0005, 0.002, 0.002, 0.05, 0.5, 3, 0.001];

test('a bound label set reads on a scrape exactly as prom-client’s own observations do', async () => {
  const bound = histogram('bound_seconds');
  const plain = histogram('bound_seconds');
  const child = new BoundObservations(bound.metric, { route: '/a', stage: 'auth' });
  for (const s of seconds) {
    child.observe(s);
    plain.metric.observe({ route: '/a', stage: 'auth' }, s);
  }
  bound.metric.observe({ route: '/b', stage: 'auth' }, 0.002);
  plain.metric.observe({ route: '/b', stage: 'auth' }, 0.002);
  const text = await bound.registry.metrics();
  assert.equal(text, await plain.registry.metrics());
  assert.match(text, /bound_seconds_count\{route="\/a",stage="auth"\} 7/);
  assert.match(text, /bound_seconds_bucket\{le="0.01",route="\/a",stage="auth"\} 4/);
});

test('after a reset a bound label set counts from zero, and counts', async () => {
  const { registry, metric } = histogram('reset_seconds');
  const child = new BoundObservations(metric, { route: '/a', stage: 'auth' });
  child.observe(0.002);
  child.observe(0.002);
  registry.resetMetrics();
  child.observe(0.05);
  child.observe(0.05);
  const text = await registry.metrics();
  assert.match(text, /reset_seconds_count\{route="\/a",stage="auth"\} 2/);
  assert.match(text, /reset_seconds_sum\{route="\/a",stage="auth"\} 0.1/);
});

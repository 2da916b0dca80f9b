import { Type } from '@sinclair/typebox';
import { AppError } from '../errors.ts';
import { metricsRegistry } from './metrics.ts';
import { anyObject, type RouteDef } from './route.ts';

export interface ReadinessCheck {
  name: string;
  check(): Promise<void>;
}

/** The routes every process serves, before the product's: liveness, readiness (each backend's check) and Prometheus metrics. */
export function builtInRoutes(opts: { readinessChecks?: ReadinessCheck[]; readinessTimeoutMs: number }): RouteDef[] {
  const checks = opts.readinessChecks ?? [];
  return [
    {
      method: 'GET',
      path: '/healthz',
      summary: 'The process is up',
      auth: false,
      schema: { response: { 200: anyObject } },
      handler: () => ({ status: 200, body: { status: 'ok' } }),
    },
    {
      method: 'GET',
      path: '/readyz',
      summary: 'The process and its backends answer',
      auth: false,
      schema: { response: { 200: anyObject } },
      async handler() {
        const results = await Promise.all(
          checks.map(async (c) => {
            try {
              await withTimeout(c.check(), opts.readinessTimeoutMs);
              return [c.name, 'ok'] as const;
            } catch (err) {
              return [c.name, err instanceof Error ? err.message : 'failed'] as const;
            }
          }),
        );
        const failed = results.filter(([, r]) => r !== 'ok');
        if (failed.length > 0) {
          throw new AppError('service_unavailable', `not ready: ${failed.map(([n, r]) => `${n} (${r})`).join(', ')}`, {
            retryAfterSeconds: 1,
          });
        }
        return { status: 200, body: { status: 'ok', checks: Object.fromEntries(results) } };
      },
    },
    {
      method: 'GET',
      path: '/metrics',
      summary: 'Prometheus metrics',
      auth: false,
      schema: { response: { 200: { description: 'the metrics', content: { 'text/plain': Type.String() } } } },
      async handler() {
        return {
          status: 200,
          body: await metricsRegistry.metrics(),
          headers: { 'content-type': metricsRegistry.contentType },
        };
      },
    },
  ];
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    work.then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e) => (clearTimeout(timer), reject(e)),
    );
  });
}

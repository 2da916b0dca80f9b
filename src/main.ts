import { pathToFileURL } from 'node:url';
import { createApp, type App } from './app.ts';
import { loadConfig, type Config } from './config.ts';
import { buildDashboardAssets } from './dashboard/assets.ts';
import { dashboardRoutes } from './dashboard/dashboard.routes.ts';
import type { ReadinessCheck } from './http/built-in-routes.ts';
import { createHttpServer, type HttpServer } from './http/server.ts';
import { createLogger, type Logger } from './log.ts';
import type { RelayGateway } from './ws/relay-gateway.ts';

/** `web` serves HTTP and relay sockets, `worker` runs actors, `all` does both in one process. */
export type Role = 'web' | 'worker' | 'all';

export interface Service {
  port: number | undefined;
  stop(): Promise<void>;
}

function announce(log: Logger): Logger {
  return log.isLevelEnabled('info') ? log : createLogger('info');
}

export function parseRole(raw: string | undefined): Role {
  const role = raw ?? 'all';
  if (role === 'web' || role === 'worker' || role === 'all') return role;
  throw new Error(`unknown role "${role}": use web, worker or all`);
}

function backendChecks(app: App): ReadinessCheck[] {
  return [
    { name: app.runtime.name === 'redis' ? 'redis' : 'runtime', check: () => app.runtime.ping() },
    { name: 'store', check: () => app.store.ping() },
  ];
}

export async function startService(role: Role, config: Config, log: Logger): Promise<Service> {
  if (!config.redisUrl && !config.redisClusterNodes && role !== 'all') {
    throw new Error(
      `role "${role}" needs REDIS_URL or REDIS_CLUSTER_NODES: without them everything runs in one process (role "all")`,
    );
  }
  // Loaded only when an OTLP endpoint is set: without one no span is made and the SDK is never imported.
  const tracing = config.traceExport
    ? (await import('./tracing/trace-export.ts')).startTraceExport({ role, nodeId: config.nodeId })
    : undefined;
  const app = await createApp(config, log, { consume: role !== 'web' });
  let http: HttpServer | undefined;
  let gateway: RelayGateway | undefined;
  let port: number | undefined;
  if (role !== 'worker') {
    const pages = config.dashboard ? dashboardRoutes(await buildDashboardAssets()) : [];
    http = createHttpServer({
      config,
      log,
      routes: [...app.routes, ...pages],
      ...app.hooks,
      readinessChecks: backendChecks(app),
    });
    gateway = app.attachGateway(http);
    port = await http.listen(config.host, config.port);
  } else if (config.metricsPort !== undefined) {
    // A worker holds the shards, send queues and webhook deliveries: without this Prometheus sees none of them.
    http = createHttpServer({ config, log, routes: [], readinessChecks: backendChecks(app) });
    port = await http.listen(config.host, config.metricsPort);
  }
  const store = app.store.kind;
  const transport = app.runtime.name;
  // Where it listens is printed whatever LOG_LEVEL says: operators and scripts read this line.
  announce(log).info(
    {
      role,
      port,
      transport,
      store,
      dataDir: store === 'embedded' ? config.dataDir : undefined,
      traceExport: config.traceExport,
    },
    port === undefined
      ? `relaybox ${role} running (transport ${transport}, store ${store})`
      : role === 'worker'
        ? `relaybox ${role} running (transport ${transport}, store ${store}), metrics on http://${config.host}:${port}/metrics`
        : `relaybox ${role} listening on http://${config.host}:${port} (transport ${transport}, store ${store})`,
  );

  return {
    port,
    async stop() {
      // Stop taking requests first; the app then lets actors finish before closing the store.
      await http?.close();
      // Relays are told goodbye while the runtime can still hand their messages back.
      await gateway?.close();
      await app.close();
      // Last: the spans of the work just finished go out too.
      await tracing?.stop();
    },
  };
}

async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  const role = parseRole(process.argv[2] ?? process.env.ROLE);
  const service = await startService(role, config, log);

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      log.error('shutdown took longer than the grace period; exiting');
      process.exit(1);
    }, config.runtime.shutdownGraceMs);
    force.unref();
    service.stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // A promise nobody awaited failed: a bug to fix, logged with its stack, not a reason to drop every connection.
  process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}

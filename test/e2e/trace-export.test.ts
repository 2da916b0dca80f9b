import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startServiceProcess } from '../support/service-process.ts';
import { sleep } from '../support/until.ts';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
}

/** An OTLP/HTTP collector on 127.0.0.1 that keeps every span posted to /v1/traces, with the resource attributes it came with. */
async function collector() {
  const spans: Array<OtlpSpan & { service: unknown }> = [];
  const paths: string[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    paths.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
      resourceSpans: Array<{
        resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> };
        scopeSpans: Array<{ spans: OtlpSpan[] }>;
      }>;
    };
    for (const rs of body.resourceSpans) {
      const service = rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue;
      for (const ss of rs.scopeSpans) for (const s of ss.spans) spans.push({ ...s, service });
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    spans,
    paths,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

test("with OTEL_EXPORTER_OTLP_ENDPOINT set, the service exports its spans over OTLP/HTTP, flushed at a stop; a request span is the caller's child", async (t) => {
  const otlp = await collector();
  t.after(() => otlp.stop());
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-e2e-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  // Batches wait a minute: what reaches the collector before the stop would be a batch sent early.
  const svc = await startServiceProcess('all', {
    DATA_DIR: dataDir,
    REDIS_URL: '',
    MONGODB_URL: '',
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_BSP_SCHEDULE_DELAY: '60000',
    OTEL_SERVICE_NAME: 'relaybox-e2e',
  });
  t.after(() => svc.child.kill('SIGKILL'));
  const started = JSON.parse(svc.lines.find((l) => l.includes('listening on'))!);
  assert.equal(started.traceExport, true);

  const res = await fetch(`http://127.0.0.1:${svc.port}/healthz`, {
    headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
  });
  assert.equal(res.status, 200);
  assert.equal((await fetch(`http://127.0.0.1:${svc.port}/readyz`)).status, 200);
  await sleep(300);
  assert.equal(otlp.spans.length, 0, 'batched: nothing before the stop');
  assert.equal((await svc.terminate()).code, 0);
  const span = otlp.spans.find((s) => s.name === 'GET /healthz');
  assert.ok(span, `the request span at the collector; got ${JSON.stringify(otlp.spans.map((s) => s.name))}`);
  assert.equal(span.traceId, '0af7651916cd43dd8448eb211c80319c');
  assert.equal(span.parentSpanId, 'b7ad6b7169203331');
  assert.equal(span.service, 'relaybox-e2e', 'OTEL_SERVICE_NAME names the service');
  assert.ok(
    otlp.spans.some((s) => s.name === 'GET /readyz' && s.traceId !== span.traceId),
    'a request without traceparent is a trace of its own',
  );
  assert.match(otlp.paths[0]!, /^POST \/v1\/traces application\/json/);
});

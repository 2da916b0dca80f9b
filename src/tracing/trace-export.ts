import { trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { disableTracing, enableTracing } from './spans.ts';

export interface Tracing {
  /** Exports what is still buffered, then turns tracing off. */
  stop(): Promise<void>;
}

/**
 * Turns tracing on with a provider whose spans go to `processor`: its
 * resource names the service `relaybox` (OTEL_SERVICE_NAME and
 * OTEL_RESOURCE_ATTRIBUTES override), this process's role and node id;
 * sampling follows OTEL_TRACES_SAMPLER (parent-based, always on, by default).
 */
export function startTracing(processor: SpanProcessor, process: { role: string; nodeId: string }): Tracing {
  const resource = defaultResource()
    .merge(
      resourceFromAttributes({
        'service.name': 'relaybox',
        'service.instance.id': process.nodeId,
        'relaybox.role': process.role,
      }),
    )
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new BasicTracerProvider({ resource, spanProcessors: [processor] });
  trace.setGlobalTracerProvider(provider);
  enableTracing();
  return {
    async stop() {
      disableTracing();
      await provider.shutdown();
      trace.disable();
    },
  };
}

/**
 * Spans exported over OTLP/HTTP (JSON), in batches, to the endpoint of
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
 * (`/v1/traces` appended), with OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT and
 * _COMPRESSION and the OTEL_BSP_* batch settings as the SDK reads them.
 */
export function startTraceExport(process: { role: string; nodeId: string }): Tracing {
  return startTracing(new BatchSpanProcessor(new OTLPTraceExporter()), process);
}

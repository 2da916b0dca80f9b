import {
  createTraceState,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Link,
  type Span,
  type SpanContext,
} from '@opentelemetry/api';
import { childTraceContext, format, traceparentParts, type TraceCarrier, type TraceContext } from './trace-context.ts';

export { SpanKind, SpanStatusCode, type Span };

/**
 * Spans through `@opentelemetry/api`. Tracing is on only once a tracer
 * provider that records was registered (`enableTracing`, by the OTLP export
 * when `OTEL_EXPORTER_OTLP_ENDPOINT` is set). While it is off no span is
 * made at all (not even the API's non-recording ones): callers ask
 * `tracingOn()` before building a span's name or attributes, so the send
 * path pays one boolean test per step.
 */
let on = false;
let tracer = trace.getTracer('relaybox');

export function tracingOn(): boolean {
  return on;
}

/** Called once a recording tracer provider is the global one (taken now: a provider registered after another was removed is a new one). */
export function enableTracing(): void {
  tracer = trace.getTracer('relaybox');
  on = true;
}

/** For tests that register a provider of their own and take it away again. */
export function disableTracing(): void {
  on = false;
}

/**
 * A span whose parent is the trace in `parent` (a new trace when it holds
 * none); `links` are further traces it was made for (a batch). Only while
 * tracing is on: ask `tracingOn()` first.
 */
export function startSpan(
  name: string,
  kind: SpanKind,
  parent: TraceCarrier | undefined,
  attributes?: Attributes,
  links?: TraceCarrier[],
): Span {
  const parentContext = spanContextOf(parent);
  const context = parentContext ? trace.setSpanContext(ROOT_CONTEXT, parentContext) : ROOT_CONTEXT;
  const linked = links?.flatMap((l): Link[] => {
    const c = spanContextOf(l);
    return c ? [{ context: c }] : [];
  });
  return tracer.startSpan(
    name,
    { kind, ...(attributes ? { attributes } : {}), ...(linked?.length ? { links: linked } : {}) },
    context,
  );
}

/** What goes downstream of `span`: its own trace context. */
export function traceOfSpan(span: Span): TraceContext {
  const c = span.spanContext();
  const context: TraceContext = {
    traceparent: format(c.traceId, c.spanId, (c.traceFlags & 0xff).toString(16).padStart(2, '0')),
  };
  const state = c.traceState?.serialize();
  if (state) context.tracestate = state;
  return context;
}

/**
 * The trace context a hop sends on (a relay frame, a webhook request): its
 * span's when tracing is on, else the parent's trace with a new span id.
 * Undefined when there is no trace to continue and no span.
 */
export function outgoingTrace(span: Span | undefined, parent: TraceCarrier | undefined): TraceContext | undefined {
  if (span) return traceOfSpan(span);
  return parent ? childTraceContext(parent) : undefined;
}

/** Runs `work`, then ends `span` (marked failed when `work` throws, which it rethrows). */
export async function withSpan<T>(span: Span | undefined, work: () => Promise<T>): Promise<T> {
  if (!span) return work();
  try {
    const value = await work();
    span.end();
    return value;
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
}

/** Ends a span, marked failed when `error` is given. */
export function endSpan(span: Span | undefined, error?: unknown): void {
  if (!span) return;
  if (error !== undefined) {
    if (error instanceof Error) span.recordException(error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  }
  span.end();
}

function spanContextOf(carrier: TraceCarrier | undefined): SpanContext | undefined {
  const parts = traceparentParts(carrier?.traceparent);
  if (!parts) return undefined;
  return {
    traceId: parts.traceId,
    spanId: parts.spanId,
    traceFlags: Number.parseInt(parts.flags, 16),
    isRemote: true,
    ...(carrier?.tracestate ? { traceState: createTraceState(carrier.tracestate) } : {}),
  };
}

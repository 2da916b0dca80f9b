import { createTraceState } from '@opentelemetry/api';
import { randomHex } from '../ids.ts';

/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) as it travels
 * through Relaybox: the `traceparent` value, with `tracestate` when the
 * caller sent one. Documents, events and actor envelopes carry it in two
 * fields of these names, so any of them is a carrier; it is kept as the
 * header strings (not as OpenTelemetry context objects) because it is stored
 * and read back in other processes, and because with tracing off nothing
 * more than these strings is ever made.
 */
export type TraceCarrier = {
  traceparent?: string;
  tracestate?: string;
};

/** A carrier that holds a trace. */
export type TraceContext = TraceCarrier & { traceparent: string };

/** Largest tracestate kept (the specification's limit for what must be propagated); a longer one is dropped. */
export const maxTracestateChars = 512;
/** A traceparent of version 00 is exactly this long. */
export const traceparentChars = 55;

const traceparentPattern = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-|$)/;
const zeroTraceId = '0'.repeat(32);
const zeroSpanId = '0'.repeat(16);

/** The parts of a valid traceparent (of any version but ff, read as version 00), or undefined. */
export function traceparentParts(
  value: string | undefined,
): { traceId: string; spanId: string; flags: string } | undefined {
  if (value === undefined) return undefined;
  const m = traceparentPattern.exec(value);
  if (!m) return undefined;
  const [, version, traceId, spanId, flags] = m as unknown as [string, string, string, string, string];
  if (version === 'ff' || (version === '00' && value.length !== traceparentChars)) return undefined;
  if (traceId === zeroTraceId || spanId === zeroSpanId) return undefined;
  return { traceId, spanId, flags };
}

/**
 * The trace context of an incoming request's headers, or undefined when its
 * traceparent is absent or malformed (then its tracestate is ignored too, as
 * the specification says). A tracestate keeps only its well-formed members.
 */
export function readTraceContext(
  traceparent: string | undefined,
  tracestate: string | undefined,
): TraceContext | undefined {
  const parts = traceparentParts(traceparent);
  if (!parts) return undefined;
  const context: TraceContext = { traceparent: format(parts.traceId, parts.spanId, parts.flags) };
  const state = tracestate && tracestate.length <= maxTracestateChars ? createTraceState(tracestate).serialize() : '';
  if (state) context.tracestate = state;
  return context;
}

/** A new trace, for a request that came without one: not sampled, since nothing here records it while tracing is off. */
export function newTraceContext(): TraceContext {
  return { traceparent: format(nonZero(randomHex(16), zeroTraceId), nonZero(randomHex(8), zeroSpanId), '00') };
}

/** The trace of `carrier` with a new span id: what is sent on when tracing is off, so the receiver still sees a hop of its own. */
export function childTraceContext(carrier: TraceCarrier): TraceContext | undefined {
  const parts = traceparentParts(carrier.traceparent);
  if (!parts) return undefined;
  const child: TraceContext = { traceparent: format(parts.traceId, nonZero(randomHex(8), zeroSpanId), parts.flags) };
  if (carrier.tracestate) child.tracestate = carrier.tracestate;
  return child;
}

/** Sets the trace fields of `to` from `from` when it holds a trace (a document, an envelope): neither field is ever set to undefined. */
export function copyTrace<T extends TraceCarrier>(to: T, from: TraceCarrier | undefined): T {
  if (from?.traceparent) {
    to.traceparent = from.traceparent;
    if (from.tracestate) to.tracestate = from.tracestate;
  }
  return to;
}

/** Just the two fields, whatever else `carrier` holds: for storing or sending it on. */
export function traceFields(carrier: TraceCarrier | undefined): TraceCarrier {
  return copyTrace({}, carrier);
}

export function format(traceId: string, spanId: string, flags: string): string {
  return `00-${traceId}-${spanId}-${flags}`;
}

/** All zeros is not a valid id; with 64 random bits it is never drawn, but it must never be sent. */
function nonZero(id: string, zero: string): string {
  return id === zero ? `${id.slice(0, -1)}1` : id;
}

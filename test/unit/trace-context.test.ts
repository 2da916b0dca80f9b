import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readEnvelope } from '../../src/runtime/envelope.ts';
import { childTraceContext, newTraceContext, readTraceContext, traceFields } from '../../src/tracing/trace-context.ts';

const valid = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const shape = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

test('a valid traceparent is read as it came, with the well-formed members of its tracestate', () => {
  assert.deepEqual(readTraceContext(valid, undefined), { traceparent: valid });
  assert.deepEqual(readTraceContext(valid, 'rbx=1,congo=t61rcWkgMzE'), {
    traceparent: valid,
    tracestate: 'rbx=1,congo=t61rcWkgMzE',
  });
  assert.deepEqual(readTraceContext(valid, 'Bad Key=1, ok=2'), { traceparent: valid, tracestate: 'ok=2' });
  assert.deepEqual(
    readTraceContext(valid, 'only garbage'),
    { traceparent: valid },
    'nothing kept: no tracestate at all',
  );
  assert.deepEqual(
    readTraceContext(valid, `a=${'x'.repeat(600)}`),
    { traceparent: valid },
    'longer than 512 characters: dropped',
  );
  // A later version is read for the fields version 00 knows, and passed on as version 00.
  assert.deepEqual(readTraceContext(`cc${valid.slice(2)}-later`, undefined), { traceparent: valid });
});

test('a malformed traceparent is no trace context, whatever the tracestate', () => {
  for (const bad of [
    undefined,
    '',
    'garbage',
    valid.toUpperCase(),
    `${valid}-more`,
    `ff${valid.slice(2)}`,
    `cc${valid.slice(2)}x`,
    '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1',
    '0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    ` ${valid}`,
    valid.replace(/-/g, '_'),
  ])
    assert.equal(readTraceContext(bad, 'rbx=1'), undefined, String(bad));
});

test('a new trace and a child span are valid and random; the child keeps the trace, the flags and the tracestate', () => {
  const a = newTraceContext();
  const b = newTraceContext();
  assert.match(a.traceparent, shape);
  assert.ok(a.traceparent.endsWith('-00'), 'not sampled');
  assert.notEqual(a.traceparent.slice(3, 35), b.traceparent.slice(3, 35));
  const child = childTraceContext({ traceparent: valid, tracestate: 'rbx=1' })!;
  assert.match(child.traceparent, shape);
  assert.equal(child.traceparent.slice(0, 36), valid.slice(0, 36), 'the same trace');
  assert.notEqual(child.traceparent.slice(36, 52), valid.slice(36, 52), 'a span id of its own');
  assert.ok(child.traceparent.endsWith('-01'));
  assert.equal(child.tracestate, 'rbx=1');
  assert.equal(childTraceContext({}), undefined);
  assert.equal(childTraceContext({ traceparent: 'garbage' }), undefined, 'nothing malformed is ever sent on');
});

test('traceFields copies just the two fields, and never one set to undefined', () => {
  assert.deepEqual(traceFields({ traceparent: valid, tracestate: 'a=1', id: 'msg_1' } as never), {
    traceparent: valid,
    tracestate: 'a=1',
  });
  assert.deepEqual(Object.keys(traceFields({ traceparent: valid })), ['traceparent']);
  assert.deepEqual(traceFields(undefined), {});
});

test('an envelope read from a stream carries its trace context, bounded like every other field', () => {
  const env = { id: 'e1', type: 'tenant', key: 'org_1', msg: { kind: 'enqueue' }, sentAt: 1 };
  const read = readEnvelope(JSON.stringify({ ...env, traceparent: valid, tracestate: 'a=1' }));
  assert.ok(read.ok);
  assert.equal(read.envelope.traceparent, valid);
  assert.equal(readEnvelope(JSON.stringify(env)).ok, true, 'without one too');
  const long = readEnvelope(JSON.stringify({ ...env, tracestate: 'a'.repeat(513) }));
  assert.equal(long.ok, false);
});

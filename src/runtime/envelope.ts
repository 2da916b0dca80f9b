import { Type, type Static } from '@sinclair/typebox';
import { Ajv, type ValidateFunction } from 'ajv';
import type { ActorProtocol } from './actor.ts';
import type { WorkClass } from './work-lane.ts';
import { copyTrace, maxTracestateChars, type TraceCarrier } from '../tracing/trace-context.ts';
import { digestId } from '../ids.ts';

/** What travels on a transport: one message to one actor `(type, key)`. */
export const envelopeSchema = Type.Object({
  /** Unique per message; a redelivery keeps it, and what a handler emits derives its ids from it. */
  id: Type.String({ minLength: 1, maxLength: 128 }),
  type: Type.String({ minLength: 1, maxLength: 64 }),
  key: Type.String({ minLength: 1, maxLength: 256 }),
  msg: Type.Object({ kind: Type.String({ minLength: 1, maxLength: 64 }) }),
  /** Epoch ms when the message was sent (or its timer was set). */
  sentAt: Type.Number(),
  /** Set by `ask`: where the handler's answer goes. */
  replyTo: Type.Optional(Type.Object({ node: Type.String({ maxLength: 256 }), askId: Type.String({ maxLength: 64 }) })),
  /** Work other than interactive (work-lane.ts): 2 events, 3 bulk, 4 maintenance. Absent: interactive. */
  workClass: Type.Optional(Type.Union([Type.Literal(2), Type.Literal(3), Type.Literal(4)])),
  /** The W3C trace context of what caused this message (src/tracing): its handler's span continues it. */
  traceparent: Type.Optional(Type.String({ maxLength: 128 })),
  tracestate: Type.Optional(Type.String({ maxLength: maxTracestateChars })),
});

export type Envelope = Omit<Static<typeof envelopeSchema>, 'msg'> & { msg: { kind: string; [field: string]: unknown } };

const ajv = new Ajv({ allErrors: false, strict: false, coerceTypes: false, useDefaults: false });
const envelopeValid = ajv.compile(envelopeSchema);

export type EnvelopeCheck = { ok: true; envelope: Envelope } | { ok: false; reason: string };

/** Parses and checks an envelope read from a stream; the reason says what is wrong with it. */
export function readEnvelope(raw: string | undefined): EnvelopeCheck {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw ?? '');
  } catch {
    return { ok: false, reason: 'unreadable envelope: not JSON' };
  }
  if (!envelopeValid(parsed)) return { ok: false, reason: `malformed envelope: ${describe(envelopeValid)}` };
  return { ok: true, envelope: parsed as Envelope };
}

/** One compiled validator per message kind of every actor type, built once at start. */
export class MessageValidators {
  private readonly byType = new Map<string, Map<string, ValidateFunction>>();
  private readonly formerNames = new Map<string, Array<[string, string]>>();

  add(protocol: ActorProtocol): void {
    const renames = Object.entries(protocol.formerNames);
    if (renames.length > 0) this.formerNames.set(protocol.type, renames);
    const kinds = new Map<string, ValidateFunction>();
    for (const [kind, schema] of Object.entries(protocol.schemas)) kinds.set(kind, ajv.compile(schema));
    this.byType.set(protocol.type, kinds);
  }

  /** Undefined when the message is valid for its actor type; otherwise why not. */
  problem(env: Envelope): string | undefined {
    const kinds = this.byType.get(env.type);
    if (!kinds) return `no actor type "${env.type}"`;
    const kind = env.msg.kind;
    const validate = kinds.get(kind);
    if (!validate) return `actor type "${env.type}" has no message "${kind}"`;
    for (const [former, current] of this.formerNames.get(env.type) ?? []) renameField(env.msg, former, current);
    if (!validate(env.msg)) return `malformed "${env.type}.${kind}" message: ${describe(validate)}`;
    return undefined;
  }
}

/** A message written under a field's former name is read under its current one (in place: the handler gets it). */
function renameField(msg: Record<string, unknown>, former: string, current: string): void {
  if (!(former in msg) || current in msg) return;
  msg[current] = msg[former];
  delete msg[former];
}

function describe(validate: ValidateFunction): string {
  const e = validate.errors?.[0];
  if (!e) return 'invalid';
  const extra =
    e.keyword === 'additionalProperties' ? ` (${(e.params as { additionalProperty: string }).additionalProperty})` : '';
  return `${e.instancePath || '/'} ${e.message ?? 'is invalid'}${extra}`.slice(0, 300);
}

/** A deterministic id from a parent message id and a label: what makes redelivered emissions recognisable. */
export function derivedId(parentId: string, label: string): string {
  return digestId(`${parentId}\u0000${label}`, 24);
}

/** A new envelope; it carries the trace in `trace` when there is one. */
export function newEnvelope(
  id: string,
  type: string,
  key: string,
  msg: Envelope['msg'],
  trace: TraceCarrier | undefined,
  cls?: WorkClass,
): Envelope {
  const env = copyTrace<Envelope>({ id, type, key, msg, sentAt: Date.now() }, trace);
  if (cls !== undefined && cls > 1) env.workClass = cls as 2 | 3 | 4;
  return env;
}

/** Whose work an envelope is: the organization its message names, else its actor key. */
export function tenantOfEnvelope(env: Envelope): string {
  const tenantId = env.msg.tenantId;
  return typeof tenantId === 'string' ? tenantId : env.key;
}

import { Type, type Static, type TLiteral, type TUnion } from '@sinclair/typebox';
import type { EventName } from '../events/event-stream.ts';
import { keysetPaginationQuery, pageOrAfter } from '../http/pagination.ts';
import { named } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';

/** Per organization; a create beyond it is 400. */
export const maxAutomationsPerOrg = 100;
export const maxConditions = 20;
export const maxActions = 10;
/** Longest `matches_regex` pattern: patterns are compiled per evaluation batch, so their size is bounded like every other string. */
export const maxPatternLength = 500;
/**
 * Compiled RE2 instructions of all the `matches_regex` patterns of one
 * automation together. Matching time is linear in text x instructions, and
 * bounded repeats are written out (`.{0,1000}` is 2,003 instructions), so
 * without this bound 451 characters of pattern held the event loop 3-6 s on
 * a 1,000-character body. Real patterns (a list of stop words, an order
 * number, a URL up to 200 characters) take 10 to 410.
 */
export const maxPatternInstructions = 1_000;

/** The spec's two triggers, and `message_delivered`, `message_read` and `message_reaction` added beside them. */
export const triggers = [
  'message_received',
  'message_sent',
  'message_delivered',
  'message_read',
  'message_reaction',
] as const;
export type Trigger = (typeof triggers)[number];
/** The event each trigger runs on. */
export const triggerEvents = {
  message_received: 'message.received',
  message_sent: 'message.sent',
  message_delivered: 'message.delivered',
  message_read: 'message.read',
  message_reaction: 'message.reaction',
} as const satisfies Record<Trigger, EventName>;
export const conditionFields = ['body', 'from', 'to'] as const;
export const operators = ['contains', 'equals', 'starts_with', 'ends_with', 'matches_regex', 'is_in'] as const;
export type Operator = (typeof operators)[number];
export const actionTypes = ['send_reply', 'create_contact', 'call_webhook', 'log_to_crm'] as const;
export type ActionType = (typeof actionTypes)[number];
export const actionStatuses = ['pending', 'retrying', 'succeeded', 'failed', 'skipped'] as const;
export type ActionStatus = (typeof actionStatuses)[number];

const literals = <T extends readonly string[]>(values: T) =>
  Type.Union(values.map((v) => Type.Literal(v))) as unknown as TUnion<TLiteral<T[number]>[]>;
const url = Type.String({ minLength: 1, maxLength: 2048, description: 'http(s) URL of a public address' });
const secret = Type.String({
  minLength: 1,
  maxLength: 256,
  description: 'Signs the request as webhook secrets do; stored encrypted, never returned',
});

export const conditionSchema = strictObject({
  field: literals(conditionFields),
  operator: literals(operators),
  value: Type.String({
    maxLength: 1_000,
    description:
      'For is_in a comma-separated list; for matches_regex an RE2 pattern of at most 500 characters; the patterns of one automation compile to at most 1,000 instructions together',
  }),
});
export type Condition = Static<typeof conditionSchema>;

export const actionSchema = Type.Union([
  strictObject({
    type: Type.Literal('send_reply'),
    config: strictObject({ body: Type.String({ minLength: 1, maxLength: 4_096 }) }),
  }),
  strictObject({
    type: Type.Literal('create_contact'),
    config: strictObject({
      firstName: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
      tags: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 20 })),
    }),
  }),
  strictObject({ type: Type.Literal('call_webhook'), config: strictObject({ url, secret: Type.Optional(secret) }) }),
  strictObject({
    type: Type.Literal('log_to_crm'),
    config: strictObject({
      url,
      apiKey: Type.Optional(Type.String({ minLength: 1, maxLength: 1_024 })),
      secret: Type.Optional(secret),
    }),
  }),
]);
export type Action = Static<typeof actionSchema>;

/** POST and PUT take the same body: PUT replaces the automation whole, so what is required here is required there. */
export const automationBody = named(
  'AutomationInput',
  strictObject({
    name: Type.String({ minLength: 1, maxLength: 200 }),
    trigger: literals(triggers),
    logic: Type.Optional(literals(['and', 'or'] as const)),
    conditions: Type.Optional(Type.Array(conditionSchema, { maxItems: maxConditions })),
    actions: Type.Array(actionSchema, { minItems: 1, maxItems: maxActions }),
    enabled: Type.Optional(Type.Boolean()),
  }),
);
export type AutomationInput = Static<typeof automationBody>;

export const automationIdParams = strictObject({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export const executionListQuery = strictObject({ ...keysetPaginationQuery }, pageOrAfter);

export const testBody = strictObject({
  message: strictObject({
    body: Type.Optional(Type.String({ maxLength: 100_000 })),
    from: Type.Optional(Type.String({ maxLength: 320 })),
    to: Type.Optional(Type.String({ maxLength: 320 })),
  }),
});

/** Secrets and API keys are never answered: an action shows `hasSecret` / `hasApiKey` instead. */
const actionView = Type.Object({ type: literals(actionTypes), config: Type.Record(Type.String(), Type.Unknown()) });

export const executionSchema = named(
  'AutomationExecution',
  Type.Object({
    id: Type.String(),
    automationId: Type.String(),
    messageId: Type.String(),
    trigger: literals(triggers),
    matched: Type.Boolean(),
    actions: Type.Array(
      Type.Object({
        type: literals(actionTypes),
        status: literals(actionStatuses),
        error: Type.Union([Type.String(), Type.Null()]),
      }),
    ),
    createdAt: Type.String(),
  }),
);
export type ExecutionView = Static<typeof executionSchema>;

export const automationSchema = named(
  'Automation',
  Type.Object({
    id: Type.String(),
    name: Type.String(),
    trigger: literals(triggers),
    logic: literals(['and', 'or'] as const),
    conditions: Type.Array(Type.Object({ field: Type.String(), operator: Type.String(), value: Type.String() })),
    actions: Type.Array(actionView),
    enabled: Type.Boolean(),
    createdAt: Type.String(),
    updatedAt: Type.String(),
    lastExecutedAt: Type.Union([Type.String(), Type.Null()]),
    executionCount: Type.Integer(),
  }),
);
export type AutomationView = Static<typeof automationSchema>;

export const automationDetailSchema = Type.Intersect([
  automationSchema,
  Type.Object({ executions: Type.Array(executionSchema) }),
]);

export const testResultSchema = Type.Object({
  matched: Type.Boolean(),
  conditionsEvaluated: Type.Array(
    Type.Object({
      field: Type.String(),
      operator: Type.String(),
      value: Type.String(),
      matched: Type.Boolean(),
      error: Type.Optional(
        Type.String({
          description:
            'why a pattern was not run to the end (it then does not match): over the size limit, or out of time',
        }),
      ),
    }),
  ),
  actionsWouldExecute: Type.Array(literals(actionTypes)),
});

import { Type, type Static, type TLiteral, type TUnion } from '@sinclair/typebox';
import { keysetPaginationQuery, pageOrAfter, paginationQuery } from '../http/pagination.ts';
import { named } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import { sendBody } from '../messages/message-schemas.ts';
import { jobStatuses, resultStatuses } from './job-store.ts';

/** Spec limits of a bulk job (decisions.md, "Common"). */
export const maxJobMessages = 10_000;
export const maxScheduleAheadDays = 90;

const literals = <T extends string>(values: readonly T[]) =>
  Type.Union(values.map((v) => Type.Literal(v))) as TUnion<TLiteral<T>[]>;

export const bulkBody = strictObject({
  messages: Type.Array(sendBody, {
    minItems: 1,
    maxItems: maxJobMessages,
    description: 'each entry as a single send; a group:<id> recipient is not allowed here',
  }),
  scheduledAt: Type.Optional(
    Type.String({
      format: 'date-time',
      maxLength: 40,
      description: `ISO 8601, in the future, at most ${maxScheduleAheadDays} days ahead`,
    }),
  ),
});
export type BulkBody = Static<typeof bulkBody>;

export const jobIdParams = strictObject({ jobId: Type.String({ minLength: 1, maxLength: 64 }) });

export const jobListQuery = strictObject({ ...paginationQuery, status: Type.Optional(literals(jobStatuses)) });
export const resultsQuery = strictObject(
  { ...keysetPaginationQuery, status: Type.Optional(literals(resultStatuses)) },
  pageOrAfter,
);

const nullableString = Type.Union([Type.String(), Type.Null()]);
const counts = Type.Object(Object.fromEntries(resultStatuses.map((s) => [s, Type.Integer()])));

export const acceptedJob = Type.Object({
  jobId: Type.String(),
  status: literals(jobStatuses),
  totalRecipients: Type.Integer(),
  createdAt: Type.String(),
  scheduledAt: nullableString,
});

export type AcceptedJob = Static<typeof acceptedJob>;

export const jobSummary = named(
  'BulkJob',
  Type.Object({
    jobId: Type.String(),
    status: literals(jobStatuses),
    teamId: Type.String(),
    totalRecipients: Type.Integer(),
    counts,
    progress: Type.Number({
      minimum: 0,
      maximum: 1,
      description: 'sent, delivered, failed, cancelled and skipped over totalRecipients',
    }),
    createdAt: Type.String(),
    scheduledAt: nullableString,
    startedAt: nullableString,
    completedAt: nullableString,
    cancelledAt: nullableString,
  }),
);

export const jobDetail = Type.Composite([
  jobSummary,
  Type.Object({
    estimatedCompletionAt: Type.Union([Type.String(), Type.Null()], {
      description:
        "while messages are queued, from the pace of their sender lines; otherwise from the job's recent throughput or the online relays' capacity; null when no relay is online",
    }),
  }),
]);

export const jobResult = Type.Object({
  messageId: Type.String(),
  to: Type.String(),
  status: literals(resultStatuses),
  error: Type.Union([Type.String(), Type.Null()], {
    description: 'why it failed; `recipient_opted_out` for a skipped recipient, `cancelled` for a cancelled one',
  }),
  reason: Type.Optional(Type.String({ description: 'a skipped recipient: why in words' })),
});

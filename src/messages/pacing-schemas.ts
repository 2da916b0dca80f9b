import { Type, type Static } from '@sinclair/typebox';
import { named } from '../http/route.ts';
import { defineFormat } from '../http/validation.ts';
import { isTimeZone } from '../time-zone.ts';

/**
 * The schemas of sender pacing and line health (docs/pacing.md): a pace as an
 * organization or a number sets it, as it applies, and a line's usage.
 */

const timeZoneFormat = 'iana-time-zone';
defineFormat(
  timeZoneFormat,
  isTimeZone,
  (v) => `"${v}" is not an IANA time zone (such as Europe/Paris)`,
  'Europe/Paris',
);
const clock = Type.String({ pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$', description: 'local time, HH:MM (24 h)' });
/** Quiet hours, or `false` for none (docs/pacing.md#quiet-hours). */
const quietHours = Type.Union(
  [
    Type.Object({ start: clock, end: clock }, { additionalProperties: false }),
    Type.Literal(false, { description: 'no quiet hours' }),
  ],
  {
    description:
      "local hours in the recipient's time zone when nothing is sent to them (past midnight when start is later than end); false turns them off",
    examples: [{ start: '21:00', end: '08:00' }, false],
  },
);
/** The line-health rules of a pace, as set and as they apply. */
const healthFields = {
  unansweredCap: Type.Integer({
    minimum: 1,
    maximum: 100_000,
    description: 'messages to a recipient who has not replied since, before the line waits for their reply (default 5)',
    examples: [5],
  }),
  followUpsPerDay: Type.Integer({
    minimum: 0,
    maximum: 100_000,
    description:
      'recipients per rolling 24 h the line may write to again while they have not answered its last message (default 200)',
    examples: [200],
  }),
  jitterMs: Type.Integer({
    minimum: 0,
    maximum: 600_000,
    description: 'the most random spacing (ms) between first messages to new recipients; 0 for none (default 2000)',
    examples: [2000],
  }),
  quietHours,
  timeZone: Type.String({
    format: timeZoneFormat,
    maxLength: 64,
    description: 'the zone of a recipient whose number does not tell its zone (default UTC)',
    examples: ['America/New_York'],
  }),
};
/** A pace as set on an organization or a number; what it leaves out comes from the level above (number, organization, defaults). */
export const paceSetting = named(
  'PaceSetting',
  Type.Object(
    {
      perSecond: Type.Optional(
        Type.Number({ exclusiveMinimum: 0, maximum: 1000, description: 'messages a second the line sends at most' }),
      ),
      burst: Type.Optional(
        Type.Integer({ minimum: 1, maximum: 1000, description: 'messages the line may send at once after a pause' }),
      ),
      newContactsPerDay: Type.Optional(
        Type.Integer({
          minimum: 0,
          maximum: 100_000,
          description: 'first messages to recipients the line never wrote to, per rolling 24 h',
        }),
      ),
      unansweredCap: Type.Optional(healthFields.unansweredCap),
      followUpsPerDay: Type.Optional(healthFields.followUpsPerDay),
      jitterMs: Type.Optional(healthFields.jitterMs),
      quietHours: Type.Optional(healthFields.quietHours),
      timeZone: Type.Optional(healthFields.timeZone),
    },
    {
      additionalProperties: false,
      examples: [
        { perSecond: 2, newContactsPerDay: 100, unansweredCap: 3, quietHours: { start: '20:00', end: '09:00' } },
        { jitterMs: 0, quietHours: false, timeZone: 'Europe/Paris' },
      ],
    },
  ),
);
/** A pace as it applies (the deployment's defaults may lie outside what a setting accepts). */
const pace = Type.Object({
  perSecond: Type.Number(),
  burst: Type.Integer(),
  newContactsPerDay: Type.Integer(),
  unansweredCap: Type.Integer(),
  followUpsPerDay: Type.Integer(),
  jitterMs: Type.Integer(),
  quietHours,
  timeZone: Type.String(),
});
export type Pace = Static<typeof pace>;
export const usage = named(
  'LineUsage',
  Type.Object({
    number: Type.String(),
    pace,
    sentLastMinute: Type.Integer(),
    newContactsToday: Type.Integer({ description: 'first messages to new recipients in the last 24 h' }),
    followUpsToday: Type.Integer({
      description: 'recipients the line wrote to again in the last 24 h while they had not answered its last message',
    }),
    awaitingReply: Type.Integer({
      description: 'recipients the line sent its unanswered cap to: it waits for their reply',
    }),
    nextSlotAt: Type.String({ format: 'date-time', description: 'when the line may send its next message' }),
    nextNewContactSlotAt: Type.String({
      format: 'date-time',
      description: 'when the line may write to a new recipient (its cap and its spacing between first messages)',
    }),
    nextFollowUpSlotAt: Type.String({
      format: 'date-time',
      description: 'when the line may write again to a recipient who has not answered (its follow-up cap)',
    }),
    health: Type.Object(
      {
        windowDays: Type.Integer(),
        recipients: Type.Integer({ description: 'recipients first written to in the last `windowDays`' }),
        replied: Type.Integer({ description: 'of them, those who wrote since' }),
        unanswered: Type.Integer({ description: 'of them, those written to since they last wrote' }),
        replyRate: Type.Union([Type.Number(), Type.Null()], { description: 'replied / recipients; null: none' }),
        unansweredShare: Type.Union([Type.Number(), Type.Null()], { description: 'unanswered / recipients' }),
      },
      { description: "the line's recent recipients (docs/pacing.md#a-lines-usage)" },
    ),
  }),
);

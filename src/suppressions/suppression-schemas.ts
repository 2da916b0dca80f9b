import { Type } from '@sinclair/typebox';
import { paginationQuery } from '../http/pagination.ts';
import { named } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import { maxKeywordChars, maxOwnKeywords } from './opt-out-keywords.ts';
import { suppressionSources } from './suppression-store.ts';

/** At most this many handles on one organization's list through the API and imports (stop keywords are always honoured). */
export const maxSuppressions = 100_000;
export const maxReasonChars = 500;
export const maxHelpTextChars = 1_000;

const handle = Type.String({
  minLength: 1,
  maxLength: 320,
  description: 'a phone number in international form (stored as E.164) or an email address (stored lower-cased)',
  examples: ['+14155550100'],
});
const reason = Type.String({ minLength: 1, maxLength: maxReasonChars, examples: ['asked by phone not to be texted'] });

export const suppressionSchema = named(
  'Suppression',
  Type.Object({
    id: Type.String(),
    handle: Type.String({ examples: ['+14155550100'] }),
    reason: Type.Union([Type.String(), Type.Null()]),
    source: Type.Union(
      suppressionSources.map((s) => Type.Literal(s)),
      {
        description:
          'keyword: the handle texted a stop keyword; api: POST /api/v1/suppressions; import: POST /api/v1/suppressions/import',
      },
    ),
    createdAt: Type.String({ format: 'date-time' }),
    updatedAt: Type.String({ format: 'date-time' }),
  }),
);

export const suppressionBody = strictObject({ handle, reason: Type.Optional(reason) });

export const suppressionListQuery = strictObject({
  ...paginationQuery,
  handle: Type.Optional(Type.String({ minLength: 1, maxLength: 320, description: 'only this handle' })),
});

export const handleParams = strictObject({
  handle: Type.String({
    minLength: 1,
    maxLength: 320,
    description: 'the handle, URL-encoded (`%2B14155550100`)',
    examples: ['+14155550100'],
  }),
});

export const suppressionImportResult = named(
  'SuppressionImportResult',
  Type.Object({
    added: Type.Integer({ description: 'handles put on the list' }),
    alreadyListed: Type.Integer({ description: 'handles that were on it already' }),
    errors: Type.Array(
      Type.Object({ row: Type.Integer({ description: 'data row, from 1' }), message: Type.String() }),
      {
        description: 'rows that were not read, at most 100 listed',
      },
    ),
  }),
);

const keyword = Type.String({ minLength: 1, maxLength: maxKeywordChars, pattern: '\\S' });

export const optOutSettingsSchema = named(
  'OptOutSettings',
  Type.Object({
    stopKeywords: Type.Array(Type.String(), {
      description: "the organization's own stop keywords, beside STOP, STOPALL, UNSUBSCRIBE, CANCEL, END and QUIT",
      examples: [['arret', 'basta']],
    }),
    helpText: Type.Union([Type.String(), Type.Null()], {
      description: 'the answer to HELP; null: HELP is an ordinary message',
      examples: ['Acme support: reply STOP to opt out, or call +1 415 555 0100.'],
    }),
    updatedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  }),
);

export const optOutSettingsBody = strictObject({
  stopKeywords: Type.Optional(
    Type.Array(keyword, {
      maxItems: maxOwnKeywords,
      uniqueItems: true,
      description: `at most ${maxOwnKeywords}, each compared trimmed and case-folded with the whole text of a received message`,
      examples: [['arret', 'basta']],
    }),
  ),
  helpText: Type.Optional(
    Type.Union([Type.String({ minLength: 1, maxLength: maxHelpTextChars }), Type.Null()], {
      examples: ['Acme support: reply STOP to opt out, or call +1 415 555 0100.'],
    }),
  ),
});

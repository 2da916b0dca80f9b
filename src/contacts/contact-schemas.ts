import { Type, type Static } from '@sinclair/typebox';
import { validationError } from '../errors.ts';
import { keysetPaginationQuery, pageOrAfter } from '../http/pagination.ts';
import { named } from '../http/route.ts';
import { phoneNumberField, strictObject } from '../http/validation.ts';

/** E.164, the form phone numbers are stored in: a plus, a non-zero digit, then 7 to 14 digits. */
export const e164Pattern = '^\\+[1-9]\\d{7,14}$';
export const e164 = new RegExp(e164Pattern);

export const contactLimits = {
  nameLength: 100,
  textLength: 200,
  platformIdLength: 254,
  emailLength: 254,
  notesLength: 5_000,
  phoneNumbers: 20,
  emailAddresses: 20,
  tags: 50,
  tagLength: 50,
  searchLength: 200,
  /** Tags in one `tags` filter. */
  filterTags: 20,
  groupNameLength: 100,
} as const;

const text = (maxLength: number, description: string) =>
  Type.String({ maxLength, description: `${description}; an empty string leaves the field unset` });

/**
 * A tag never holds the separators of its two list forms (`,` in the tags
 * filter, `;` in a CSV cell) nor surrounding space, so every tag survives
 * both and a CSV export imports back unchanged.
 */
const tag = Type.String({
  minLength: 1,
  maxLength: contactLimits.tagLength,
  pattern: '^[^,;\\s](?:[^,;]*[^,;\\s])?$',
  description: 'no commas or semicolons, no leading or trailing space',
});

/** The writable fields of a contact (spec 2.5), in the column order of the CSV import and export. */
export const contactFieldSchemas = {
  firstName: Type.String({ minLength: 1, maxLength: contactLimits.nameLength, pattern: '\\S' }),
  lastName: text(contactLimits.nameLength, 'family name'),
  phoneNumbers: Type.Array(phoneNumberField(), { maxItems: contactLimits.phoneNumbers }),
  emailAddresses: Type.Array(Type.String({ format: 'email', maxLength: contactLimits.emailLength }), {
    maxItems: contactLimits.emailAddresses,
  }),
  tags: Type.Array(tag, { maxItems: contactLimits.tags, description: 'used for filtering and grouping' }),
  organization: text(contactLimits.textLength, 'company name'),
  jobTitle: text(contactLimits.textLength, 'job title'),
  notes: text(contactLimits.notesLength, 'free-form notes'),
  platformId: text(
    contactLimits.platformIdLength,
    'messaging-platform account identifier when different from the email',
  ),
};

export type ContactField = keyof typeof contactFieldSchemas;
export const contactFields = Object.keys(contactFieldSchemas) as ContactField[];
export const listFields = ['phoneNumbers', 'emailAddresses', 'tags'] as const satisfies readonly ContactField[];

const f = contactFieldSchemas;
/** Every field but firstName is optional on create and update alike. */
const optionalFields = {
  lastName: Type.Optional(f.lastName),
  phoneNumbers: Type.Optional(f.phoneNumbers),
  emailAddresses: Type.Optional(f.emailAddresses),
  tags: Type.Optional(f.tags),
  organization: Type.Optional(f.organization),
  jobTitle: Type.Optional(f.jobTitle),
  notes: Type.Optional(f.notes),
  platformId: Type.Optional(f.platformId),
};
export const contactCreateBody = strictObject({ firstName: f.firstName, ...optionalFields });
export type ContactInput = Static<typeof contactCreateBody>;

/** Partial update: only the given fields change; at least one field. */
export const contactUpdateBody = strictObject(
  { firstName: Type.Optional(f.firstName), ...optionalFields },
  { minProperties: 1 },
);
export type ContactChanges = Static<typeof contactUpdateBody>;

const stamp = {
  id: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
};

/** The contact as the API answers it: the create fields plus id, createdAt, updatedAt; unset text fields are absent. */
export const contactSchema = named(
  'Contact',
  Type.Object({
    id: stamp.id,
    firstName: Type.String(),
    lastName: Type.Optional(Type.String()),
    phoneNumbers: Type.Array(Type.String()),
    emailAddresses: Type.Array(Type.String()),
    tags: Type.Array(Type.String()),
    organization: Type.Optional(Type.String()),
    jobTitle: Type.Optional(Type.String()),
    notes: Type.Optional(Type.String()),
    platformId: Type.Optional(Type.String()),
    createdAt: stamp.createdAt,
    updatedAt: stamp.updatedAt,
  }),
);
export type Contact = Static<typeof contactSchema>;

const filterQuery = {
  search: Type.Optional(
    Type.String({
      maxLength: contactLimits.searchLength,
      description: 'case-insensitive literal text in the name, a phone number, an email address or a tag',
    }),
  ),
  tags: Type.Optional(
    Type.String({
      maxLength: contactLimits.filterTags * (contactLimits.tagLength + 1),
      description: 'comma-separated; a contact must have all of them (case-insensitive)',
    }),
  ),
};
export const contactListQuery = strictObject({ ...filterQuery, ...keysetPaginationQuery }, pageOrAfter);
export const contactExportQuery = strictObject({
  ...filterQuery,
  format: Type.Union([Type.Literal('json'), Type.Literal('csv')], { default: 'json' }),
});

/** An export: the import's fields only, so it imports back unchanged. */
export const contactExportAnswer = {
  description: 'the contacts, streamed; the file name is in Content-Disposition',
  content: {
    'application/json': Type.Array(contactCreateBody),
    'text/csv': Type.String({ description: 'a header row of the import columns, then one row per contact (RFC 4180)' }),
  },
  headers: {
    'content-disposition': { description: 'attachment; filename="contacts-<date>.<format>"', required: true },
  },
};

export const importResultSchema = named(
  'ContactImportResult',
  Type.Object({
    created: Type.Integer(),
    updated: Type.Integer(),
    failed: Type.Integer(),
    errors: Type.Array(
      Type.Object({ row: Type.Integer({ description: 'data row, counted from 1' }), error: Type.String() }),
      { description: 'the first 1,000 failed rows' },
    ),
  }),
);

export const idParams = strictObject({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export const memberParams = strictObject({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  contactId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const groupCreateBody = strictObject({
  name: Type.String({ minLength: 1, maxLength: contactLimits.groupNameLength, pattern: '\\S' }),
});
export const memberBody = strictObject({ contactId: Type.String({ minLength: 1, maxLength: 64 }) });
export const groupSchema = named(
  'ContactGroup',
  Type.Object({
    id: stamp.id,
    name: Type.String(),
    memberCount: Type.Integer(),
    createdAt: stamp.createdAt,
    updatedAt: stamp.updatedAt,
  }),
);
export const groupWithMembersSchema = Type.Object({ ...groupSchema.properties, members: Type.Array(contactSchema) });

/** The `tags` filter: comma-separated, blanks dropped, each a valid tag. */
export function parseTagFilter(raw: string | undefined): string[] {
  if (!raw) return [];
  const tags = [
    ...new Set(
      raw
        .split(',')
        .map((t) => t.trim())
        .filter((t) => t.length > 0),
    ),
  ];
  if (tags.length > contactLimits.filterTags)
    throw validationError('/tags', `at most ${contactLimits.filterTags} tags`);
  const long = tags.find((t) => t.length > contactLimits.tagLength);
  if (long !== undefined) throw validationError('/tags', `a tag has at most ${contactLimits.tagLength} characters`);
  return tags;
}

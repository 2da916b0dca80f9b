import type { Principal } from '../roles.ts';
import { newId } from '../ids.ts';
import { literalContains, type Filter, type Scope, type Store, type Update } from '../store/collection.ts';
import { contactFields, type Contact, type ContactChanges, type ContactInput } from './contact-schemas.ts';

/** Contacts and groups belong to a team: every store call carries both ids. */
export type TeamScope = Scope & { teamId: string };

export function teamScope(principal: Principal): TeamScope {
  return { tenantId: principal.tenantId, teamId: principal.teamId };
}

export interface ContactDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  teamId?: string;
  firstName: string;
  lastName?: string;
  phoneNumbers: string[];
  emailAddresses: string[];
  tags: string[];
  organization?: string;
  jobTitle?: string;
  notes?: string;
  platformId?: string;
  /** Lower-cased copies for exact, case-insensitive matching (import, directory, tags filter). */
  emailKeys: string[];
  tagKeys: string[];
  createdAt: string;
  updatedAt: string;
}

export interface ContactGroupDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  teamId?: string;
  name: string;
  createdAt: string;
  updatedAt: string;
}

/** One contact in one group; the unique index makes adding twice a no-op and a group's size a count. */
export interface GroupMembershipDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  teamId?: string;
  groupId: string;
  contactId: string;
  createdAt: string;
}

export function contactCollections(store: Store) {
  const team = { tenantId: 1, teamId: 1 } as const;
  return {
    contacts: store.collection<ContactDoc>('contacts', [
      { keys: { ...team, createdAt: -1, id: -1 }, newestFirst: true },
      { keys: { ...team, phoneNumbers: 1 } },
      { keys: { ...team, emailKeys: 1 } },
      { keys: { ...team, tagKeys: 1 } },
    ]),
    groups: store.collection<ContactGroupDoc>('contact_groups', [{ keys: { ...team, createdAt: 1 } }]),
    memberships: store.collection<GroupMembershipDoc>('contact_group_members', [
      { keys: { ...team, groupId: 1, contactId: 1 }, unique: true },
      { keys: { ...team, contactId: 1 } },
      { keys: { ...team, groupId: 1, createdAt: 1, id: 1 } },
    ]),
  };
}

export type ContactCollections = ReturnType<typeof contactCollections>;

const textFields = ['lastName', 'organization', 'jobTitle', 'notes', 'platformId'] as const;
const isTextField = (field: string): field is (typeof textFields)[number] =>
  (textFields as readonly string[]).includes(field);

const lower = (s: string) => s.toLowerCase();

/** Keeps the first of each value, comparing by `key`. */
function dedupe(values: string[], key: (s: string) => string = (s) => s): string[] {
  const seen = new Set<string>();
  return values.filter((v) => {
    const k = key(v);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/**
 * What validated changes do to the stored fields: given fields replace the
 * stored ones, an empty text field unsets it, lists are de-duplicated and carry
 * their lower-cased match keys along.
 */
export function normalizeChanges(changes: ContactChanges): { set: Record<string, unknown>; unset: string[] } {
  const set: Record<string, unknown> = {};
  const unset: string[] = [];
  for (const [field, value] of Object.entries(changes)) {
    if (value === undefined) continue;
    if (isTextField(field) && value === '') unset.push(field);
    else if (field === 'emailAddresses') {
      set.emailAddresses = dedupe(value as string[], lower);
      set.emailKeys = (set.emailAddresses as string[]).map(lower);
    } else if (field === 'tags') {
      set.tags = dedupe(value as string[], lower);
      set.tagKeys = (set.tags as string[]).map(lower);
    } else if (field === 'phoneNumbers') set.phoneNumbers = dedupe(value as string[]);
    else set[field] = value;
  }
  return { set, unset };
}

export function newContactDoc(scope: TeamScope, input: ContactInput, now: string): ContactDoc {
  const { set } = normalizeChanges(input);
  return {
    id: newId('ct'),
    tenantId: scope.tenantId,
    teamId: scope.teamId,
    firstName: input.firstName,
    phoneNumbers: [],
    emailAddresses: [],
    tags: [],
    emailKeys: [],
    tagKeys: [],
    ...set,
    createdAt: now,
    updatedAt: now,
  };
}

/** Applies changes to a document in memory, as `contactUpdate` does in the store. */
export function applyChanges(doc: ContactDoc, changes: ContactChanges, now: string): void {
  const { set, unset } = normalizeChanges(changes);
  Object.assign(doc, set);
  for (const field of unset) delete doc[field];
  doc.updatedAt = now;
}

/** Only the given fields are written, so concurrent updates of different fields both stand. */
export function contactUpdate(changes: ContactChanges, now: string): Update {
  const { set, unset } = normalizeChanges(changes);
  const update: Update = { $set: { ...set, updatedAt: now } };
  if (unset.length > 0) update.$unset = Object.fromEntries(unset.map((f) => [f, '']));
  return update;
}

/** The writable fields of a stored contact, in CSV column order; unset text fields are absent. */
export function contactFieldsOf(doc: ContactDoc): ContactInput {
  const out: Record<string, unknown> = {};
  for (const field of contactFields) if (doc[field] !== undefined) out[field] = doc[field];
  return out as ContactInput;
}

export function publicContact(doc: ContactDoc): Contact {
  return {
    id: doc.id,
    ...contactFieldsOf(doc),
    phoneNumbers: doc.phoneNumbers,
    emailAddresses: doc.emailAddresses,
    tags: doc.tags,
    createdAt: doc.createdAt,
    updatedAt: doc.updatedAt,
  };
}

export interface ContactQuery {
  search?: string;
  tags: string[];
}

/** List and export filter: the search is literal (never a user pattern), the tags must all be present. */
export function contactFilter(query: ContactQuery): Filter {
  const and: Filter[] = [];
  const search = query.search?.trim();
  if (search) {
    const text = literalContains(search);
    and.push({
      $or: [{ firstName: text }, { lastName: text }, { phoneNumbers: text }, { emailAddresses: text }, { tags: text }],
    });
  }
  if (query.tags.length > 0) and.push({ tagKeys: { $all: query.tags.map(lower) } });
  return and.length > 0 ? { $and: and } : {};
}

/** Contacts that have one of these phone numbers or email addresses (emails compared case-insensitively). */
export function reachableByFilter(phones: string[], emails: string[]): Filter | undefined {
  const or: Filter[] = [];
  if (phones.length > 0) or.push({ phoneNumbers: { $in: phones } });
  if (emails.length > 0) or.push({ emailKeys: { $in: emails.map(lower) } });
  return or.length > 0 ? { $or: or } : undefined;
}

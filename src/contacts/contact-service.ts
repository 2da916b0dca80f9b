import { notFound } from '../errors.ts';
import { readListPage, type ListPage, type PageRequest } from '../http/pagination.ts';
import { nowIso } from '../ids.ts';
import type { Contact, ContactChanges, ContactInput } from './contact-schemas.ts';
import {
  contactFilter,
  contactUpdate,
  newContactDoc,
  publicContact,
  type ContactCollections,
  type ContactDoc,
  type ContactQuery,
  type TeamScope,
} from './contact-store.ts';

/** Create, read, update, delete and list the contacts of a team. */
export class ContactService {
  constructor(private readonly db: ContactCollections) {}

  async create(scope: TeamScope, input: ContactInput): Promise<Contact> {
    const doc = newContactDoc(scope, input, nowIso());
    await this.db.contacts.insertOne(scope, doc);
    return publicContact(doc);
  }

  async get(scope: TeamScope, id: string): Promise<Contact> {
    const doc = await this.db.contacts.findOne(scope, { id });
    if (!doc) throw notFound('contact');
    return publicContact(doc);
  }

  async update(scope: TeamScope, id: string, changes: ContactChanges): Promise<Contact> {
    const doc = await this.db.contacts.updateOne(scope, { id }, contactUpdate(changes, nowIso()));
    if (!doc) throw notFound('contact');
    return publicContact(doc);
  }

  /**
   * Memberships go first: a delete cut short leaves the contact outside its
   * groups, which the retried delete finishes, never a membership of nobody.
   */
  async delete(scope: TeamScope, id: string): Promise<void> {
    if (!(await this.db.contacts.findOne(scope, { id }))) throw notFound('contact');
    await this.db.memberships.deleteMany(scope, { contactId: id });
    if (!(await this.db.contacts.deleteOne(scope, { id }))) throw notFound('contact');
  }

  /** Newest first, on the index over (team, createdAt, id). */
  async list(scope: TeamScope, query: ContactQuery & PageRequest): Promise<ListPage<Contact>> {
    const page = await readListPage(this.db.contacts, scope, contactFilter(query), { createdAt: -1, id: -1 }, query);
    return { ...page, data: page.data.map(publicContact) };
  }

  /** Every matching contact, oldest first, a page at a time (a keyset scan: an export of any size costs O(n) and lets other requests run between pages). */
  pages(scope: TeamScope, query: ContactQuery): AsyncIterable<ContactDoc[]> {
    return this.db.contacts.scan(scope, contactFilter(query), { sort: { createdAt: 1, id: 1 } });
  }
}

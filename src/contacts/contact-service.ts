import { notFound } from '../errors.ts';
import { paginate, pageWindow, type Page } from '../http/pagination.ts';
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

  async list(scope: TeamScope, query: ContactQuery & { page: number; limit: number }): Promise<Page<Contact>> {
    const filter = contactFilter(query);
    const window = pageWindow(query.page, query.limit);
    const [docs, total] = await Promise.all([
      this.db.contacts.find(scope, filter, { sort: { createdAt: -1, id: -1 }, ...window }),
      this.db.contacts.count(scope, filter),
    ]);
    return paginate(docs.map(publicContact), total, query.page, query.limit);
  }

  /** Every matching contact, oldest first, a page at a time (a keyset scan: an export of any size costs O(n) and lets other requests run between pages). */
  pages(scope: TeamScope, query: ContactQuery): AsyncIterable<ContactDoc[]> {
    return this.db.contacts.scan(scope, contactFilter(query), { sort: { createdAt: 1, id: 1 } });
  }
}

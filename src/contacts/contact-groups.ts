import { AppError, notFound } from '../errors.ts';
import { newId, nowIso } from '../ids.ts';
import type { Contact } from './contact-schemas.ts';
import {
  publicContact,
  type ContactCollections,
  type ContactDoc,
  type ContactGroupDoc,
  type TeamScope,
} from './contact-store.ts';

export interface ContactGroup {
  id: string;
  name: string;
  memberCount: number;
  createdAt: string;
  updatedAt: string;
}

/** `$in` lists stay this short, whatever the size of a group. */
const lookupChunk = 500;

/** Contact groups of a team and their memberships. */
export class ContactGroups {
  constructor(private readonly db: ContactCollections) {}

  async create(scope: TeamScope, input: { name: string }): Promise<ContactGroup> {
    const now = nowIso();
    const doc: ContactGroupDoc = {
      id: newId('grp'),
      tenantId: scope.tenantId,
      teamId: scope.teamId,
      name: input.name,
      createdAt: now,
      updatedAt: now,
    };
    await this.db.groups.insertOne(scope, doc);
    return this.view(doc, 0);
  }

  async list(scope: TeamScope): Promise<ContactGroup[]> {
    const docs = await this.db.groups.find(scope, {}, { sort: { createdAt: 1, id: 1 } });
    return Promise.all(docs.map(async (doc) => this.view(doc, await this.memberCount(scope, doc.id))));
  }

  async get(scope: TeamScope, id: string): Promise<ContactGroup & { members: Contact[] }> {
    const doc = await this.find(scope, id);
    const members = await this.memberContacts(scope, id);
    return { ...this.view(doc, await this.memberCount(scope, id)), members: members.map(publicContact) };
  }

  /** Adding a member twice is no error; `added` says whether this call added it. */
  async addMember(
    scope: TeamScope,
    groupId: string,
    contactId: string,
  ): Promise<{ group: ContactGroup; added: boolean }> {
    const group = await this.find(scope, groupId);
    if (!(await this.db.contacts.findOne(scope, { id: contactId }))) throw notFound('contact');
    const now = nowIso();
    let added = true;
    try {
      await this.db.memberships.insertOne(scope, {
        id: newId('gm'),
        tenantId: scope.tenantId,
        teamId: scope.teamId,
        groupId,
        contactId,
        createdAt: now,
      });
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'conflict')) throw err;
      added = false;
    }
    const updated = added
      ? await this.db.groups.updateOne(scope, { id: groupId }, { $set: { updatedAt: now } })
      : group;
    return { group: this.view(updated ?? group, await this.memberCount(scope, groupId)), added };
  }

  async removeMember(scope: TeamScope, groupId: string, contactId: string): Promise<void> {
    await this.find(scope, groupId);
    if (!(await this.db.memberships.deleteOne(scope, { groupId, contactId }))) throw notFound('group member');
    await this.db.groups.updateOne(scope, { id: groupId }, { $set: { updatedAt: nowIso() } });
  }

  /** The member contacts in the order they were added; throws not_found for an unknown group. */
  async memberContacts(scope: TeamScope, groupId: string): Promise<ContactDoc[]> {
    await this.find(scope, groupId);
    const members: ContactDoc[] = [];
    for await (const memberships of this.db.memberships.scan(
      scope,
      { groupId },
      { sort: { createdAt: 1, id: 1 }, pageSize: lookupChunk },
    )) {
      const byId = new Map<string, ContactDoc>();
      for (const doc of await this.db.contacts.find(scope, { id: { $in: memberships.map((m) => m.contactId) } }))
        byId.set(doc.id, doc);
      for (const m of memberships) {
        const doc = byId.get(m.contactId);
        if (doc) members.push(doc);
      }
    }
    return members;
  }

  private async find(scope: TeamScope, id: string): Promise<ContactGroupDoc> {
    const doc = await this.db.groups.findOne(scope, { id });
    if (!doc) throw notFound('contact group');
    return doc;
  }

  private memberCount(scope: TeamScope, groupId: string): Promise<number> {
    return this.db.memberships.count(scope, { groupId });
  }

  private view(doc: ContactGroupDoc, memberCount: number): ContactGroup {
    return { id: doc.id, name: doc.name, memberCount, createdAt: doc.createdAt, updatedAt: doc.updatedAt };
  }
}

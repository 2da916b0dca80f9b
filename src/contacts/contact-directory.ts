import type { Scope } from '../store/collection.ts';
import type { ContactGroups } from './contact-groups.ts';
import { reachableByFilter, type ContactCollections, type ContactDoc, type TeamScope } from './contact-store.ts';

/** Participants looked up per query, so an `$in` list stays short. */
const lookupChunk = 500;

const isPhone = (participant: string) => participant.startsWith('+');

/**
 * What messaging needs to know about a team's contacts: who a group message
 * goes to, and the names to show for the participants of a conversation.
 * The scope must carry the team (`{tenantId, teamId}`).
 */
export class ContactDirectory {
  constructor(
    private readonly db: ContactCollections,
    private readonly groups: ContactGroups,
  ) {}

  /**
   * The address of each member, in the order they were added: the first phone
   * number, else the first email address. Members with neither are skipped,
   * and an address shared by two members is listed once. Throws AppError
   * `not_found` for a group the team does not have.
   */
  async groupRecipients(scope: Scope, groupId: string): Promise<string[]> {
    const members = await this.groups.memberContacts(teamOf(scope), groupId);
    const recipients = new Set<string>();
    for (const contact of members) {
      const address = contact.phoneNumbers[0] ?? contact.emailAddresses[0];
      if (address !== undefined) recipients.add(address);
    }
    return [...recipients];
  }

  /**
   * "First Last" of the contact each participant (an E.164 phone number or an
   * email address, matched case-insensitively) belongs to, keyed by the
   * participant as given. Participants without a contact are absent; when
   * several contacts match, the oldest wins.
   */
  async namesFor(scope: Scope, participants: string[]): Promise<Map<string, string>> {
    const names = new Map<string, string>();
    const unique = [...new Set(participants)];
    for (let i = 0; i < unique.length; i += lookupChunk) {
      const chunk = unique.slice(i, i + lookupChunk);
      const filter = reachableByFilter(
        chunk.filter(isPhone),
        chunk.filter((p) => !isPhone(p)),
      );
      if (!filter) continue;
      const contacts = await this.db.contacts.find(teamOf(scope), filter, { sort: { createdAt: 1, id: 1 } });
      for (const participant of chunk) {
        const contact = contacts.find((c) => owns(c, participant));
        if (contact) names.set(participant, displayName(contact));
      }
    }
    return names;
  }
}

function owns(contact: ContactDoc, participant: string): boolean {
  return isPhone(participant)
    ? contact.phoneNumbers.includes(participant)
    : contact.emailKeys.includes(participant.toLowerCase());
}

function displayName(contact: ContactDoc): string {
  return [contact.firstName, contact.lastName].filter((part) => part).join(' ');
}

function teamOf(scope: Scope): TeamScope {
  if (scope.teamId === undefined) throw new Error('contacts belong to a team: the scope needs a teamId');
  return scope as TeamScope;
}

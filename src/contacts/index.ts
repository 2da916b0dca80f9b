import { ContactDirectory } from './contact-directory.ts';
import { ContactGroups } from './contact-groups.ts';
import { ContactImporter } from './contact-import.ts';
import { ContactService } from './contact-service.ts';
import type { ContactCollections } from './contact-store.ts';
import type { ContactsDeps } from './contacts.routes.ts';

export { contactCollections, type ContactCollections, type TeamScope } from './contact-store.ts';
export { contactRoutes, type ContactsDeps } from './contacts.routes.ts';
export { ContactDirectory } from './contact-directory.ts';

/** The contacts feature over its collections: what its routes use, and the directory messaging uses. */
export function createContacts(db: ContactCollections): ContactsDeps & { directory: ContactDirectory } {
  const groups = new ContactGroups(db);
  return { contacts: new ContactService(db), groups, importer: new ContactImporter(db), directory: new ContactDirectory(db, groups) };
}

import { ContactDirectory } from './contact-directory.ts';
import { ContactGroups } from './contact-groups.ts';
import { ContactImporter } from './contact-import.ts';
import { ContactService } from './contact-service.ts';
import type { ContactCollections } from './contact-store.ts';
import type { ListCursors } from '../http/list-cursors.ts';
import type { RouteDef } from '../http/route.ts';
import { contactRoutes, type ContactsDeps } from './contacts.routes.ts';

export { contactCollections, type ContactCollections, type TeamScope } from './contact-store.ts';
export type { ContactsDeps } from './contacts.routes.ts';
export { ContactDirectory } from './contact-directory.ts';

/** The contacts feature over its collections, wired: its routes, and the directory messaging uses. */
export function createContacts(
  db: ContactCollections,
  cursors: ListCursors,
): { directory: ContactDirectory; routes: RouteDef[] } {
  const groups = new ContactGroups(db);
  const deps: ContactsDeps = { contacts: new ContactService(db), groups, importer: new ContactImporter(db), cursors };
  return { directory: new ContactDirectory(db, groups), routes: contactRoutes(deps) };
}

import type { Store } from '../store/collection.ts';
import { digestId } from '../ids.ts';

/** How a handle came onto the list. */
export const suppressionSources = ['keyword', 'api', 'import'] as const;
export type SuppressionSource = (typeof suppressionSources)[number];

/** One suppressed handle of an organization: no message is sent to it until it is removed (or the handle sends a start keyword). */
export interface SuppressionDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  /** A phone number in E.164 or a lower-cased email address: the participant form the send path checks. */
  handle: string;
  reason: string | null;
  source: SuppressionSource;
  /** The received message whose stop keyword added it (source `keyword`). */
  messageId?: string;
  createdAt: string;
  updatedAt: string;
}

/** An organization's opt-out settings: its own stop keywords beside the standard ones, and what HELP is answered with. */
export interface OptOutSettingsDoc {
  [field: string]: unknown;
  /** The organization's id: one document per organization. */
  id: string;
  tenantId: string;
  stopKeywords: string[];
  /** Sent back to whoever texts HELP; null: HELP is an ordinary message. */
  helpText: string | null;
  createdAt: string;
  updatedAt: string;
}

export function suppressionCollections(store: Store) {
  return {
    suppressions: store.collection<SuppressionDoc>('suppressions', [
      { keys: { tenantId: 1, handle: 1 } },
      { keys: { tenantId: 1, createdAt: -1 }, newestFirst: true },
    ]),
    optOutSettings: store.collection<OptOutSettingsDoc>('opt_out_settings'),
  };
}

export type SuppressionCollections = ReturnType<typeof suppressionCollections>;

/** A handle is on an organization's list at most once: its document's id follows from both, so concurrent adds agree on it. */
export function suppressionIdOf(tenantId: string, handle: string): string {
  return `sup_${digestId(`${tenantId}\u0000${handle}`, 24)}`;
}

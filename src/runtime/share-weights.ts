/**
 * Each organization's weight in the work lane's round robin (work-lane.ts):
 * how many deferred items in a row it takes at its turn within a class.
 * The default is 1, equal shares; the operator sets others
 * (`npm run admin -- share-weight`), and each process holds the table it
 * last read (src/admin/share-weight-store.ts refreshes it).
 */

/** The largest weight: a tenant at it takes this many steps while one at 1 takes one. */
export const maxShareWeight = 16;

let weights = new Map<string, number>();

/** A tenant's weight: its own, or 1. */
export function shareWeightOf(tenant: string): number {
  return weights.get(tenant) ?? 1;
}

/** Replaces the table (the operator's settings as last read); weights out of range are clamped. */
export function setShareWeights(table: Record<string, number>): void {
  const next = new Map<string, number>();
  for (const [tenant, weight] of Object.entries(table)) {
    if (!Number.isFinite(weight)) continue;
    const w = Math.min(maxShareWeight, Math.max(1, Math.round(weight)));
    if (w !== 1) next.set(tenant, w);
  }
  weights = next;
}

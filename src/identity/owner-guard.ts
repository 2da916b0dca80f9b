import { AppError } from '../errors.ts';
import type { Scope } from '../store/collection.ts';
import type { IdentityCollections } from './identity-store.ts';

const orgScope = (tenantId: string): Scope => ({ tenantId });
const lastOwner = () =>
  new AppError('conflict', 'the organization must keep an owner: make another member owner first');
const changedMeanwhile = () => new AppError('conflict', 'the member changed meanwhile; read it again');

/**
 * Tries of a change to the owners on a store whose updates are not atomic,
 * each after another writer took the version it read: owner changes are rare
 * and made by hand, so more than a few in a row on one organization is a storm.
 */
const ownerSetTries = 5;

/**
 * "The organization keeps an owner", decided in one atomic step on a set of
 * its owners. Counting the owners and then writing a member's role lets two
 * owners demoting each other both see two owners; here, of two concurrent
 * releases only one finds another owner left.
 *
 * Invariant: every id in the set is a member whose role is owner. So an owner
 * leaves the set before its role changes (`release`, then the role's
 * compare-and-set), and joins it after its role became owner (`admit`). A
 * process stopped between the two writes leaves an owner outside the set:
 * the organization still keeps an owner, but that member cannot be demoted.
 *
 * Where an update is a compare-and-set (MongoDB, the embedded store), the set
 * is `owners` on the organization's document, changed by a conditional update
 * whose filter proves another owner remains. FerretDB 1.x applies two such
 * updates both, so there each change of the set is a new version inserted
 * under a unique id (`owner_sets`): of two writers that read the same
 * version, only one inserts the next.
 *
 * Organizations made before the set existed get it at their first owner
 * change, from the members whose role is owner. Every owner change makes sure
 * of the set first, so no owner's role changes between that read and the
 * write that only an absent set accepts.
 */
export class OwnerGuard {
  constructor(private readonly db: IdentityCollections) {}

  /** Takes `userId` out of the owners, only if another owner remains: call it before the member's role changes. */
  release(tenantId: string, userId: string): Promise<void> {
    return this.db.updatesCompareAndSet()
      ? this.releaseOnDocument(tenantId, userId)
      : this.releaseByVersion(tenantId, userId);
  }

  /** Puts `userId` among the owners: call it once its role is owner. */
  admit(tenantId: string, userId: string): Promise<void> {
    return this.db.updatesCompareAndSet()
      ? this.admitOnDocument(tenantId, userId)
      : this.admitByVersion(tenantId, userId);
  }

  /** Makes the set ready: call it before any owner's role changes. */
  ensure(tenantId: string): Promise<void> {
    return this.db.updatesCompareAndSet()
      ? this.ensureOnDocument(tenantId)
      : this.ensureVersions(tenantId).then(() => {});
  }

  private async currentOwners(tenantId: string): Promise<string[]> {
    return (await this.db.users.find(orgScope(tenantId), { role: 'owner' })).map((u) => u.id);
  }

  private async ensureOnDocument(tenantId: string): Promise<void> {
    const org = await this.db.organizations.findOne(orgScope(tenantId), { id: tenantId });
    if (!org) throw new AppError('not_found', 'organization not found');
    if (org.owners !== undefined) return;
    const owners = await this.currentOwners(tenantId);
    await this.db.organizations.updateOne(
      orgScope(tenantId),
      { id: tenantId, owners: { $exists: false } },
      { $set: { owners, ownerCount: owners.length } },
    );
  }

  private async releaseOnDocument(tenantId: string, userId: string): Promise<void> {
    const released = await this.db.organizations.updateOne(
      orgScope(tenantId),
      { id: tenantId, owners: userId, ownerCount: { $gte: 2 } },
      { $pull: { owners: userId }, $inc: { ownerCount: -1 } },
    );
    if (released) return;
    const org = await this.db.organizations.findOne(orgScope(tenantId), { id: tenantId });
    throw org?.owners?.includes(userId) ? lastOwner() : changedMeanwhile();
  }

  private async admitOnDocument(tenantId: string, userId: string): Promise<void> {
    await this.db.organizations.updateOne(
      orgScope(tenantId),
      { id: tenantId, owners: { $ne: userId } },
      { $push: { owners: userId }, $inc: { ownerCount: 1 } },
    );
  }

  /** The newest version of the set, made from the members when there is none. */
  private async ensureVersions(tenantId: string): Promise<{ version: number; owners: string[] }> {
    const [newest] = await this.db.ownerSets.find(orgScope(tenantId), {}, { sort: { version: -1 }, limit: 1 });
    if (newest) return newest;
    const first = { version: 0, owners: await this.currentOwners(tenantId) };
    if (await this.insertVersion(tenantId, first.version, first.owners)) return first;
    return this.ensureVersions(tenantId);
  }

  /** False when another writer inserted this version first. */
  private async insertVersion(tenantId: string, version: number, owners: string[]): Promise<boolean> {
    try {
      await this.db.ownerSets.insertOne(orgScope(tenantId), {
        id: `${tenantId}:${version}`,
        tenantId,
        version,
        owners,
      });
      return true;
    } catch (err) {
      if (err instanceof AppError && err.code === 'conflict') return false;
      throw err;
    }
  }

  private async releaseByVersion(tenantId: string, userId: string): Promise<void> {
    for (let i = 0; i < ownerSetTries; i++) {
      const set = await this.ensureVersions(tenantId);
      if (!set.owners.includes(userId)) throw changedMeanwhile();
      if (set.owners.length < 2) throw lastOwner();
      const owners = set.owners.filter((id) => id !== userId);
      if (await this.insertVersion(tenantId, set.version + 1, owners)) return;
    }
    throw changedMeanwhile();
  }

  private async admitByVersion(tenantId: string, userId: string): Promise<void> {
    for (let i = 0; i < ownerSetTries; i++) {
      const set = await this.ensureVersions(tenantId);
      if (set.owners.includes(userId)) return;
      if (await this.insertVersion(tenantId, set.version + 1, [...set.owners, userId])) return;
    }
    throw changedMeanwhile();
  }
}

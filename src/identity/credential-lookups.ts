import type { Broadcast } from '../runtime/broadcast.ts';
import type { Principal, Role } from '../roles.ts';
import { platformScope, type Scope } from '../store/collection.ts';
import type { IdentityCollections, OrganizationDoc } from './identity-store.ts';
import { ApiKeyCache } from './api-key-cache.ts';
import { livemodeOf } from '../test-mode.ts';

/** Who a credential belongs to, before the request's team is chosen. */
export type Caller = Omit<Principal, 'teamId'>;

interface CachedLookup<T> {
  value: Promise<T>;
  /** Set once the load has settled: a hit then answers without waiting. */
  settled: boolean;
  result: T | undefined;
  expiresAt: number;
}

export const orgScope = (tenantId: string): Scope => ({ tenantId });
/** The broadcast channel on which every process hears of a revoked API key (by its key id). */
export const apiKeyRevokedChannel = 'api-key-revoked';
/** The broadcast channel on which every process hears of a member whose role changed or who was removed. */
export const memberChangedChannel = 'member-changed';

/**
 * What every authenticated request reads, kept for `cacheMs`: the caller of
 * an API key, an organization, whether a team exists, a member's role. A
 * revoked key or a changed member is dropped on every process at once
 * (broadcast); the expiry is the fallback.
 */
export class CredentialLookups {
  private readonly apiKeyCache: ApiKeyCache<Caller | undefined>;
  private readonly orgCache = new Map<string, CachedLookup<OrganizationDoc | undefined>>();
  private readonly teamCache = new Map<string, CachedLookup<boolean>>();
  /** A signed-in member's current role, by `<tenantId>/<userId>`; undefined once removed. */
  private readonly memberCache = new Map<string, CachedLookup<Role | undefined>>();

  constructor(
    private readonly db: IdentityCollections,
    private readonly cacheMs: number,
    private readonly broadcast?: Broadcast,
  ) {
    this.apiKeyCache = new ApiKeyCache(
      cacheMs,
      (hash) => this.loadCaller(hash),
      (caller) => caller?.apiKeyId,
    );
  }

  /** Every process drops a revoked key, and a changed or removed member, from its cache before the change answers; the cache expiry stays the fallback. */
  async listenForRevocations(): Promise<void> {
    await this.broadcast?.subscribe(apiKeyRevokedChannel, (payload) => {
      const keyId = (payload as { keyId?: unknown }).keyId;
      if (typeof keyId === 'string') this.apiKeyCache.forget(keyId);
    });
    await this.broadcast?.subscribe(memberChangedChannel, (payload) => {
      const member = (payload as { member?: unknown }).member;
      if (typeof member === 'string') this.memberCache.delete(member);
    });
  }

  /**
   * A revoked key is forgotten here and on every process. The message still
   * names the key's stored hash, which is what a process of the previous
   * version looks for, so a rolling upgrade keeps revocation immediate.
   */
  async forgetApiKey(keyId: string, storedHash: string): Promise<void> {
    this.apiKeyCache.forget(keyId);
    await this.broadcast?.publish(apiKeyRevokedChannel, { keyId, hash: storedHash });
  }

  /** A changed or removed member is forgotten here and on every process. */
  async forgetMember(tenantId: string, userId: string): Promise<void> {
    const member = `${tenantId}/${userId}`;
    this.memberCache.delete(member);
    await this.broadcast?.publish(memberChangedChannel, { member });
  }

  memberRole(tenantId: string, userId: string): Role | undefined | Promise<Role | undefined> {
    return this.cached(
      this.memberCache,
      `${tenantId}/${userId}`,
      async () => (await this.db.users.findOne(orgScope(tenantId), { id: userId }))?.role,
    );
  }

  /** The caller of an API key: from memory while the key is known and not revoked, else from the store. */
  callerForApiKey(raw: string): Caller | undefined | Promise<Caller | undefined> {
    return this.apiKeyCache.lookup(raw);
  }

  private async loadCaller(hash: string): Promise<Caller | undefined> {
    const entry = await this.db.apiKeyIndex.findOne(platformScope, { id: hash });
    if (!entry) return undefined;
    // A test key's record is the organization's; its entry points into the test tenant, which its caller acts in.
    const key = await this.db.apiKeys.findOne(orgScope(entry.keyOrgId ?? entry.orgId), {
      id: entry.keyId,
      revokedAt: { $exists: false },
    });
    return key
      ? { tenantId: entry.orgId, role: key.role, apiKeyId: key.id, livemode: livemodeOf(entry.orgId) }
      : undefined;
  }

  /** Read twice by every authenticated request (its team, its rate limit): the loader is made once, not per call. */
  organization(tenantId: string): OrganizationDoc | undefined | Promise<OrganizationDoc | undefined> {
    return this.cached(this.orgCache, tenantId, this.loadOrganization);
  }

  /** An organization just made (a test tenant): a cached "not found" would hide it until the cache expires. */
  forgetOrganization(tenantId: string): void {
    this.orgCache.delete(tenantId);
  }

  private readonly loadOrganization = async (tenantId: string): Promise<OrganizationDoc | undefined> =>
    (await this.db.organizations.findOne(orgScope(tenantId), { id: tenantId })) ?? undefined;

  teamExists(tenantId: string, teamId: string): boolean | Promise<boolean> {
    return this.cached(
      this.teamCache,
      `${tenantId}/${teamId}`,
      async () => (await this.db.teams.findOne(orgScope(tenantId), { id: teamId })) !== null,
    );
  }

  /**
   * At once when known and loaded, else a promise. One load per key at a
   * time: requests arriving while it loads share it (no stampede when an
   * entry expires).
   */
  private cached<T>(
    cache: Map<string, CachedLookup<T>>,
    key: string,
    load: (key: string) => Promise<T>,
  ): T | Promise<T> {
    const now = Date.now();
    const hit = cache.get(key);
    if (hit && hit.expiresAt > now) return hit.settled ? hit.result! : hit.value;
    const value = load(key);
    if (cache.size >= 50_000) cache.clear();
    const entry: CachedLookup<T> = { value, settled: false, result: undefined, expiresAt: now + this.cacheMs };
    cache.set(key, entry);
    value.then(
      (result) => {
        entry.result = result;
        entry.settled = true;
      },
      () => {
        if (cache.get(key) === entry) cache.delete(key);
      },
    );
    return value;
  }
}

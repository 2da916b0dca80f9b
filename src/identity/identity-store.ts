import type { Store } from '../store/collection.ts';
import type { Role } from '../roles.ts';

export interface OrganizationDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  name: string;
  defaultTeamId: string;
  /** Per-organization override of the rate limit defaults. */
  rateLimit?: { perMinute: number; burst: number };
  /** On a test tenant: the organization whose test data it holds. */
  liveTenantId?: string;
  /** The ids of the members whose role is owner, and how many (see `OwnerGuard`); made at the first owner change. */
  owners?: string[];
  ownerCount?: number;
  createdAt: string;
  updatedAt: string;
}

export interface TeamDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  name: string;
  createdAt: string;
  updatedAt: string;
}

export interface UserDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  email: string;
  passwordHash: string;
  role: Role;
  createdAt: string;
  updatedAt: string;
}

export interface ApiKeyDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  name: string;
  role: Role;
  prefix: string;
  hash: string;
  /** Absent on keys made before test mode: live. */
  mode?: 'live' | 'test';
  revokedAt?: string;
  createdAt: string;
  updatedAt: string;
}

/**
 * Platform lookups by a secret or an email, made before the tenant is known
 * (login, API key, refresh token). They hold only pointers into the tenant's
 * own records, which stay the truth.
 */
export interface LoginIndexDoc {
  [field: string]: unknown;
  id: string; // normalized email
  tenantId: string;
  /** The tenant this entry points into (`tenantId` above is the platform scope); the stored name stays `orgId` so existing data reads. */
  orgId: string;
  userId: string;
}

export interface ApiKeyIndexDoc {
  [field: string]: unknown;
  id: string; // sha-256 of the raw key
  tenantId: string;
  /** The tenant this entry points into (`tenantId` above is the platform scope); the stored name stays `orgId` so existing data reads. */
  orgId: string;
  keyId: string;
  /** For a test key: the organization's tenant, where the key's record is (`orgId` is its test tenant). */
  keyOrgId?: string;
}

export interface RefreshTokenDoc {
  [field: string]: unknown;
  id: string; // sha-256 of the raw token
  tenantId: string;
  /** The tenant this entry points into (`tenantId` above is the platform scope); the stored name stays `orgId` so existing data reads. */
  orgId: string;
  userId: string;
  familyId: string;
  expiresAt: string;
  usedAt?: string;
  revokedAt?: string;
  createdAt: string;
}

/** A version of an organization's owners, on a store whose updates are not atomic (see `OwnerGuard`). */
export interface OwnerSetDoc {
  [field: string]: unknown;
  id: string; // `<tenantId>:<version>`: the unique key that lets one writer only make each version
  tenantId: string;
  version: number;
  owners: string[];
}

export function identityCollections(store: Store) {
  return {
    /** Read at each owner change: the store has connected by then. */
    updatesCompareAndSet: () => store.updatesCompareAndSet,
    organizations: store.collection<OrganizationDoc>('organizations'),
    teams: store.collection<TeamDoc>('teams', [{ keys: { tenantId: 1, name: 1 }, unique: true }]),
    users: store.collection<UserDoc>('users', [{ keys: { tenantId: 1, email: 1 }, unique: true }]),
    apiKeys: store.collection<ApiKeyDoc>('api_keys', [{ keys: { tenantId: 1, createdAt: -1 }, newestFirst: true }]),
    loginIndex: store.collection<LoginIndexDoc>('login_index'),
    apiKeyIndex: store.collection<ApiKeyIndexDoc>('api_key_index'),
    ownerSets: store.collection<OwnerSetDoc>('owner_sets', [{ keys: { tenantId: 1, version: -1 }, newestFirst: true }]),
    refreshTokens: store.collection<RefreshTokenDoc>('refresh_tokens', [
      { keys: { tenantId: 1, familyId: 1 } },
      { keys: { tenantId: 1, userId: 1 } },
    ]),
  };
}

export type IdentityCollections = ReturnType<typeof identityCollections>;

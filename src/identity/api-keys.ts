import { AppError } from '../errors.ts';
import { digestId, newId, nowIso } from '../ids.ts';
import { hasRole, type Principal, type Role } from '../roles.ts';
import { platformScope } from '../store/collection.ts';
import { isTestTenant, liveTenantOf, testTenantOf, type KeyMode } from '../test-mode.ts';
import { orgScope, type CredentialLookups } from './credential-lookups.ts';
import type { IdentityCollections } from './identity-store.ts';
import { newApiKey } from './secrets.ts';

/**
 * The organization's API keys: live keys reach its data, test keys its test
 * data (a tenant of its own, made with the first test key). The key records
 * stay with the organization whichever mode they are; a key's index entry
 * names the tenant it reaches.
 */
export class ApiKeys {
  constructor(
    private readonly db: IdentityCollections,
    private readonly lookups: CredentialLookups,
  ) {}

  async create(principal: Principal, input: { name: string; role?: Role; mode?: KeyMode }) {
    const role = input.role ?? 'member';
    const mode = input.mode ?? (isTestTenant(principal.tenantId) ? 'test' : 'live');
    assertCanGrant(principal, role);
    if (mode === 'live' && isTestTenant(principal.tenantId))
      throw new AppError('forbidden', 'a test key cannot create a live key');
    const orgId = liveTenantOf(principal.tenantId);
    const target = mode === 'test' ? await this.testTenant(orgId) : orgId;
    const { raw, hash, visiblePrefix } = newApiKey(mode);
    const now = nowIso();
    const id = newId('key');
    await this.db.apiKeys.insertOne(orgScope(orgId), {
      id,
      tenantId: orgId,
      name: input.name,
      role,
      prefix: visiblePrefix,
      hash,
      mode,
      createdAt: now,
      updatedAt: now,
    });
    await this.db.apiKeyIndex.insertOne(platformScope, {
      id: hash,
      tenantId: platformScope.tenantId,
      orgId: target,
      keyId: id,
      ...(target !== orgId ? { keyOrgId: orgId } : {}),
    });
    return { id, name: input.name, role, mode, prefix: visiblePrefix, createdAt: now, key: raw };
  }

  /**
   * The tenant of the organization's test data, made if it is not there yet:
   * an organization record of the same name and a default team, under ids
   * derived from the organization's, so that two first test keys made at
   * once make the same records once.
   */
  async testTenant(orgId: string): Promise<string> {
    const tenantId = testTenantOf(orgId);
    const scope = orgScope(tenantId);
    if (await this.lookups.organization(tenantId)) return tenantId;
    const org = await this.db.organizations.findOne(orgScope(orgId), { id: orgId });
    if (!org) throw new AppError('unauthorized', 'missing or invalid credentials');
    const now = nowIso();
    const teamId = `team_${digestId(tenantId, 22)}`;
    await insertIfAbsent(() =>
      this.db.teams.insertOne(scope, { id: teamId, tenantId, name: 'Default', createdAt: now, updatedAt: now }),
    );
    await insertIfAbsent(() =>
      this.db.organizations.insertOne(scope, {
        id: tenantId,
        tenantId,
        name: org.name,
        defaultTeamId: teamId,
        liveTenantId: orgId,
        ...(org.rateLimit ? { rateLimit: org.rateLimit } : {}),
        createdAt: now,
        updatedAt: now,
      }),
    );
    this.lookups.forgetOrganization(tenantId);
    return tenantId;
  }

  /** The organization's keys, live and test (a caller on test data sees them too: they are the organization's). */
  async list(principal: Principal) {
    const keys = await this.db.apiKeys.find(
      orgScope(liveTenantOf(principal.tenantId)),
      { revokedAt: { $exists: false } },
      { sort: { createdAt: -1 }, limit: 1000 },
    );
    return keys.map((k) => ({
      id: k.id,
      name: k.name,
      role: k.role,
      mode: k.mode ?? ('live' as const),
      prefix: k.prefix,
      createdAt: k.createdAt,
      updatedAt: k.updatedAt,
    }));
  }

  async revoke(principal: Principal, keyId: string): Promise<void> {
    const now = nowIso();
    const key = await this.db.apiKeys.updateOne(
      orgScope(liveTenantOf(principal.tenantId)),
      { id: keyId, revokedAt: { $exists: false } },
      { $set: { revokedAt: now, updatedAt: now } },
    );
    if (!key) throw new AppError('not_found', 'api key not found');
    await this.db.apiKeyIndex.deleteOne(platformScope, { id: key.hash });
    await this.lookups.forgetApiKey(key.id, key.hash);
  }
}

export function assertCanGrant(principal: Principal, role: Role): void {
  if (!hasRole(principal.role, role))
    throw new AppError('forbidden', `a ${principal.role} cannot grant the ${role} role`);
}

/** An insert whose record may already be there (made by a concurrent first call): that is as good. */
async function insertIfAbsent(insert: () => Promise<unknown>): Promise<void> {
  try {
    await insert();
  } catch (err) {
    if (!(err instanceof AppError && err.code === 'conflict')) throw err;
  }
}

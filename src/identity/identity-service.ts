import type { IdentityConfig } from '../config.ts';
import { AppError } from '../errors.ts';
import { isId, newId, nowIso } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { Broadcast } from '../runtime/broadcast.ts';
import type { RateLimiter } from '../runtime/rate-limiter.ts';
import { platformScope, type Scope } from '../store/collection.ts';
import type { IdentityCollections, OrganizationDoc, TeamDoc, UserDoc } from './identity-store.ts';
import type { AccessTokens } from './jwt.ts';
import { OwnerGuard } from './owner-guard.ts';
import { hashPassword, verifyPassword } from './passwords.ts';
import { hasRole, isRole, type Principal, type Role } from '../roles.ts';
import { apiKeyPrefix, newApiKey, newRefreshToken, sha256 } from './secrets.ts';

export type IdentitySettings = Pick<
  IdentityConfig,
  'refreshTokenTtlMs' | 'credentialCacheMs' | 'loginFailuresPerMinute'
>;

/** Who a credential belongs to, before the request's team is chosen. */
export type Caller = Omit<Principal, 'teamId'>;

interface CachedLookup<T> {
  value: T;
  expiresAt: number;
}

const unauthorized = (message = 'missing or invalid credentials') => new AppError('unauthorized', message);
const orgScope = (orgId: string): Scope => ({ tenantId: orgId });
/** The broadcast channel on which every process hears of a revoked API key (by its hash). */
export const apiKeyRevokedChannel = 'api-key-revoked';
/** The broadcast channel on which every process hears of a member whose role changed or who was removed. */
export const memberChangedChannel = 'member-changed';

export class IdentityService {
  private readonly apiKeyCache = new Map<string, CachedLookup<Promise<Caller | undefined>>>();
  private readonly orgCache = new Map<string, CachedLookup<Promise<OrganizationDoc | undefined>>>();
  private readonly teamCache = new Map<string, CachedLookup<Promise<boolean>>>();
  /** A signed-in member's current role, by `<orgId>/<userId>`; undefined once removed. */
  private readonly memberCache = new Map<string, CachedLookup<Promise<Role | undefined>>>();
  private readonly owners: OwnerGuard;

  constructor(
    private readonly db: IdentityCollections,
    private readonly tokens: AccessTokens,
    private readonly limiter: RateLimiter,
    private readonly settings: IdentitySettings,
    private readonly log: Logger,
    private readonly broadcast?: Broadcast,
  ) {
    this.owners = new OwnerGuard(db);
  }

  /** Every process drops a revoked key, and a changed or removed member, from its cache before the change answers; the cache expiry stays the fallback. */
  async listenForRevocations(): Promise<void> {
    await this.broadcast?.subscribe(apiKeyRevokedChannel, (payload) => {
      const hash = (payload as { hash?: unknown }).hash;
      if (typeof hash === 'string') this.apiKeyCache.delete(hash);
    });
    await this.broadcast?.subscribe(memberChangedChannel, (payload) => {
      const member = (payload as { member?: unknown }).member;
      if (typeof member === 'string') this.memberCache.delete(member);
    });
  }

  async signup(input: { organizationName: string; email: string; password: string }) {
    const email = normalizeEmail(input.email);
    const orgId = newId('org');
    const userId = newId('usr');
    const teamId = newId('team');
    const now = nowIso();
    // The login index entry is the email's claim: a second signup with it fails here, before anything else exists.
    await this.db.loginIndex.insertOne(platformScope, { id: email, tenantId: platformScope.tenantId, orgId, userId });
    const passwordHash = await hashPassword(input.password);
    const scope = orgScope(orgId);
    const org: OrganizationDoc = {
      id: orgId,
      tenantId: orgId,
      name: input.organizationName,
      defaultTeamId: teamId,
      createdAt: now,
      updatedAt: now,
    };
    const team: TeamDoc = { id: teamId, tenantId: orgId, name: 'Default', createdAt: now, updatedAt: now };
    const user: UserDoc = {
      id: userId,
      tenantId: orgId,
      email,
      passwordHash,
      role: 'owner',
      createdAt: now,
      updatedAt: now,
    };
    await this.db.organizations.insertOne(scope, org);
    await this.db.teams.insertOne(scope, team);
    await this.db.users.insertOne(scope, user);
    const session = await this.issueSession(user, newId('fam'));
    return { user: publicUser(user), organization: { id: org.id, name: org.name }, team: publicTeam(team), ...session };
  }

  async login(input: { email: string; password: string }, ip: string) {
    const email = normalizeEmail(input.email);
    const budget = `login:${sha256(`${email}|${ip}`)}`;
    const policy = { perMinute: this.settings.loginFailuresPerMinute, burst: this.settings.loginFailuresPerMinute };
    const decision = await this.limiter.take(budget, policy);
    if (!decision.allowed) {
      throw new AppError('rate_limited', 'too many failed logins; try again later', {
        retryAfterSeconds: decision.retryAfterSeconds,
      });
    }
    const entry = await this.db.loginIndex.findOne(platformScope, { id: email });
    const user = entry ? await this.db.users.findOne(orgScope(entry.orgId), { id: entry.userId }) : null;
    const ok = await verifyPassword(user?.passwordHash, input.password);
    if (!ok || !user) throw unauthorized('invalid email or password');
    await this.limiter.reset(budget);
    return this.issueSession(user, newId('fam'));
  }

  async refresh(rawToken: string) {
    const hash = sha256(rawToken);
    const stored = await this.db.refreshTokens.findOne(platformScope, { id: hash });
    if (!stored || stored.revokedAt || Date.parse(stored.expiresAt) <= Date.now())
      throw unauthorized('invalid refresh token');
    const claimed = await this.db.refreshTokens.updateOne(
      platformScope,
      { id: hash, usedAt: { $exists: false }, revokedAt: { $exists: false } },
      { $set: { usedAt: nowIso() } },
    );
    if (!claimed) {
      // A rotated token came back: whoever holds it is not the one holding the newest, so end the whole session.
      await this.revokeFamily(stored.familyId);
      this.log.warn(
        { tenantId: stored.orgId, familyId: stored.familyId },
        'refresh token reuse: session family revoked',
      );
      throw unauthorized('invalid refresh token');
    }
    const user = await this.db.users.findOne(orgScope(stored.orgId), { id: stored.userId });
    if (!user) throw unauthorized('invalid refresh token');
    return this.issueSession(user, stored.familyId);
  }

  /** Ends the session the token belongs to, whoever holds it (the dashboard's sign-out, where the cookie is the credential). */
  async endSession(rawToken: string): Promise<void> {
    const stored = await this.db.refreshTokens.findOne(platformScope, { id: sha256(rawToken) });
    if (stored) await this.revokeFamily(stored.familyId);
  }

  /** Ends the session the token belongs to, if it is the caller's organization's; otherwise does nothing, saying nothing. */
  async logout(rawToken: string, principal: Principal): Promise<void> {
    const stored = await this.db.refreshTokens.findOne(platformScope, { id: sha256(rawToken) });
    if (stored && stored.orgId === principal.orgId) await this.revokeFamily(stored.familyId);
  }

  /** Resolves an `Authorization` header value to the caller, or throws 401. */
  async authenticate(authorization: string | undefined): Promise<Caller> {
    const match = /^Bearer ([A-Za-z0-9._~+/=-]{1,4096})$/.exec(authorization ?? '');
    if (!match) throw unauthorized();
    const credential = match[1]!;
    if (credential.startsWith(apiKeyPrefix)) {
      const caller = await this.callerForApiKey(credential);
      if (!caller) throw unauthorized();
      return caller;
    }
    const claims = await this.tokens.verify(credential);
    if (!claims || !isRole(claims.role)) throw unauthorized();
    // The member's role as it is now: a changed role applies at once, a removed member's token no longer works.
    const role = await this.memberRole(claims.org, claims.sub);
    if (!role) throw unauthorized();
    return { orgId: claims.org, role, userId: claims.sub };
  }

  /** The team a request acts in: the `X-Team-Id` header's, or (no header) the organization's default team. */
  async resolveTeam(caller: Caller, teamHeader: string | undefined): Promise<Principal> {
    const org = await this.organization(caller.orgId);
    if (!org) throw unauthorized();
    if (teamHeader === undefined) return { ...caller, teamId: org.defaultTeamId };
    // Present but empty or not exactly an id (extra bytes, other characters) is the client's error, never the default team.
    if (!isId('team', teamHeader))
      throw new AppError('bad_request', 'X-Team-Id is not a team id', {
        details: [{ path: '/X-Team-Id', message: 'is not a team id' }],
      });
    if (!(await this.teamExists(caller.orgId, teamHeader))) throw new AppError('not_found', 'team not found');
    return { ...caller, teamId: teamHeader };
  }

  async rateLimitOf(orgId: string): Promise<{ perMinute: number; burst: number } | undefined> {
    return (await this.organization(orgId))?.rateLimit;
  }

  async me(principal: Principal) {
    const scope = orgScope(principal.orgId);
    const org = await this.organization(principal.orgId);
    const user = principal.userId ? await this.db.users.findOne(scope, { id: principal.userId }) : null;
    const teams = await this.db.teams.find(scope, {}, { sort: { createdAt: 1 }, limit: 1000 });
    return {
      user: user ? publicUser(user) : null,
      apiKeyId: principal.apiKeyId ?? null,
      organization: org ? { id: org.id, name: org.name, defaultTeamId: org.defaultTeamId } : null,
      role: principal.role,
      teams: teams.map(publicTeam),
    };
  }

  async createApiKey(principal: Principal, input: { name: string; role?: Role }) {
    const role = input.role ?? 'member';
    assertCanGrant(principal, role);
    const { raw, hash, visiblePrefix } = newApiKey();
    const now = nowIso();
    const id = newId('key');
    const scope = orgScope(principal.orgId);
    await this.db.apiKeys.insertOne(scope, {
      id,
      tenantId: principal.orgId,
      name: input.name,
      role,
      prefix: visiblePrefix,
      hash,
      createdAt: now,
      updatedAt: now,
    });
    await this.db.apiKeyIndex.insertOne(platformScope, {
      id: hash,
      tenantId: platformScope.tenantId,
      orgId: principal.orgId,
      keyId: id,
    });
    return { id, name: input.name, role, prefix: visiblePrefix, createdAt: now, key: raw };
  }

  async listApiKeys(principal: Principal) {
    const keys = await this.db.apiKeys.find(
      orgScope(principal.orgId),
      { revokedAt: { $exists: false } },
      { sort: { createdAt: -1 }, limit: 1000 },
    );
    return keys.map((k) => ({
      id: k.id,
      name: k.name,
      role: k.role,
      prefix: k.prefix,
      createdAt: k.createdAt,
      updatedAt: k.updatedAt,
    }));
  }

  async revokeApiKey(principal: Principal, keyId: string): Promise<void> {
    const now = nowIso();
    const key = await this.db.apiKeys.updateOne(
      orgScope(principal.orgId),
      { id: keyId, revokedAt: { $exists: false } },
      { $set: { revokedAt: now, updatedAt: now } },
    );
    if (!key) throw new AppError('not_found', 'api key not found');
    await this.db.apiKeyIndex.deleteOne(platformScope, { id: key.hash });
    this.apiKeyCache.delete(key.hash);
    await this.broadcast?.publish(apiKeyRevokedChannel, { hash: key.hash });
  }

  async createMember(principal: Principal, input: { email: string; password: string; role: Role }) {
    assertCanGrant(principal, input.role);
    const email = normalizeEmail(input.email);
    const userId = newId('usr');
    await this.db.loginIndex.insertOne(platformScope, {
      id: email,
      tenantId: platformScope.tenantId,
      orgId: principal.orgId,
      userId,
    });
    const now = nowIso();
    const user: UserDoc = {
      id: userId,
      tenantId: principal.orgId,
      email,
      passwordHash: await hashPassword(input.password),
      role: input.role,
      createdAt: now,
      updatedAt: now,
    };
    if (user.role === 'owner') await this.owners.ensure(principal.orgId);
    await this.db.users.insertOne(orgScope(principal.orgId), user);
    if (user.role === 'owner') await this.owners.admit(principal.orgId, user.id);
    return publicUser(user);
  }

  async listMembers(principal: Principal) {
    const users = await this.db.users.find(orgScope(principal.orgId), {}, { sort: { createdAt: 1 }, limit: 1000 });
    return users.map(publicUser);
  }

  /**
   * A member's new role. The caller may not change a member above its own
   * role, nor grant one above it, and the organization keeps at least one
   * owner. Applies to the member's next request, on every process.
   */
  async changeMemberRole(principal: Principal, userId: string, role: Role) {
    const target = await this.memberToManage(principal, userId);
    assertCanGrant(principal, role);
    const leaves = target.role === 'owner' && role !== 'owner';
    const joins = target.role !== 'owner' && role === 'owner';
    if (leaves || joins) await this.owners.ensure(principal.orgId);
    if (leaves) await this.owners.release(principal.orgId, userId);
    const changed = await this.db.users.updateOne(
      orgScope(principal.orgId),
      { id: userId, role: target.role },
      { $set: { role, updatedAt: nowIso() } },
    );
    // A refused compare-and-set after a release needs no undo: the member is no longer an owner.
    if (!changed) throw new AppError('conflict', 'the member changed meanwhile; read it again');
    if (joins) await this.owners.admit(principal.orgId, userId);
    await this.forgetMember(principal.orgId, userId);
    return publicUser(changed);
  }

  /** Removes a member: its sign-in and its sessions end, and its tokens stop working at once, on every process. */
  async removeMember(principal: Principal, userId: string): Promise<void> {
    const target = await this.memberToManage(principal, userId);
    if (target.role === 'owner') {
      await this.owners.ensure(principal.orgId);
      await this.owners.release(principal.orgId, userId);
    }
    if (!(await this.db.users.deleteOne(orgScope(principal.orgId), { id: userId, role: target.role }))) {
      throw new AppError('conflict', 'the member changed meanwhile; read it again');
    }
    await this.db.loginIndex.deleteOne(platformScope, { id: target.email, userId });
    await this.db.refreshTokens.updateMany(
      platformScope,
      { userId, revokedAt: { $exists: false } },
      { $set: { revokedAt: nowIso() } },
    );
    await this.forgetMember(principal.orgId, userId);
  }

  /** The member of the caller's organization it may manage: not one above its own role. */
  private async memberToManage(principal: Principal, userId: string): Promise<UserDoc> {
    const target = await this.db.users.findOne(orgScope(principal.orgId), { id: userId });
    if (!target) throw new AppError('not_found', 'member not found');
    if (!hasRole(principal.role, target.role))
      throw new AppError('forbidden', `a ${principal.role} cannot manage a member whose role is ${target.role}`);
    return target;
  }

  private async forgetMember(orgId: string, userId: string): Promise<void> {
    const member = `${orgId}/${userId}`;
    this.memberCache.delete(member);
    await this.broadcast?.publish(memberChangedChannel, { member });
  }

  private memberRole(orgId: string, userId: string): Promise<Role | undefined> {
    return this.cached(
      this.memberCache,
      `${orgId}/${userId}`,
      async () => (await this.db.users.findOne(orgScope(orgId), { id: userId }))?.role,
    );
  }

  async createTeam(principal: Principal, input: { name: string }) {
    const now = nowIso();
    const team: TeamDoc = {
      id: newId('team'),
      tenantId: principal.orgId,
      name: input.name,
      createdAt: now,
      updatedAt: now,
    };
    await this.db.teams.insertOne(orgScope(principal.orgId), team);
    return publicTeam(team);
  }

  async listTeams(principal: Principal) {
    const teams = await this.db.teams.find(orgScope(principal.orgId), {}, { sort: { createdAt: 1 }, limit: 1000 });
    return teams.map(publicTeam);
  }

  private async issueSession(user: UserDoc, familyId: string) {
    const { token: accessToken, expiresIn } = await this.tokens.sign({
      sub: user.id,
      org: user.tenantId,
      role: user.role,
    });
    const refresh = newRefreshToken();
    const now = Date.now();
    await this.db.refreshTokens.insertOne(platformScope, {
      id: refresh.hash,
      tenantId: platformScope.tenantId,
      orgId: user.tenantId,
      userId: user.id,
      familyId,
      expiresAt: new Date(now + this.settings.refreshTokenTtlMs).toISOString(),
      createdAt: new Date(now).toISOString(),
    });
    return { accessToken, refreshToken: refresh.raw, expiresIn, tokenType: 'Bearer' as const };
  }

  private async revokeFamily(familyId: string): Promise<void> {
    await this.db.refreshTokens.updateMany(
      platformScope,
      { familyId, revokedAt: { $exists: false } },
      { $set: { revokedAt: nowIso() } },
    );
  }

  private async callerForApiKey(raw: string): Promise<Caller | undefined> {
    const hash = sha256(raw);
    return this.cached(this.apiKeyCache, hash, async () => {
      const entry = await this.db.apiKeyIndex.findOne(platformScope, { id: hash });
      if (!entry) return undefined;
      const key = await this.db.apiKeys.findOne(orgScope(entry.orgId), {
        id: entry.keyId,
        revokedAt: { $exists: false },
      });
      return key ? { orgId: entry.orgId, role: key.role, apiKeyId: key.id } : undefined;
    });
  }

  private organization(orgId: string): Promise<OrganizationDoc | undefined> {
    return this.cached(
      this.orgCache,
      orgId,
      async () => (await this.db.organizations.findOne(orgScope(orgId), { id: orgId })) ?? undefined,
    );
  }

  private teamExists(orgId: string, teamId: string): Promise<boolean> {
    return this.cached(
      this.teamCache,
      `${orgId}/${teamId}`,
      async () => (await this.db.teams.findOne(orgScope(orgId), { id: teamId })) !== null,
    );
  }

  /** One load per key at a time: requests arriving while it loads share it (no stampede when an entry expires). */
  private cached<T>(cache: Map<string, CachedLookup<Promise<T>>>, key: string, load: () => Promise<T>): Promise<T> {
    const now = Date.now();
    const hit = cache.get(key);
    if (hit && hit.expiresAt > now) return hit.value;
    const value = load();
    if (cache.size >= 50_000) cache.clear();
    cache.set(key, { value, expiresAt: now + this.settings.credentialCacheMs });
    value.catch(() => {
      if (cache.get(key)?.value === value) cache.delete(key);
    });
    return value;
  }
}

function assertCanGrant(principal: Principal, role: Role): void {
  if (!hasRole(principal.role, role))
    throw new AppError('forbidden', `a ${principal.role} cannot grant the ${role} role`);
}

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

function publicUser(user: UserDoc) {
  return { id: user.id, email: user.email, role: user.role, createdAt: user.createdAt, updatedAt: user.updatedAt };
}

function publicTeam(team: TeamDoc) {
  return { id: team.id, name: team.name, createdAt: team.createdAt, updatedAt: team.updatedAt };
}

import type { IdentityConfig } from '../config.ts';
import { AppError } from '../errors.ts';
import { isId, newId, nowIso } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { Broadcast } from '../runtime/broadcast.ts';
import type { RateLimiter, RateLimitPolicy } from '../runtime/rate-limiter.ts';
import { platformScope } from '../store/collection.ts';
import { CredentialLookups, orgScope, type Caller } from './credential-lookups.ts';
import type { IdentityCollections, OrganizationDoc, TeamDoc, UserDoc } from './identity-store.ts';
import type { AccessTokens } from './jwt.ts';
import { OwnerGuard } from './owner-guard.ts';
import { hashPassword, verifyPassword } from './passwords.ts';
import { hasRole, isRole, type Principal, type Role } from '../roles.ts';
import { isApiKey, newRefreshToken, sha256 } from './secrets.ts';
import { ApiKeys, assertCanGrant } from './api-keys.ts';
import { isTestTenant, liveTenantOf, testTenantOf, type KeyMode } from '../test-mode.ts';

export type IdentitySettings = Pick<
  IdentityConfig,
  'refreshTokenTtlMs' | 'credentialCacheMs' | 'loginFailuresPerMinute'
>;

const unauthorized = (message = 'missing or invalid credentials') => new AppError('unauthorized', message);
const knownCaller = (caller: Caller | undefined): Caller => {
  if (!caller) throw unauthorized();
  return caller;
};
/** A member acting on live data, with its role as it is now; no role: no longer a member. */
const liveCaller = (tenantId: string, userId: string, role: Role | undefined): Caller => {
  if (!role) throw unauthorized();
  return { tenantId, role, userId, livemode: true };
};
/** An `Authorization` value carrying a bearer credential (RFC 6750 2.1's b64token, at most 4096 characters). */
const bearerCredential = /^Bearer [A-Za-z0-9._~+/=-]{1,4096}$/;

export class IdentityService {
  private readonly lookups: CredentialLookups;
  private readonly owners: OwnerGuard;
  /** The organization's API keys, live and test. */
  readonly apiKeys: ApiKeys;
  /** Told of each request on test data, with its tenant's default team (the built-in relay connects on it). */
  private testCallers?: (tenantId: string, defaultTeamId: string) => void;

  constructor(
    private readonly db: IdentityCollections,
    private readonly tokens: AccessTokens,
    private readonly limiter: RateLimiter,
    private readonly settings: IdentitySettings,
    private readonly log: Logger,
    broadcast?: Broadcast,
  ) {
    this.lookups = new CredentialLookups(db, settings.credentialCacheMs, broadcast);
    this.owners = new OwnerGuard(db);
    this.apiKeys = new ApiKeys(db, this.lookups);
  }

  /** Where a frontend hears of requests on test data. */
  onTestCaller(listener: (tenantId: string, defaultTeamId: string) => void): void {
    this.testCallers = listener;
  }

  /** Every process drops a revoked key, and a changed or removed member, from its cache before the change answers; the cache expiry stays the fallback. */
  listenForRevocations(): Promise<void> {
    return this.lookups.listenForRevocations();
  }

  async signup(input: { organizationName: string; email: string; password: string }) {
    const email = normalizeEmail(input.email);
    let tenantId = newId('org');
    // An organization's id never reads as a test tenant's (one in 2^30 would).
    while (isTestTenant(tenantId)) tenantId = newId('org');
    const userId = newId('usr');
    const teamId = newId('team');
    const now = nowIso();
    // The login index entry is the email's claim: a second signup with it fails here, before anything else exists.
    await this.db.loginIndex.insertOne(platformScope, {
      id: email,
      tenantId: platformScope.tenantId,
      orgId: tenantId,
      userId,
    });
    const passwordHash = await hashPassword(input.password);
    const scope = orgScope(tenantId);
    const org: OrganizationDoc = {
      id: tenantId,
      tenantId,
      name: input.organizationName,
      defaultTeamId: teamId,
      createdAt: now,
      updatedAt: now,
    };
    const team: TeamDoc = { id: teamId, tenantId, name: 'Default', createdAt: now, updatedAt: now };
    const user: UserDoc = {
      id: userId,
      tenantId,
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
    if (stored && stored.orgId === principal.tenantId) await this.revokeFamily(stored.familyId);
  }

  /**
   * Resolves an `Authorization` header value to the caller, or throws 401:
   * at once for an API key already known, so the usual request waits on
   * nothing here.
   */
  authenticate(authorization: string | undefined, mode?: string): Caller | Promise<Caller> {
    if (authorization === undefined || !bearerCredential.test(authorization)) throw unauthorized();
    const credential = authorization.slice('Bearer '.length);
    if (!isApiKey(credential)) return this.authenticateToken(credential, mode);
    const caller = this.lookups.callerForApiKey(credential);
    return caller instanceof Promise ? caller.then(knownCaller) : knownCaller(caller);
  }

  /**
   * A member's access token works on live data, or with `X-Relaybox-Mode: test` on the organization's test data
   * (made on first use). A token this process verified before, of a member whose role is in memory, answers at once.
   */
  private authenticateToken(credential: string, mode?: string): Caller | Promise<Caller> {
    if (mode !== undefined && mode !== 'live' && mode !== 'test')
      throw new AppError('bad_request', 'X-Relaybox-Mode is live or test', {
        details: [{ path: '/X-Relaybox-Mode', message: 'must be live or test' }],
      });
    const known = mode === 'test' ? undefined : this.tokens.known(credential);
    if (known && isRole(known.role)) {
      // The member's role as it is now: a changed role applies at once, a removed member's token no longer works.
      const role = this.lookups.memberRole(known.org, known.sub);
      if (!(role instanceof Promise)) return liveCaller(known.org, known.sub, role);
    }
    return this.verifiedToken(credential, mode);
  }

  private async verifiedToken(credential: string, mode?: string): Promise<Caller> {
    const claims = await this.tokens.verify(credential);
    if (!claims || !isRole(claims.role)) throw unauthorized();
    const role = await this.lookups.memberRole(claims.org, claims.sub);
    if (mode === 'test' && role) {
      // The member keeps its role; the test tenant is made the first time anyone looks at it (at once after that: cached).
      return { tenantId: await this.apiKeys.testTenant(claims.org), role, userId: claims.sub, livemode: false };
    }
    return liveCaller(claims.org, claims.sub, role);
  }

  /** The team a request acts in: the `X-Team-Id` header's, or (no header) the organization's default team, at once when the organization is known. */
  resolveTeam(caller: Caller, teamHeader: string | undefined): Principal | Promise<Principal> {
    const org = this.lookups.organization(caller.tenantId);
    return org instanceof Promise
      ? org.then((loaded) => this.teamOf(caller, loaded, teamHeader))
      : this.teamOf(caller, org, teamHeader);
  }

  private teamOf(
    caller: Caller,
    org: OrganizationDoc | undefined,
    teamHeader: string | undefined,
  ): Principal | Promise<Principal> {
    if (!org) throw unauthorized();
    if (caller.livemode === false) this.testCallers?.(caller.tenantId, org.defaultTeamId);
    if (teamHeader === undefined) return { ...caller, teamId: org.defaultTeamId };
    return this.namedTeam(caller, teamHeader);
  }

  private async namedTeam(caller: Caller, teamHeader: string): Promise<Principal> {
    // Present but empty or not exactly an id (extra bytes, other characters) is the client's error, never the default team.
    if (!isId('team', teamHeader))
      throw new AppError('bad_request', 'X-Team-Id is not a team id', {
        details: [{ path: '/X-Team-Id', message: 'is not a team id' }],
      });
    if (!(await this.lookups.teamExists(caller.tenantId, teamHeader)))
      throw new AppError('not_found', 'team not found');
    return { ...caller, teamId: teamHeader };
  }

  /** The organization's own rate limit, if it has one: at once when the organization is known. */
  rateLimitOf(tenantId: string): RateLimitPolicy | undefined | Promise<RateLimitPolicy | undefined> {
    const org = this.lookups.organization(tenantId);
    return org instanceof Promise ? org.then((loaded) => loaded?.rateLimit) : org?.rateLimit;
  }

  async me(principal: Principal) {
    const scope = orgScope(principal.tenantId);
    const org = await this.lookups.organization(principal.tenantId);
    // A member is the organization's, whichever data it looks at.
    const user = principal.userId
      ? await this.db.users.findOne(orgScope(liveTenantOf(principal.tenantId)), { id: principal.userId })
      : null;
    const teams = await this.db.teams.find(scope, {}, { sort: { createdAt: 1 }, limit: 1000 });
    return {
      user: user ? publicUser(user) : null,
      apiKeyId: principal.apiKeyId ?? null,
      organization: org ? { id: liveTenantOf(org.id), name: org.name, defaultTeamId: org.defaultTeamId } : null,
      role: principal.role,
      livemode: !isTestTenant(principal.tenantId),
      teams: teams.map(publicTeam),
    };
  }

  /**
   * A key of the organization. A test key (`mode: "test"`) reaches only its
   * test data, whose tenant is made with the first one; a caller working on
   * test data makes test keys only.
   */
  async createMember(principal: Principal, input: { email: string; password: string; role: Role }) {
    assertLive(principal);
    assertCanGrant(principal, input.role);
    const email = normalizeEmail(input.email);
    const userId = newId('usr');
    await this.db.loginIndex.insertOne(platformScope, {
      id: email,
      tenantId: platformScope.tenantId,
      orgId: principal.tenantId,
      userId,
    });
    const now = nowIso();
    const user: UserDoc = {
      id: userId,
      tenantId: principal.tenantId,
      email,
      passwordHash: await hashPassword(input.password),
      role: input.role,
      createdAt: now,
      updatedAt: now,
    };
    if (user.role === 'owner') await this.owners.ensure(principal.tenantId);
    await this.db.users.insertOne(orgScope(principal.tenantId), user);
    if (user.role === 'owner') await this.owners.admit(principal.tenantId, user.id);
    return publicUser(user);
  }

  async listMembers(principal: Principal) {
    const users = await this.db.users.find(
      orgScope(liveTenantOf(principal.tenantId)),
      {},
      {
        sort: { createdAt: 1 },
        limit: 1000,
      },
    );
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
    if (leaves || joins) await this.owners.ensure(principal.tenantId);
    if (leaves) await this.owners.release(principal.tenantId, userId);
    const changed = await this.db.users.updateOne(
      orgScope(principal.tenantId),
      { id: userId, role: target.role },
      { $set: { role, updatedAt: nowIso() } },
    );
    // A refused compare-and-set after a release needs no undo: the member is no longer an owner.
    if (!changed) throw new AppError('conflict', 'the member changed meanwhile; read it again');
    if (joins) await this.owners.admit(principal.tenantId, userId);
    await this.lookups.forgetMember(principal.tenantId, userId);
    return publicUser(changed);
  }

  /** Removes a member: its sign-in and its sessions end, and its tokens stop working at once, on every process. */
  async removeMember(principal: Principal, userId: string): Promise<void> {
    const target = await this.memberToManage(principal, userId);
    if (target.role === 'owner') {
      await this.owners.ensure(principal.tenantId);
      await this.owners.release(principal.tenantId, userId);
    }
    if (!(await this.db.users.deleteOne(orgScope(principal.tenantId), { id: userId, role: target.role }))) {
      throw new AppError('conflict', 'the member changed meanwhile; read it again');
    }
    await this.db.loginIndex.deleteOne(platformScope, { id: target.email, userId });
    await this.db.refreshTokens.updateMany(
      platformScope,
      { userId, revokedAt: { $exists: false } },
      { $set: { revokedAt: nowIso() } },
    );
    await this.lookups.forgetMember(principal.tenantId, userId);
  }

  /** The member of the caller's organization it may manage: not one above its own role. */
  private async memberToManage(principal: Principal, userId: string): Promise<UserDoc> {
    assertLive(principal);
    const target = await this.db.users.findOne(orgScope(principal.tenantId), { id: userId });
    if (!target) throw new AppError('not_found', 'member not found');
    if (!hasRole(principal.role, target.role))
      throw new AppError('forbidden', `a ${principal.role} cannot manage a member whose role is ${target.role}`);
    return target;
  }

  async createTeam(principal: Principal, input: { name: string }) {
    const now = nowIso();
    const team: TeamDoc = {
      id: newId('team'),
      tenantId: principal.tenantId,
      name: input.name,
      createdAt: now,
      updatedAt: now,
    };
    await this.db.teams.insertOne(orgScope(principal.tenantId), team);
    return publicTeam(team);
  }

  async listTeams(principal: Principal) {
    const teams = await this.db.teams.find(orgScope(principal.tenantId), {}, { sort: { createdAt: 1 }, limit: 1000 });
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
}

/** Members are the organization's: a caller on its test data does not manage them. */
function assertLive(principal: Principal): void {
  if (isTestTenant(principal.tenantId)) throw new AppError('forbidden', 'members are managed with a live credential');
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

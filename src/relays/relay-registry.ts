import { randomBytes } from 'node:crypto';
import { AppError } from '../errors.ts';
import { sameSecret, sha256 } from '../identity/secrets.ts';
import type { Principal } from '../roles.ts';
import { newId, nowIso } from '../ids.ts';
import { isTestTenant } from '../test-mode.ts';
import type { HelloFrame, RelayCredential } from '../relay-protocol/frames.ts';
import { platformScope, type Store } from '../store/collection.ts';
import { relayCollections, type RelayDoc } from './relay-store.ts';

export const registrationTokenTtlMs = 30 * 60 * 1000;
const tokenPrefix = 'rbx_reg_';

interface RelayIndexDoc {
  [field: string]: unknown;
  id: string; // relay id
  tenantId: string;
  /** The tenant this entry points into (`tenantId` above is the platform scope); the stored name stays `orgId` so existing data reads. */
  orgId: string;
}

export type Registration =
  | {
      ok: true;
      relayId: string;
      tenantId: string;
      /** A first registration: the relay actor creates the relay with these on connect. */
      registration?: { teamId: string; secretHash: string };
      credential?: RelayCredential;
    }
  | { ok: false; code: 'unauthorized'; message: string };

/**
 * Relay identities: registration tokens (30 minutes, once, stored hashed),
 * the credential a relay keeps after registering, and reads of the relay
 * records (the relay actor is their one writer).
 */
export class RelayRegistry {
  private readonly db;
  private readonly index;

  constructor(store: Store) {
    this.db = relayCollections(store);
    this.index = store.collection<RelayIndexDoc>('relay_index');
  }

  async createToken(principal: Principal, tenantId: string): Promise<{ token: string; expiresAt: string }> {
    if (tenantId !== principal.tenantId) throw new AppError('not_found', 'tenant not found');
    if (isTestTenant(tenantId))
      throw new AppError(
        'forbidden',
        'test data is sent by the built-in simulated relay; register relays with a live credential',
      );
    const token = `${tokenPrefix}${randomBytes(32).toString('base64url')}`;
    const expiresAt = new Date(Date.now() + registrationTokenTtlMs).toISOString();
    await this.db.relayTokens.insertOne(platformScope, {
      id: sha256(token),
      tenantId: platformScope.tenantId,
      orgId: principal.tenantId,
      teamId: principal.teamId,
      expiresAt,
      createdAt: nowIso(),
    });
    return { token, expiresAt };
  }

  /** A hello: a registration token is claimed once and becomes a new relay with a credential; a credential finds its relay. */
  async register(hello: HelloFrame): Promise<Registration> {
    if (hello.registrationToken) return this.claim(hello);
    const relay = await this.authenticate(hello.credential!);
    if (!relay) return { ok: false, code: 'unauthorized', message: 'unknown relay credential' };
    return { ok: true, relayId: relay.id, tenantId: relay.tenantId };
  }

  /** The relay a stored credential belongs to (its hello, its uploads over HTTP); undefined for one that is not genuine. */
  async authenticate(credential: RelayCredential): Promise<RelayDoc | undefined> {
    const entry = await this.index.findOne(platformScope, { id: credential.relayId });
    const relay = entry ? await this.db.relays.findOne({ tenantId: entry.orgId }, { id: credential.relayId }) : null;
    return relay && sameSecret(relay.secretHash, sha256(credential.secret)) ? relay : undefined;
  }

  private async claim(hello: HelloFrame): Promise<Registration> {
    const now = nowIso();
    const token = await this.db.relayTokens.updateOne(
      platformScope,
      { id: sha256(hello.registrationToken!), usedAt: { $exists: false }, expiresAt: { $gt: now } },
      { $set: { usedAt: now } },
    );
    if (!token)
      return { ok: false, code: 'unauthorized', message: 'registration token is unknown, expired or already used' };
    const secret = randomBytes(32).toString('base64url');
    const relayId = newId('relay');
    await this.index.insertOne(platformScope, { id: relayId, tenantId: platformScope.tenantId, orgId: token.orgId });
    return {
      ok: true,
      relayId,
      tenantId: token.orgId,
      registration: { teamId: token.teamId, secretHash: sha256(secret) },
      credential: { relayId, secret },
    };
  }

  async list(principal: Principal) {
    return (
      await this.db.relays.find({ tenantId: principal.tenantId }, {}, { sort: { registeredAt: 1 }, limit: 1000 })
    ).map(publicRelay);
  }

  async one(principal: Principal, id: string) {
    const doc = await this.db.relays.findOne({ tenantId: principal.tenantId }, { id });
    if (!doc) throw new AppError('not_found', 'relay not found');
    return { ...publicRelay(doc), health: doc.health };
  }
}

export function publicRelay(doc: RelayDoc) {
  return {
    id: doc.id,
    name: doc.name,
    status: doc.status,
    lastHeartbeat: doc.lastHeartbeat,
    systemInfo: doc.systemInfo,
    registeredAt: doc.registeredAt,
    teamId: doc.teamId,
    phoneNumbers: doc.phoneNumbers,
    capacity: doc.capacity,
    createdAt: doc.createdAt,
    updatedAt: doc.updatedAt,
    // Only an online relay's last heartbeat says anything about it now.
    degraded: doc.status === 'online' ? (doc.degraded ?? null) : null,
  };
}

import { AppError } from './errors.ts';

export const roles = ['viewer', 'member', 'admin', 'owner'] as const;
export type Role = (typeof roles)[number];

const rank: Record<Role, number> = { viewer: 0, member: 1, admin: 2, owner: 3 };

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (roles as readonly string[]).includes(value);
}

export function hasRole(actual: Role, needed: Role): boolean {
  return rank[actual] >= rank[needed];
}

export function requireRole(actual: Role, needed: Role): void {
  if (!hasRole(actual, needed)) throw new AppError('forbidden', `this needs the ${needed} role or higher`);
}

/** Who is calling: resolved once per request by the authentication step. */
export interface Principal {
  tenantId: string;
  role: Role;
  /** The team the request acts in (X-Team-Id, or the organization's default team). */
  teamId: string;
  userId?: string;
  apiKeyId?: string;
  /** False when the caller works on the organization's test data (a test key): `tenantId` is then its test tenant. */
  livemode?: boolean;
}

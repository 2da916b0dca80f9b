import type { Store } from '../store/collection.ts';

export interface RelayHealth {
  cpuPercent: number;
  memoryUsedBytes: number;
  memoryTotalBytes: number;
  messagesPerMinute: number;
  queueDepth: number;
  reportedAt: string;
}

export interface RelayDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  /** The team its inbound messages belong to: the team of whoever created its registration token. */
  teamId: string;
  name: string;
  status: 'online' | 'offline';
  /** The frontend process holding its socket while online. */
  node: string | null;
  /** Sends it accepts in flight (its last `ready`). */
  capacity: number;
  /** Phone numbers it sends from; a message with that fromNumber goes to it. */
  phoneNumbers: string[];
  lastHeartbeat: string | null;
  systemInfo: { hostOsVersion: string; hostname: string };
  health: RelayHealth | null;
  /** Why the relay cannot send, from its last heartbeat (a stuck Messages app); null or absent when it can. */
  degraded?: string | null;
  /** SHA-256 of the relay credential's secret. */
  secretHash: string;
  /** Highest chat.db ROWID of inbound rows durably stored. */
  inboundCursor: number;
  /** Increases on every connection: what a stale disconnect or timer compares against. */
  session: number;
  registeredAt: string;
  createdAt: string;
  updatedAt: string;
}

export interface RelayTokenDoc {
  [field: string]: unknown;
  id: string; // sha-256 of the raw token
  tenantId: string;
  /** The tenant this entry points into (`tenantId` above is the platform scope); the stored name stays `orgId` so existing data reads. */
  orgId: string;
  teamId: string;
  expiresAt: string;
  usedAt?: string;
  createdAt: string;
}

export function relayCollections(store: Store) {
  return {
    relays: store.collection<RelayDoc>('relays', [{ keys: { tenantId: 1, status: 1 } }]),
    relayTokens: store.collection<RelayTokenDoc>('relay_tokens'),
  };
}

export type RelayCollections = ReturnType<typeof relayCollections>;

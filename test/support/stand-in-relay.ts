import { randomUUID } from 'node:crypto';
import type { ServerFrame, SendFrame } from '../../src/relay-protocol/frames.ts';
import type { RelayDoc } from '../../src/relays/relay-store.ts';
import type { TestApp } from './test-app.ts';

/**
 * A relay at the actor level: it registers with the tenant actor and receives
 * its frames through the same addressed delivery the WebSocket gateway uses,
 * and reports statuses as the gateway would.
 */
export class StandInRelay {
  readonly id = `relay_${randomUUID().slice(0, 12)}`;
  readonly frames: ServerFrame[] = [];
  private readonly unsubscribe: () => void;
  session = 0;

  constructor(private readonly t: TestApp, private readonly orgId: string, private readonly teamId: string, readonly opts: { capacity: number; phoneNumbers?: string[]; name?: string }) {
    this.unsubscribe = t.app.messaging.link.onFrame((d) => {
      if (d.relayId === this.id && d.session === this.session) this.frames.push(d.frame);
    });
  }

  get sends(): SendFrame[] {
    return this.frames.filter((f): f is SendFrame => f.type === 'send');
  }

  async connect(): Promise<void> {
    this.session++;
    const now = new Date().toISOString();
    const relays = this.t.app.store.collection<RelayDoc>('relays');
    const doc: RelayDoc = {
      id: this.id, tenantId: this.orgId, teamId: this.teamId, name: this.opts.name ?? this.id, status: 'online', node: this.t.app.runtime.nodeId,
      capacity: this.opts.capacity, phoneNumbers: this.opts.phoneNumbers ?? [], lastHeartbeat: now, systemInfo: { hostOsVersion: '15.1', hostname: 'stand-in' },
      health: null, secretHash: 'x', inboundCursor: 0, session: this.session, registeredAt: now, createdAt: now, updatedAt: now,
    };
    const existing = await relays.updateOne({ tenantId: this.orgId }, { id: this.id }, { $set: { status: 'online', node: doc.node, session: this.session, lastHeartbeat: now } });
    if (!existing) await relays.insertOne({ tenantId: this.orgId }, doc);
    await this.t.app.runtime.send('tenant', this.orgId, { kind: 'relay-online', relayId: this.id, session: this.session });
  }

  report(messageId: string, status: 'sent' | 'delivered' | 'read' | 'failed', error?: string): Promise<string> {
    return this.t.app.runtime.send('tenant', this.orgId, { kind: 'status', relayId: this.id, session: this.session, messageId, status, at: new Date().toISOString(), ...(error ? { error } : {}) });
  }

  ready(capacity: number): Promise<string> {
    return this.t.app.runtime.send('tenant', this.orgId, { kind: 'relay-ready', relayId: this.id, session: this.session, capacity });
  }

  disconnect(reason = 'closed'): Promise<string> {
    return this.t.app.runtime.send('tenant', this.orgId, { kind: 'relay-offline', relayId: this.id, session: this.session, reason });
  }

  close(): void {
    this.unsubscribe();
  }
}

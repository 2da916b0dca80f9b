import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServerFrame } from '../../src/relay-protocol/frames.ts';
import { RelaySocket } from './relay-socket.ts';
import { request } from './test-app.ts';
import type { PromAlert, Prometheus } from './prometheus.ts';
import { until } from './prometheus.ts';

/** An organization with an owner token, talking to a running service over HTTP. */
export interface Tenant {
  orgId: string;
  token: string;
  send(body?: string): Promise<number>;
}

export async function tenant(base: string, name: string): Promise<Tenant> {
  const suffix = randomUUID().slice(0, 8);
  const res = await request(base, 'POST', '/api/v1/auth/signup', {
    body: {
      organizationName: `${name} ${suffix}`,
      email: `${name}-${suffix}@example.com`,
      password: 'a long password',
    },
  });
  assert.equal(res.status, 201, res.text);
  const token = res.body.accessToken as string;
  let n = 0;
  return {
    orgId: res.body.organization.id as string,
    token,
    async send(body = `hello ${++n}`) {
      return (await request(base, 'POST', '/api/v1/messages', { token, body: { to: '+14155550100', body } })).status;
    },
  };
}

/**
 * A relay on a real socket that reports every send it is given as sent, then
 * delivered: an organization's Mac with its relay agent running.
 */
export class AnsweringRelay {
  private socket: RelaySocket | undefined;
  /** Sends this relay was given. */
  sends = 0;
  private credential: { relayId: string; secret: string } | undefined;

  private constructor(
    private readonly base: string,
    private readonly org: Tenant,
  ) {}

  static async register(base: string, org: Tenant): Promise<AnsweringRelay> {
    const relay = new AnsweringRelay(base, org);
    const token = await request(base, 'POST', `/api/v1/tenants/${org.orgId}/relay-tokens`, { token: org.token });
    assert.equal(token.status, 201, token.text);
    await relay.connect({ registrationToken: token.body.token as string });
    return relay;
  }

  private async connect(auth: Parameters<RelaySocket['hello']>[0]): Promise<void> {
    const s = await RelaySocket.open(this.base);
    s.ws.on('message', (data) => {
      const frame = JSON.parse(String(data)) as ServerFrame;
      if (frame.type !== 'send') return;
      this.sends++;
      const at = () => new Date().toISOString();
      const report = { type: 'status', messageId: frame.messageId, attempt: frame.attempt };
      s.send({ ...report, status: 'sent', at: at(), guid: `GUID-${frame.messageId}` });
      setTimeout(() => s.ws.readyState === s.ws.OPEN && s.send({ ...report, status: 'delivered', at: at() }), 50);
    });
    s.hello(auth);
    const welcome = await s.next('welcome');
    this.credential ??= welcome.credential;
    s.send({ type: 'ready', capacity: 20 });
    s.beat(welcome.heartbeatIntervalMs);
    this.socket = s;
  }

  /** The Mac goes to sleep: its socket closes. */
  async disconnect(): Promise<void> {
    const s = this.socket!;
    s.close();
    await s.closed;
  }

  async reconnect(): Promise<void> {
    await this.connect({ credential: this.credential! });
  }

  close(): void {
    this.socket?.close();
  }
}

/** Firing instances of `alertname` matching `labels`. */
export function firing(alerts: PromAlert[], alertname: string, labels: Record<string, string> = {}): PromAlert[] {
  return alerts.filter(
    (a) =>
      a.state === 'firing' &&
      a.labels.alertname === alertname &&
      Object.entries(labels).every(([k, v]) => a.labels[k] === v),
  );
}

export interface Timing {
  alert: string;
  backend: string;
  firedAfterS: number;
  resolvedAfterS?: number;
}

/** Waits for the alert to fire, and returns how long after `since` it was first seen firing. */
export async function firesWithin(
  prom: Prometheus,
  alert: string,
  labels: Record<string, string>,
  since: number,
  boundMs: number,
): Promise<{ seconds: number; instance: PromAlert }> {
  const instance = await until(`${alert} ${JSON.stringify(labels)} firing`, boundMs, async () =>
    firing(await prom.alerts(), alert, labels).at(0),
  );
  return { seconds: (Date.now() - since) / 1000, instance };
}

/** Waits until no instance of the alert matching `labels` fires. */
export async function resolvesWithin(
  prom: Prometheus,
  alert: string,
  labels: Record<string, string>,
  since: number,
  boundMs: number,
): Promise<number> {
  await until(`${alert} ${JSON.stringify(labels)} resolved`, boundMs, async () =>
    firing(await prom.alerts(), alert, labels).length === 0 ? true : undefined,
  );
  return (Date.now() - since) / 1000;
}

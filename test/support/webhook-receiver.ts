import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface ReceivedDelivery {
  headers: Record<string, string>;
  body: string;
  json: any;
  at: number;
  path: string;
}

export type Responder = (req: ReceivedDelivery, res: ServerResponse) => void | Promise<void>;

/** A webhook endpoint on 127.0.0.1 that records every request and answers as `respond` says (default 200). */
export class WebhookReceiver {
  readonly received: ReceivedDelivery[] = [];
  respond: Responder = (_req, res) => void res.writeHead(200).end('ok');
  inFlight = 0;
  maxInFlight = 0;
  private readonly server = createServer((req, res) => void this.handle(req, res));
  private waiters: Array<() => void> = [];

  static async start(): Promise<WebhookReceiver> {
    const r = new WebhookReceiver();
    await new Promise<void>((resolve) => r.server.listen(0, '127.0.0.1', resolve));
    return r;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      json = undefined;
    }
    const delivery = { headers, body, json, at: Date.now(), path: req.url ?? '' };
    this.received.push(delivery);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
    try {
      await this.respond(delivery, res);
    } finally {
      this.inFlight--;
    }
  }

  /** Resolves once `count` requests have arrived; rejects after `timeoutMs`. */
  async waitFor(count: number, timeoutMs = 15_000): Promise<ReceivedDelivery[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.received.length < count) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`expected ${count} deliveries, got ${this.received.length}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.received;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** The receivers a suite starts as its tests need them, stopped together after it. */
export class WebhookReceivers {
  private readonly started: WebhookReceiver[] = [];

  /** A new receiver, stopped by `stopAll`. */
  readonly start = async (): Promise<WebhookReceiver> => {
    const r = await WebhookReceiver.start();
    this.started.push(r);
    return r;
  };

  async stopAll(): Promise<void> {
    await Promise.all(this.started.map((r) => r.stop()));
  }
}

/**
 * What a receiver does: the reference verifier of Standard Webhooks, then the
 * hex signature of the body; answers the verified payload. `whsec`: the
 * library's default options, the key being the decoded bytes; `raw`: the
 * secret's own bytes (`format: 'raw'`).
 */
export function verifySignature(d: ReceivedDelivery, secret: string, format: 'whsec' | 'raw' = 'raw'): any {
  const whsec = format === 'whsec';
  const payload = (whsec ? new Webhook(secret) : new Webhook(secret, { format: 'raw' })).verify(d.body, d.headers);
  const key = whsec ? Buffer.from(secret.slice('whsec_'.length), 'base64') : Buffer.from(secret, 'utf8');
  assert.equal(d.headers['x-webhook-signature'], createHmac('sha256', key).update(d.body).digest('hex'));
  return payload;
}

import WebSocket from 'ws';
import type { ServerFrame } from '../../src/relay-protocol/frames.ts';

const idleHealth = { cpuPercent: 5, memoryUsedBytes: 1, memoryTotalBytes: 2, messagesPerMinute: 0, queueDepth: 0 };

/** A bare protocol client: what a relay agent says and hears, with no agent logic in between. */
export class RelaySocket {
  readonly frames: ServerFrame[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => this.frames.push(JSON.parse(String(data))));
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
  }

  static async open(base: string): Promise<RelaySocket> {
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/api/v1/relays/connect`);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return new RelaySocket(ws);
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  hello(
    auth: { registrationToken: string } | { credential: { relayId: string; secret: string } },
    extra: Record<string, unknown> = {},
  ): void {
    this.send({
      type: 'hello',
      ...auth,
      name: 'Test Mac',
      systemInfo: { hostOsVersion: '15.1', hostname: 'test-mac' },
      agentVersion: '1.0.0',
      ...extra,
    });
  }

  async next<T extends ServerFrame['type']>(
    type: T,
    match: (f: Extract<ServerFrame, { type: T }>) => boolean = () => true,
    timeoutMs = 5_000,
  ): Promise<Extract<ServerFrame, { type: T }>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.frames.find((f) => f.type === type && match(f as Extract<ServerFrame, { type: T }>));
      if (found) return found as Extract<ServerFrame, { type: T }>;
      if (Date.now() > deadline)
        throw new Error(`no ${type} frame within ${timeoutMs} ms; got ${JSON.stringify(this.frames).slice(0, 500)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Heartbeats every `intervalMs` until the socket closes, as an agent sends them: a silent relay goes offline at the timeout. */
  beat(intervalMs: number): void {
    const beat = setInterval(() => this.send({ type: 'heartbeat', health: idleHealth }), intervalMs);
    void this.closed.then(() => clearInterval(beat));
  }

  close(): void {
    this.ws.close();
  }
}

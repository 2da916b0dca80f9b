/** A relay endpoint that records the agent's frames, and the agent as a child process: for the relay agent's tests. */
import { spawn, type ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';
import { agentFrame, type AgentFrame, type ServerFrame } from '../../src/relay-protocol/frames.ts';
import { parseFrame } from '../../src/relay-protocol/frame-parser.ts';

export interface Received {
  conn: number;
  frame: AgentFrame;
}

/** Accepts agent connections, validates every frame against the shared schema, and lets the test wait for frames. */
export class FakeRelayServer {
  readonly received: Received[] = [];
  readonly sockets: WebSocket[] = [];
  readonly invalid: string[] = [];
  private waiters: Array<() => void> = [];

  private constructor(private readonly wss: WebSocketServer) {
    wss.on('connection', (socket) => {
      const conn = this.sockets.push(socket) - 1;
      socket.on('message', (data) => {
        const parsed = parseFrame(data.toString(), agentFrame);
        if (parsed.ok) this.received.push({ conn, frame: parsed.frame });
        else this.invalid.push(parsed.error);
        for (const wake of this.waiters.splice(0)) wake();
      });
    });
  }

  static async start(): Promise<FakeRelayServer> {
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/api/v1/relays/connect' });
    await new Promise<void>((done) => wss.once('listening', done));
    return new FakeRelayServer(wss);
  }

  get url(): string {
    return `ws://127.0.0.1:${(this.wss.address() as AddressInfo).port}/api/v1/relays/connect`;
  }

  send(conn: number, frame: ServerFrame): void {
    this.sockets[conn]!.send(JSON.stringify(frame));
  }

  /** Resolves with the first received frame (from index `from` on) that matches. */
  async waitFor<T extends AgentFrame['type']>(
    type: T,
    match: (frame: Extract<AgentFrame, { type: T }>, conn: number) => boolean = () => true,
    { from = 0, timeoutMs = 8_000 } = {},
  ): Promise<{ conn: number; frame: Extract<AgentFrame, { type: T }>; index: number }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.received.findIndex(
        (r, i) => i >= from && r.frame.type === type && match(r.frame as Extract<AgentFrame, { type: T }>, r.conn),
      );
      if (index >= 0)
        return {
          conn: this.received[index]!.conn,
          frame: this.received[index]!.frame as Extract<AgentFrame, { type: T }>,
          index,
        };
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `no ${type} frame within the time limit; received: ${JSON.stringify(this.received.map((r) => r.frame.type))}`,
        );
      await new Promise<void>((wake) => {
        const timer = setTimeout(wake, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          wake();
        });
      });
    }
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.terminate();
    await new Promise<void>((done) => this.wss.close(() => done()));
  }
}

/** The arguments of an agent in simulator mode with its files under `dir`: a capacity of 5, chat.db read every 100 ms. */
export function simulatorArgs(server: string, dir: string, token: string): { args: string[]; chatDb: string } {
  const chatDb = join(dir, 'chat.db');
  const args = ['--server', server, '--state-dir', join(dir, 'state'), '--chat-db', chatDb, '--simulate'];
  return { args: [...args, '--capacity', '5', '--poll-ms', '100', '--token', token], chatDb };
}

export function startAgent(
  args: string[],
  env: Record<string, string> = {},
): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'packages/relay-agent/src/cli.ts', ...args], {
    cwd: new URL('../..', import.meta.url).pathname,
    env: { ...process.env, LOG_LEVEL: 'debug', RELAY_SIM_DELIVERY_MS: '300', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  return { child, output: () => output, exited };
}

/** The command line of an agent in simulator mode against a server: chat.db read every 100 ms, JSON logs. */
export function simulatedAgentArgs(serverUrl: string, stateDir: string, chatDb: string): string[] {
  const flags = { server: serverUrl, 'state-dir': stateDir, 'chat-db': chatDb, 'poll-ms': '100', 'log-format': 'json' };
  return ['--simulate', ...Object.entries(flags).flatMap(([flag, value]) => [`--${flag}`, value])];
}

import type { IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import type { Logger } from './agent-logger.ts';
import { frameLimits, serverFrame, type AgentFrame, type ServerFrame } from 'relaybox-relay-protocol/frames.ts';
import { parseFrame } from 'relaybox-relay-protocol/frame-parser.ts';
import { ReconnectBackoff } from './reconnect-backoff.ts';

export interface CloseInfo {
  code: number;
  reason: string;
  /** Set when the server refused the WebSocket upgrade with an HTTP answer. */
  httpStatus?: number;
}

export interface ConnectionHandlers {
  /** The socket is open; the handler sends `hello`. */
  onOpen(): void;
  onFrame(frame: ServerFrame): void;
  /** The socket is gone. Calling `stop()` in here prevents the reconnect. */
  onClose(info: CloseInfo): void;
  onReconnectScheduled(delayMs: number, attempt: number): void;
}

export interface RelayConnectionOptions {
  reconnectBaseMs: number;
  reconnectCapMs: number;
  /** A connection open this long resets the backoff. */
  reconnectStableMs: number;
  logger: Logger;
}

/** Missed pongs after which the connection is presumed dead and replaced. */
const livenessMissedIntervals = 3;

/**
 * One WebSocket to the server at a time, replaced after every drop with
 * exponential backoff and full jitter. Frames in are validated against the
 * protocol schemas; a frame that fails is logged and dropped, never acted on.
 */
export class RelayConnection {
  private socket: WebSocket | undefined;
  private readonly backoff: ReconnectBackoff;
  private stopped = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private stableTimer: NodeJS.Timeout | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private lastHeardMs = 0;

  constructor(
    private readonly url: string,
    private readonly handlers: ConnectionHandlers,
    private readonly options: RelayConnectionOptions,
  ) {
    this.backoff = new ReconnectBackoff(options.reconnectBaseMs, options.reconnectCapMs);
  }

  start(): void {
    this.stopped = false;
    this.connect();
  }

  /** Closes for good: no reconnect afterwards. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    this.clearConnectionTimers();
    const socket = this.socket;
    this.socket = undefined;
    if (socket && socket.readyState !== WebSocket.CLOSED) socket.close(1000, 'relay agent stopping');
  }

  get isOpen(): boolean {
    return this.socket?.readyState === WebSocket.OPEN;
  }

  /** Bytes queued in the socket but not yet written; callers hold back bulk frames while it is high. */
  get bufferedAmount(): number {
    return this.socket?.bufferedAmount ?? 0;
  }

  send(frame: AgentFrame): boolean {
    const socket = this.socket;
    if (!socket || socket.readyState !== WebSocket.OPEN) return false;
    socket.send(JSON.stringify(frame));
    return true;
  }

  /** Pings every `intervalMs` and drops a connection that has been silent for three intervals. */
  watchLiveness(intervalMs: number): void {
    clearInterval(this.pingTimer);
    this.lastHeardMs = Date.now();
    this.pingTimer = setInterval(() => {
      const socket = this.socket;
      if (!socket || socket.readyState !== WebSocket.OPEN) return;
      if (Date.now() - this.lastHeardMs > intervalMs * livenessMissedIntervals) {
        this.options.logger.warn({ silentMs: Date.now() - this.lastHeardMs }, 'server silent, dropping the connection');
        socket.terminate();
        return;
      }
      socket.ping();
    }, intervalMs);
  }

  private connect(): void {
    if (this.stopped) return;
    const socket = new WebSocket(this.url, {
      maxPayload: frameLimits.maxFrameBytes,
      handshakeTimeout: 15_000,
      perMessageDeflate: false,
    });
    this.socket = socket;
    let closed = false;
    let httpStatus: number | undefined;
    const finish = (code: number, reason: string) => {
      if (closed) return;
      closed = true;
      if (this.socket === socket) this.socket = undefined;
      this.clearConnectionTimers();
      const info: CloseInfo = { code, reason };
      if (httpStatus !== undefined) info.httpStatus = httpStatus;
      this.handlers.onClose(info);
      this.scheduleReconnect();
    };

    socket.on('open', () => {
      this.lastHeardMs = Date.now();
      this.stableTimer = setTimeout(() => this.backoff.reset(), this.options.reconnectStableMs);
      this.handlers.onOpen();
    });
    socket.on('message', (data, isBinary) => {
      this.lastHeardMs = Date.now();
      if (isBinary) {
        this.options.logger.warn('binary frame from server ignored');
        return;
      }
      const parsed = parseFrame(data.toString(), serverFrame);
      if (!parsed.ok) {
        this.options.logger.warn({ error: parsed.error }, 'invalid frame from server ignored');
        return;
      }
      this.handlers.onFrame(parsed.frame);
    });
    socket.on('pong', () => {
      this.lastHeardMs = Date.now();
    });
    socket.on('unexpected-response', (_req, res: IncomingMessage) => {
      httpStatus = res.statusCode;
      res.resume();
      socket.terminate();
      finish(1006, `server answered the upgrade with HTTP ${res.statusCode}`);
    });
    socket.on('error', (err) => {
      this.options.logger.debug({ err: err.message }, 'websocket error');
      finish(1006, err.message);
    });
    socket.on('close', (code, reason) => finish(code, reason.toString()));
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    const delayMs = this.backoff.nextDelayMs();
    this.handlers.onReconnectScheduled(delayMs, this.backoff.attempts);
    this.reconnectTimer = setTimeout(() => this.connect(), delayMs);
  }

  private clearConnectionTimers(): void {
    clearTimeout(this.stableTimer);
    clearInterval(this.pingTimer);
    this.stableTimer = undefined;
    this.pingTimer = undefined;
  }
}

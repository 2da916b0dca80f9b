import { isIP } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { parseWebhookUrl, resolveHost, type Lookup } from './address-guard.ts';

export interface AttemptResult {
  ok: boolean;
  /** null when no answer came (refused address, connection error, timeout). */
  responseStatus: number | null;
  error: string | null;
  /** From Retry-After on a 429 or 503. */
  retryAfterMs?: number;
  durationMs: number;
}

/** An answer body is read (so the connection can be reused) up to this much, then the connection is dropped. */
const maxAnswerBytes = 64 * 1024;

/**
 * Connections kept open to one origin at most, shared by the webhooks that
 * point at it. What bounds one webhook is its lane (WEBHOOK_CONCURRENCY
 * attempts at once, webhook-lanes.ts), far below this: a hanging endpoint
 * holds its own lane's slots and as many connections, never the others'.
 */
export const connectionsPerOrigin = 256;

/** A target the address guard refused when a connection was about to be made; its message is the reason. */
class RefusedTarget extends Error {}

/** Errors that mean the endpoint did not answer in time. */
const timeoutCodes = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * One HTTP attempt of a delivery, through one keep-alive client (undici
 * `Agent`: a pool of connections per origin). The address guard runs where a
 * connection is made: the host is resolved once per connection, every
 * address it resolves to is checked, and the socket goes to the checked
 * address (the URL's host name only travels in `Host` and TLS SNI), so what
 * was checked is what is reached, and a pooled connection only ever reaches
 * an address checked when it was opened. Redirects are answers like any other
 * non-2xx: never followed.
 */
export class WebhookSender {
  private readonly agent: Agent;

  constructor(private readonly opts: { allowPrivate: boolean; timeoutMs: number; lookup?: Lookup }) {
    this.agent = new Agent({
      connections: connectionsPerOrigin,
      pipelining: 1,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      connect: guardedConnector(opts),
    });
  }

  async attempt(rawUrl: string, headers: Record<string, string>, body: string): Promise<AttemptResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const parsed = parseWebhookUrl(rawUrl);
    if (!parsed.ok) return { ok: false, responseStatus: null, error: `url ${parsed.reason}`, durationMs: elapsed() };
    const url = parsed.url;
    const payload = Buffer.from(body);
    try {
      const answer = await this.send(url, headers, payload);
      const ok = answer.status >= 200 && answer.status < 300;
      const result: AttemptResult = {
        ok,
        responseStatus: answer.status,
        error: ok ? null : `HTTP ${answer.status}`,
        durationMs: elapsed(),
      };
      if ((answer.status === 429 || answer.status === 503) && answer.retryAfter) {
        const ms = retryAfterMs(answer.retryAfter);
        if (ms !== undefined) result.retryAfterMs = ms;
      }
      return result;
    } catch (err) {
      return { ok: false, responseStatus: null, error: this.describe(err), durationMs: elapsed() };
    }
  }

  /** Lets go of every connection; attempts still under way fail. */
  close(): void {
    this.agent.destroy().catch(() => undefined);
  }

  private async send(
    url: URL,
    headers: Record<string, string>,
    payload: Buffer,
  ): Promise<{ status: number; retryAfter: string | undefined }> {
    const res = await this.agent.request({
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      headers: { ...headers, 'content-length': String(payload.length), 'user-agent': 'Relaybox-Webhooks/1' },
      body: payload,
      signal: AbortSignal.timeout(this.opts.timeoutMs),
    });
    let read = 0;
    try {
      for await (const chunk of res.body) {
        read += (chunk as Buffer).length;
        if (read > maxAnswerBytes) break; // leaving the loop destroys the body and its connection
      }
    } catch {
      // The status is the answer; a body cut short does not change it.
    }
    const retryAfter = res.headers['retry-after'];
    return { status: res.statusCode, retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter };
  }

  private describe(err: unknown): string {
    if (err instanceof RefusedTarget) return err.message;
    const e = err as NodeJS.ErrnoException;
    if (e.name === 'TimeoutError' || e.name === 'AbortError' || timeoutCodes.has(e.code ?? ''))
      return `no answer within ${this.opts.timeoutMs} ms`;
    return `${e.code ?? 'error'}: ${e.message}`;
  }
}

/** Makes each new connection only after the address guard passed its host, and to the address it checked. */
function guardedConnector(opts: { allowPrivate: boolean; timeoutMs: number; lookup?: Lookup }) {
  const connect = buildConnector({ timeout: opts.timeoutMs });
  return (options: buildConnector.Options, callback: buildConnector.Callback): void => {
    const host = options.hostname.startsWith('[') ? options.hostname.slice(1, -1) : options.hostname;
    resolveHost(host, opts.allowPrivate, opts.lookup).then(
      (target) => {
        if (!target.ok) return callback(new RefusedTarget(target.reason), null);
        const servername = options.protocol === 'https:' && !isIP(host) ? host : undefined;
        connect({ ...options, hostname: target.address, servername }, callback);
      },
      (err: Error) => callback(err, null),
    );
  };
}

/** Retry-After in whole seconds or as an HTTP date. */
export function retryAfterMs(value: string, now = Date.now()): number | undefined {
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

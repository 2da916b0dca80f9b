import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { parseWebhookUrl, resolveTarget, type Lookup } from './address-guard.ts';

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
 * One HTTP attempt of a delivery. The host is resolved once per attempt and
 * the request goes to that address (the URL's host name only travels in
 * `Host` and TLS SNI), so what was checked is what is reached. Redirects are
 * answers like any other non-2xx: never followed.
 */
export class WebhookSender {
  private readonly httpAgent = new http.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64 });
  private readonly httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64 });

  constructor(private readonly opts: { allowPrivate: boolean; timeoutMs: number; lookup?: Lookup }) {}

  async attempt(rawUrl: string, headers: Record<string, string>, body: string): Promise<AttemptResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const parsed = parseWebhookUrl(rawUrl);
    if (!parsed.ok) return { ok: false, responseStatus: null, error: `url ${parsed.reason}`, durationMs: elapsed() };
    const url = parsed.url;
    const target = await resolveTarget(url, this.opts.allowPrivate, this.opts.lookup);
    if (!target.ok) return { ok: false, responseStatus: null, error: target.reason, durationMs: elapsed() };
    const secure = url.protocol === 'https:';
    const hostName = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const payload = Buffer.from(body);
    const options: https.RequestOptions = {
      method: 'POST',
      host: target.address,
      family: target.family,
      port: url.port || (secure ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      headers: {
        ...headers,
        host: url.host,
        'content-length': String(payload.length),
        'user-agent': 'Relaybox-Webhooks/1',
      },
      agent: secure ? this.httpsAgent : this.httpAgent,
      signal: AbortSignal.timeout(this.opts.timeoutMs),
    };
    if (secure && !isIP(hostName)) options.servername = hostName;
    try {
      const answer = await send(secure, options, payload);
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
      const e = err as NodeJS.ErrnoException;
      const error =
        e.name === 'TimeoutError' || e.name === 'AbortError'
          ? `no answer within ${this.opts.timeoutMs} ms`
          : `${e.code ?? 'error'}: ${e.message}`;
      return { ok: false, responseStatus: null, error, durationMs: elapsed() };
    }
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}

function send(
  secure: boolean,
  options: https.RequestOptions,
  payload: Buffer,
): Promise<{ status: number; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request(options, (res) => {
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > maxAnswerBytes) res.destroy();
      });
      res.on('close', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] }));
      res.on('error', () => undefined);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** Retry-After in whole seconds or as an HTTP date. */
export function retryAfterMs(value: string, now = Date.now()): number | undefined {
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

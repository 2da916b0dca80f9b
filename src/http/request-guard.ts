import type { HttpRequest } from '@trufflesuite/uws-js-unofficial';
import { AppError } from '../errors.ts';
import type { Method, RouteDef } from './route.ts';

export interface CopiedHeaders {
  /** Lower-cased names; a repeated header keeps its last value (a repeat that matters is refused below). */
  headers: Record<string, string>;
  /** Set when the request must be refused before anything reads its body or runs its handler. */
  refusal: AppError | undefined;
}

/**
 * Copies every header out of uWS and judges the request's framing (RFC 9112,
 * 6.3): more than one Content-Length, Content-Length beside Transfer-Encoding,
 * a transfer coding other than chunked or more than one Host are refused. uWS
 * reads the first Content-Length, so a proxy that reads another one would see
 * a different request boundary (request smuggling); the answer closes the
 * connection so nothing after the ambiguous head is read as a request.
 */
export function copyHeaders(req: HttpRequest, maxHeaderBytes: number): CopiedHeaders {
  const headers: Record<string, string> = {};
  let contentLengths = 0;
  let transferEncodings = 0;
  let hosts = 0;
  let bytes = 0;
  req.forEach((name, value) => {
    bytes += name.length + value.length + 4;
    if (name === 'content-length') contentLengths++;
    else if (name === 'transfer-encoding') transferEncodings++;
    else if (name === 'host') hosts++;
    headers[name] = value;
  });
  let refusal: AppError | undefined;
  if (bytes > maxHeaderBytes)
    refusal = new AppError('header_fields_too_large', `the header fields are larger than ${maxHeaderBytes} bytes`);
  else if (contentLengths > 1) refusal = badFraming('more than one Content-Length');
  else if (contentLengths > 0 && transferEncodings > 0)
    refusal = badFraming('both Content-Length and Transfer-Encoding');
  else if (
    transferEncodings > 1 ||
    (transferEncodings === 1 && headers['transfer-encoding']!.trim().toLowerCase() !== 'chunked')
  )
    refusal = badFraming('a transfer coding other than chunked');
  else if (hosts > 1) refusal = badFraming('more than one Host');
  return { headers, refusal };
}

const badFraming = (what: string) => new AppError('bad_request', `the request has ${what}`);

/** For a path no route of the request's method serves: the methods that do serve it (a 405's Allow header), if any. */
export function allowedMethods(routes: RouteDef[]): (path: string) => Method[] {
  const patterns = routes.map((r) => ({ method: r.method, pattern: patternOf(r.path) }));
  return (path) => [...new Set(patterns.filter((p) => p.pattern.test(path)).map((p) => p.method))];
}

function patternOf(path: string): RegExp {
  const escaped = path
    .split('/')
    .map((part) => (part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  return new RegExp(`^${escaped.join('/')}/?$`);
}

/**
 * The client's address: the socket's peer, or with `trustedProxyHops` proxies
 * in front, the address the outermost trusted proxy saw (that many entries
 * from the right of X-Forwarded-For; anything further left is the client's
 * own claim and not trusted).
 */
export function clientAddress(peer: string, forwardedFor: string | undefined, trustedProxyHops: number): string {
  if (trustedProxyHops === 0 || !forwardedFor) return peer;
  const hops = forwardedFor
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean);
  return hops[Math.max(0, hops.length - trustedProxyHops)] ?? peer;
}

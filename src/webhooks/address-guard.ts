import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * The SSRF guard: a webhook may only reach public addresses over http(s).
 * The WHATWG URL parser already turns every IPv4 notation (`2130706433`,
 * `0x7f000001`, `0177.0.0.1`, `127.1`) into dotted decimal and IPv6 into its
 * canonical form, so one classification of the parsed host covers them all;
 * IPv6 forms that carry an IPv4 address are judged by that address.
 */
export type Resolved = { ok: true; address: string; family: 4 | 6 } | { ok: false; reason: string };
export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };
export type Lookup = (host: string) => Promise<Array<{ address: string; family: number }>>;

const systemLookup: Lookup = (host) => dnsLookup(host, { all: true, verbatim: true });

/** Only plain unicast is public; every other range ipaddr.js names (private, loopback, reserved, ...) is refused. */
export function refusedAddress(text: string): string | undefined {
  if (!ipaddr.isValid(text)) return 'not an IP address';
  let addr = ipaddr.parse(text);
  if (addr.kind() === 'ipv6') {
    const v6 = addr as ipaddr.IPv6;
    const range = v6.range();
    const parts = v6.parts;
    // ::a.b.c.d (IPv4-compatible, deprecated) is classed unicast by ipaddr.js; it still reaches an IPv4 host.
    const compatible = parts.slice(0, 6).every((p) => p === 0) && (parts[6] !== 0 || parts[7]! > 1);
    if (range === 'ipv4Mapped' || compatible) addr = ipaddr.fromByteArray(v6.toByteArray().slice(12));
    else if (range !== 'unicast') return `${text} is a ${range} address`;
    else if (parts[0] === 0x64 && parts[1] === 0xff9b) return `${text} is a NAT64 address`;
  }
  const range = addr.range();
  if (range !== 'unicast') return `${addr.toString()} is a ${range} address`;
  if (cloudMetadata.has(addr.toString())) return `${addr.toString()} is a cloud metadata address`;
  return undefined;
}

/** Metadata services that sit on otherwise public-looking addresses (most are link-local and refused already). */
const cloudMetadata = new Set(['100.100.100.200', '192.0.0.192']);

/** Scheme and form only; the host is resolved at each delivery. */
export function parseWebhookUrl(raw: string): UrlCheck {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'is not a valid URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, reason: 'must be an http or https URL' };
  if (!url.hostname) return { ok: false, reason: 'has no host' };
  return { ok: true, url };
}

function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/**
 * Resolves the host once; the caller connects to the returned address and no
 * other (no second lookup, so no DNS rebinding between check and connect).
 * Every address a name resolves to must be public.
 */
export async function resolveTarget(url: URL, allowPrivate: boolean, lookup: Lookup = systemLookup): Promise<Resolved> {
  const host = bareHost(url);
  let addresses: Array<{ address: string; family: number }>;
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) }];
  } else {
    try {
      addresses = await lookup(host);
    } catch (err) {
      return { ok: false, reason: `${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'lookup failed'})` };
    }
    if (addresses.length === 0) return { ok: false, reason: `${host} does not resolve` };
  }
  if (!allowPrivate) {
    for (const a of addresses) {
      const refused = refusedAddress(a.address);
      if (refused) return { ok: false, reason: `refused: ${refused}` };
    }
  }
  const chosen = addresses[0]!;
  return { ok: true, address: chosen.address, family: chosen.family === 6 ? 6 : 4 };
}

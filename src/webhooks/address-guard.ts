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
/** `privateTarget`: refused for what the address or name is, which `WEBHOOK_ALLOW_PRIVATE` lifts (not for failing to resolve). */
export type Resolved =
  { ok: true; address: string; family: 4 | 6 } | { ok: false; reason: string; privateTarget?: true };
export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };
export type Lookup = (host: string) => Promise<Array<{ address: string; family: number }>>;

const systemLookup: Lookup = (host) => dnsLookup(host, { all: true, verbatim: true });

/**
 * Only globally reachable unicast is public. Refused: every range ipaddr.js
 * names other than unicast (private, loopback, reserved, ...), every block
 * of the IANA special-purpose address registries that is not globally
 * reachable (listed below, so the rule does not rest on ipaddr.js's naming),
 * and the cloud platforms' metadata and host endpoints.
 */
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
  const shown = addr.toString();
  const range = addr.range();
  if (range !== 'unicast') return `${shown} is a ${range} address`;
  const platform = platformEndpoints.get(shown);
  if (platform) return `${shown} is ${platform}`;
  const special = notGloballyReachable.find(([block]) => addr.kind() === block[0].kind() && addr.match(block));
  if (special) return `${shown} is in ${special[1]}, which is not globally reachable`;
  return undefined;
}

/**
 * The blocks of the IANA IPv4 and IPv6 Special-Purpose Address Registries
 * whose "Globally Reachable" is False (as of 2025). Most are also ranges
 * ipaddr.js names; the list is the rule, and the unit test walks it.
 */
export const specialPurposeBlocks: ReadonlyArray<[string, string]> = [
  ['0.0.0.0/8', '"this network" (RFC 791)'],
  ['10.0.0.0/8', 'private-use (RFC 1918)'],
  ['100.64.0.0/10', 'shared address space (RFC 6598)'],
  ['127.0.0.0/8', 'loopback (RFC 1122)'],
  ['169.254.0.0/16', 'link local (RFC 3927)'],
  ['172.16.0.0/12', 'private-use (RFC 1918)'],
  ['192.0.0.0/24', 'IETF protocol assignments (RFC 6890)'],
  ['192.0.2.0/24', 'documentation TEST-NET-1 (RFC 5737)'],
  ['192.88.99.0/24', 'deprecated 6to4 relay anycast (RFC 7526)'],
  ['192.168.0.0/16', 'private-use (RFC 1918)'],
  ['198.18.0.0/15', 'benchmarking (RFC 2544)'],
  ['198.51.100.0/24', 'documentation TEST-NET-2 (RFC 5737)'],
  ['203.0.113.0/24', 'documentation TEST-NET-3 (RFC 5737)'],
  ['240.0.0.0/4', 'reserved (RFC 1112)'],
  ['255.255.255.255/32', 'limited broadcast (RFC 919)'],
  ['::/128', 'the unspecified address (RFC 4291)'],
  ['::1/128', 'loopback (RFC 4291)'],
  ['::ffff:0:0/96', 'IPv4-mapped addresses (RFC 4291)'],
  ['64:ff9b:1::/48', 'local-use IPv4/IPv6 translation (RFC 8215)'],
  ['100::/64', 'discard-only (RFC 6666)'],
  ['100:0:0:1::/64', 'the dummy IPv6 prefix (RFC 9780)'],
  ['2001::/23', 'IETF protocol assignments (RFC 2928)'],
  ['2001:2::/48', 'benchmarking (RFC 5180)'],
  ['2001:10::/28', 'deprecated ORCHID (RFC 4843)'],
  ['2001:db8::/32', 'documentation (RFC 3849)'],
  ['2002::/16', '6to4 (RFC 3056)'],
  ['3fff::/20', 'documentation (RFC 9637)'],
  ['5f00::/16', 'segment routing SIDs (RFC 9602)'],
  ['fc00::/7', 'unique-local (RFC 4193)'],
  ['fe80::/10', 'link-local unicast (RFC 4291)'],
];

const notGloballyReachable = specialPurposeBlocks
  .filter(([cidr]) => cidr !== '::ffff:0:0/96') // judged by the IPv4 address it carries
  .map(([cidr, name]) => [ipaddr.parseCIDR(cidr), name] as const);

/**
 * Metadata and host endpoints of cloud platforms. Most sit in a refused
 * block already (169.254.169.254 link-local, fd00:ec2::254 unique-local,
 * 100.100.100.200 shared space, 192.0.0.192 IETF); Azure's WireServer is an
 * ordinary-looking public address that only the platform answers.
 */
export const platformEndpoints: ReadonlyMap<string, string> = new Map([
  ['169.254.169.254', 'the cloud instance metadata service (AWS, GCP, Azure, OCI and others)'],
  ['168.63.129.16', "Azure's platform endpoint (WireServer)"],
  ['fd00:ec2::254', "AWS's IPv6 instance metadata service"],
  ['100.100.100.200', "Alibaba Cloud's metadata service"],
  ['192.0.0.192', "Oracle Cloud's metadata service"],
]);

/**
 * Names that only mean something inside a network, refused before any
 * lookup: a resolver here may answer them with an address the checks above
 * would pass (a split-horizon name, a metadata alias).
 */
export function refusedName(host: string): string | undefined {
  const name = host.toLowerCase().replace(/\.$/, '');
  if (internalNames.has(name)) return `${name} is a cloud metadata or local name`;
  const suffix = internalSuffixes.find((s) => name.endsWith(s));
  return suffix ? `${name} is under ${suffix}, a name for local or private use` : undefined;
}

const internalNames = new Set(['localhost', 'metadata', 'metadata.goog', 'instance-data', 'metadata.google.internal']);
const internalSuffixes = ['.localhost', '.local', '.internal', '.home.arpa', '.intranet', '.lan', '.corp', '.private'];

/** Scheme and form only; the host is resolved at each delivery. */
export function parseWebhookUrl(raw: string): UrlCheck {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'is not a valid URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { ok: false, reason: 'must be an http or https URL' };
  if (!url.hostname) return { ok: false, reason: 'has no host' };
  return { ok: true, url };
}

function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/** A refused target as the API answers it when a URL is saved: an address or name refusal names the setting that lifts it. */
export function targetRefusal(target: Extract<Resolved, { ok: false }>): string {
  return target.privateTarget
    ? `${target.reason} (only public addresses are accepted; the server setting WEBHOOK_ALLOW_PRIVATE=true lifts this for local development)`
    : target.reason;
}

/**
 * Resolves the host once; the caller connects to the returned address and no
 * other (no second lookup, so no DNS rebinding between check and connect).
 * Every address a name resolves to must be public.
 */
export function resolveTarget(url: URL, allowPrivate: boolean, lookup: Lookup = systemLookup): Promise<Resolved> {
  return resolveHost(bareHost(url), allowPrivate, lookup);
}

/** As `resolveTarget`, for a bare host name or address (no brackets): what a connection about to be made checks. */
export async function resolveHost(
  host: string,
  allowPrivate: boolean,
  lookup: Lookup = systemLookup,
): Promise<Resolved> {
  let addresses: Array<{ address: string; family: number }>;
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) }];
  } else {
    const refused = allowPrivate ? undefined : refusedName(host);
    if (refused) return { ok: false, reason: `refused: ${refused}`, privateTarget: true };
    try {
      addresses = await lookup(host);
    } catch (err) {
      return {
        ok: false,
        reason: `${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'lookup failed'})`,
      };
    }
    if (addresses.length === 0) return { ok: false, reason: `${host} does not resolve` };
  }
  if (!allowPrivate) {
    for (const a of addresses) {
      const refused = refusedAddress(a.address);
      if (refused) return { ok: false, reason: `refused: ${refused}`, privateTarget: true };
    }
  }
  const chosen = addresses[0]!;
  return { ok: true, address: chosen.address, family: chosen.family === 6 ? 6 : 4 };
}

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { isIP, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import ipaddr from 'ipaddr.js';
import {
  parseWebhookUrl,
  platformEndpoints,
  refusedAddress,
  refusedName,
  resolveTarget,
  specialPurposeBlocks,
  type Lookup,
} from '../../src/webhooks/address-guard.ts';
import { WebhookSender } from '../../src/webhooks/webhook-sender.ts';

const host = (url: string) => {
  const parsed = parseWebhookUrl(url);
  assert.ok(parsed.ok, url);
  return parsed.url.hostname.replace(/^\[|\]$/g, '');
};

test('every notation of a refused address is refused', () => {
  for (const url of [
    'http://127.0.0.1/',
    'http://2130706433/',
    'http://0x7f000001/',
    'http://0177.0.0.1/',
    'http://127.1/',
    'http://0x7f.1/',
    'http://[::1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:7f00:1]/',
    'http://[::127.0.0.1]/',
    'http://[0:0:0:0:0:ffff:7f00:0001]/',
    'http://10.1.2.3/',
    'http://172.31.255.255/',
    'http://192.168.0.1/',
    'http://[::ffff:10.0.0.1]/',
    'http://[fc00::1]/',
    'http://[fdff::1]/',
    'http://169.254.169.254/',
    'http://[fe80::1]/',
    'http://[fd00:ec2::254]/',
    'http://100.100.100.200/',
    'http://192.0.0.192/',
    'http://100.64.0.1/',
    'http://100.127.255.254/',
    'http://224.0.0.251/',
    'http://239.255.255.250/',
    'http://[ff02::1]/',
    'http://240.0.0.1/',
    'http://255.255.255.255/',
    'http://192.0.2.1/',
    'http://198.51.100.1/',
    'http://203.0.113.1/',
    'http://198.18.0.1/',
    'http://[2001:db8::1]/',
    'http://0.0.0.0/',
    'http://0/',
    'http://[::]/',
    'http://[64:ff9b::7f00:1]/',
    'http://[2002:7f00:1::]/',
    'http://[2001::1]/',
  ]) {
    assert.ok(refusedAddress(host(url)), `${url} (${host(url)}) is refused`);
  }
});

test('every block of the IANA special-purpose registries that is not globally reachable is refused: its first, middle and last address', () => {
  for (const [cidr, name] of specialPurposeBlocks) {
    if (cidr === '::ffff:0:0/96') continue; // judged by the IPv4 address it carries: see the notations test and ::ffff:8.8.8.8 below
    const [base, bits] = ipaddr.parseCIDR(cidr);
    const bytes = base.toByteArray();
    const hostBits = bytes.length * 8 - bits;
    const withHostBits = (fill: (bit: number) => number) => {
      const out = [...bytes];
      for (let bit = 0; bit < hostBits; bit++) {
        const index = out.length - 1 - Math.floor(bit / 8);
        out[index] = (out[index]! & ~(1 << (bit % 8))) | (fill(bit) << (bit % 8));
      }
      return ipaddr.fromByteArray(out).toString();
    };
    for (const address of [
      withHostBits(() => 0),
      withHostBits((bit) => (bit === hostBits - 1 ? 1 : 0)),
      withHostBits(() => 1),
    ]) {
      assert.ok(refusedAddress(address), `${address} (${cidr}, ${name}) is refused`);
    }
  }
});

test('cloud metadata and platform endpoints are refused, by address and by name; public names and addresses next to them pass', () => {
  for (const address of platformEndpoints.keys()) assert.ok(refusedAddress(address), address);
  assert.match(refusedAddress('168.63.129.16')!, /Azure/);
  for (const address of ['168.63.129.15', '168.63.129.17', '100.128.100.200', '2001:4860:4860::8888'])
    assert.equal(refusedAddress(address), undefined, address);
  for (const name of [
    'metadata.google.internal',
    'METADATA.GOOGLE.INTERNAL.',
    'metadata.goog',
    'metadata',
    'instance-data',
    'instance-data.ec2.internal',
    'localhost',
    'api.localhost',
    'printer.local',
    'router.home.arpa',
  ]) {
    assert.ok(refusedName(name), name);
  }
  for (const name of ['hooks.example.com', 'internal.example.com', 'metadata.example.com', 'local.example'])
    assert.equal(refusedName(name), undefined, name);
});

test('public addresses pass, in IPv4, IPv6 and IPv4-mapped form', () => {
  for (const url of [
    'http://93.184.216.34/',
    'https://8.8.8.8/',
    'http://[2606:4700:4700::1111]/',
    'http://[::ffff:8.8.8.8]/',
    'http://1.1.1.1:8080/x',
  ]) {
    assert.equal(refusedAddress(host(url)), undefined, url);
  }
});

test('only http and https', () => {
  for (const url of [
    'ftp://93.184.216.34/',
    'file:///etc/passwd',
    'gopher://93.184.216.34/',
    'javascript:alert(1)',
    'not a url',
  ]) {
    assert.equal(parseWebhookUrl(url).ok, false, url);
  }
});

test('a name is resolved once; any private answer refuses it; the pinned address is the one checked', async () => {
  let lookups = 0;
  const rebinding: Lookup = async () =>
    ++lookups === 1 ? [{ address: '93.184.216.34', family: 4 }] : [{ address: '127.0.0.1', family: 4 }];
  const first = await resolveTarget(new URL('https://hooks.example.com/x'), false, rebinding);
  assert.deepEqual(first, { ok: true, address: '93.184.216.34', family: 4 });
  assert.equal(lookups, 1);
  const mixed: Lookup = async () => [
    { address: '93.184.216.34', family: 4 },
    { address: '10.0.0.5', family: 4 },
  ];
  const refused = await resolveTarget(new URL('https://hooks.example.com/x'), false, mixed);
  assert.equal(refused.ok, false);
  const failing: Lookup = async () => {
    throw Object.assign(new Error('nope'), { code: 'ENOTFOUND' });
  };
  assert.deepEqual(await resolveTarget(new URL('https://nowhere.example/'), false, failing), {
    ok: false,
    reason: 'nowhere.example does not resolve (ENOTFOUND)',
  });
});

test('at delivery: a refused address is a failed attempt with its reason and no connection; the connection goes to the address resolved once', async () => {
  let requests = 0;
  const hostHeaders: string[] = [];
  const server = createServer((req, res) => {
    requests++;
    hostHeaders.push(req.headers.host ?? '');
    res.writeHead(200).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  try {
    const guarded = new WebhookSender({ allowPrivate: false, timeoutMs: 2_000 });
    const refused = await guarded.attempt(`http://127.0.0.1:${port}/`, {}, '{}');
    assert.equal(refused.ok, false);
    assert.equal(refused.responseStatus, null);
    assert.match(refused.error!, /loopback/);
    const rebound = new WebhookSender({
      allowPrivate: false,
      timeoutMs: 2_000,
      lookup: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    assert.match((await rebound.attempt(`http://hooks.example.com:${port}/`, {}, '{}')).error!, /loopback/);
    for (const [address, reason] of [
      ['168.63.129.16', /Azure/],
      ['fd00:ec2::254', /unique/],
      ['100:0:0:1::7', /dummy IPv6 prefix/],
    ] as const) {
      const platform = new WebhookSender({
        allowPrivate: false,
        timeoutMs: 2_000,
        lookup: async () => [{ address, family: isIP(address) }],
      });
      assert.match((await platform.attempt(`http://hooks.example.com:${port}/`, {}, '{}')).error!, reason, address);
      platform.close();
    }
    let looked = 0;
    const named = new WebhookSender({
      allowPrivate: false,
      timeoutMs: 2_000,
      lookup: async () => (looked++, [{ address: '127.0.0.1', family: 4 }]),
    });
    assert.match(
      (await named.attempt(`http://metadata.google.internal:${port}/computeMetadata/v1/`, {}, '{}')).error!,
      /metadata/,
    );
    assert.equal(looked, 0, 'a metadata name is refused before any lookup');
    named.close();
    assert.equal(requests, 0, 'nothing reached the server');
    guarded.close();
    rebound.close();

    let lookups = 0;
    const pinned = new WebhookSender({
      allowPrivate: true,
      timeoutMs: 2_000,
      lookup: async () => (++lookups, [{ address: '127.0.0.1', family: 4 }]),
    });
    const ok = await pinned.attempt(`http://hooks.example.com:${port}/x`, {}, '{}');
    assert.equal(ok.ok, true, ok.error ?? '');
    assert.equal(lookups, 1, 'one lookup per connection');
    await new Promise((resolve) => setImmediate(resolve)); // the connection is back in its pool
    const again = await pinned.attempt(`http://hooks.example.com:${port}/x`, {}, '{}');
    assert.equal(again.ok, true, again.error ?? '');
    assert.equal(lookups, 1, 'the next attempt reuses the connection checked when it was opened');
    assert.deepEqual(
      hostHeaders,
      [`hooks.example.com:${port}`, `hooks.example.com:${port}`],
      'the name travels in Host, the connection goes to the pinned address',
    );
    pinned.close();
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

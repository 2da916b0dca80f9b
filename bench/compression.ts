/**
 * What compressing an answer costs and saves: a page of 100 messages (the
 * largest list page) and a 5,000-contact JSON export, compressed with gzip
 * (default level), brotli at the quality the server uses (4) and brotli's
 * default (11). Prints bytes, ratio and ms per answer (median of the runs).
 */
import zlib from 'node:zlib';

const now = '2026-01-01T00:00:00.000Z';
const message = (i: number) => ({
  id: `msg_${i.toString(36).padStart(12, '0')}`,
  status: 'delivered',
  direction: 'sent',
  to: `+1415555${String(1000 + (i % 9000))}`,
  from: null,
  body: `Your order ${10_000 + i} has shipped and will arrive on Tuesday.`,
  priority: 0,
  attachments: [],
  fromNumber: null,
  conversationId: `conv_${(i % 37).toString(36).padStart(20, 'x')}`,
  attempts: 1,
  lastError: null,
  relayId: 'relay_1',
  teamId: 'team_1',
  queuedAt: now,
  sentAt: now,
  deliveredAt: now,
  readAt: null,
  createdAt: now,
  updatedAt: now,
});
const contact = (i: number) => ({
  firstName: `First${i}`,
  lastName: `Last${i}`,
  phoneNumbers: [`+4915151${String(i).padStart(6, '0')}`],
  emailAddresses: [`person${i}@example.com`],
  tags: i % 3 ? ['customer'] : ['customer', 'vip'],
});

const answers = {
  'messages page (100)': JSON.stringify({
    data: Array.from({ length: 100 }, (_, i) => message(i)),
    pagination: { page: 1, limit: 100, total: 5000, totalPages: 50 },
  }),
  'contact export (5,000)': JSON.stringify(Array.from({ length: 5000 }, (_, i) => contact(i))),
};
const codecs: Record<string, (b: Buffer) => Buffer> = {
  'gzip (level 6)': (b) => zlib.gzipSync(b),
  'br quality 4 (served)': (b) => zlib.brotliCompressSync(b, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4 } }),
  'br quality 11 (default)': (b) => zlib.brotliCompressSync(b),
};

const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log('answer                   codec                     bytes      ratio   ms/answer');
for (const [name, text] of Object.entries(answers)) {
  const raw = Buffer.from(text);
  console.log(`${name.padEnd(24)} ${'none'.padEnd(25)} ${String(raw.length).padStart(9)}`);
  for (const [codec, compress] of Object.entries(codecs)) {
    let out = compress(raw);
    const times: number[] = [];
    for (let i = 0; i < 15; i++) {
      const t0 = performance.now();
      out = compress(raw);
      times.push(performance.now() - t0);
    }
    console.log(
      `${name.padEnd(24)} ${codec.padEnd(25)} ${String(out.length).padStart(9)} ${(raw.length / out.length).toFixed(1).padStart(8)}x ${median(times).toFixed(2).padStart(10)}`,
    );
  }
}

import { buildDashboardAssets, encodedBody } from '../src/dashboard/assets.ts';
import { parseCsv } from '../web/bulk-rows.ts';

/** The dashboard's build time at start, what the browser downloads, and the bulk preview's parse-and-check time. */
const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;

const started = performance.now();
const assets = await buildDashboardAssets();
const buildMs = performance.now() - started;
console.log(`build at start (esbuild, in memory): ${buildMs.toFixed(0)} ms`);
console.log('asset                        raw        gzip       brotli');
for (const a of [assets.app.script, assets.app.style, assets.redoc]) {
  const [gz, br] = await Promise.all([encodedBody(a, 'gzip'), encodedBody(a, 'br')]);
  console.log(
    `${a.path.replace(/\.[0-9a-f]{12}\./, '.').padEnd(28)} ${kb(a.body.length).padStart(10)} ${kb(gz.length).padStart(10)} ${kb(br.length).padStart(10)}`,
  );
}

// Numbers differ between runs: the phone rule keeps recent answers, and a repeat would only measure that cache.
const upload = (rows: number, first: number) =>
  ['to,body', ...Array.from({ length: rows }, (_, i) => `+49151${first + i},"Hello ${i}, see you"`)].join('\r\n');
parseCsv(upload(2_000, 60_000_000));
for (const [rows, first] of [
  [1_000, 50_000_000],
  [10_000, 51_000_000],
] as const) {
  const text = upload(rows, first);
  const t0 = performance.now();
  const parsed = parseCsv(text);
  console.log(
    `preview of ${rows.toLocaleString('en')} rows (parse and check, Node): ${(performance.now() - t0).toFixed(0)} ms, ${parsed.rows.length} rows`,
  );
}

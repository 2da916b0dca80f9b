/**
 * The webhook bench's receiver, in its own process so that it does not share
 * the service's event loop: a keep-alive HTTP server that answers 204 and
 * keeps, per delivery, the time from the event's `timestamp` to its arrival;
 * a URL with `?hang=<ms>` is answered only after that long, and not counted.
 * The parent asks over IPC: `{ op: 'count' }`, `{ op: 'reset' }` (forget the
 * latencies) and `{ op: 'latencies' }`; the first message it gets is the URL.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const latencies: number[] = [];
let count = 0;
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    // `?hang=<ms>`: the noisy neighbour's endpoint, which holds each request that long and is not counted.
    const hang = /[?&]hang=(\d+)/.exec(req.url ?? '');
    if (hang) return void setTimeout(() => res.writeHead(204).end(), Number(hang[1])).unref();
    count++;
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { timestamp: string };
    latencies.push(Date.now() - Date.parse(body.timestamp));
    res.writeHead(204).end();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.send!({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook` });
});
process.on('message', (m: { op: 'count' | 'reset' | 'latencies' }) => {
  if (m.op === 'reset') latencies.length = 0;
  process.send!(m.op === 'latencies' ? { latencies } : { count });
});
process.on('disconnect', () => process.exit(0));

/**
 * The ceiling for bench/send-path.ts: a bare uWebSockets.js server whose one
 * POST handler reads the JSON body and answers 201 with a small JSON, corked.
 * Prints `{"port":N}` once it listens on 127.0.0.1; exits on SIGTERM.
 */
import uWS from '@trufflesuite/uws-js-unofficial';

let accepted = 0;
const app = uWS.App();

app.post('/*', (res) => {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  const chunks: Buffer[] = [];
  res.onData((chunk, isLast) => {
    // uWS reuses the chunk's memory after this callback: copy it.
    chunks.push(Buffer.from(new Uint8Array(chunk).slice()));
    if (!isLast || aborted) return;
    let status = '201 Created';
    let body: string;
    try {
      const input = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { to?: unknown };
      body = JSON.stringify({ id: `msg_${++accepted}`, status: 'queued', to: input.to });
    } catch {
      status = '400 Bad Request';
      body = '{"error":"invalid json"}';
    }
    res.cork(() => {
      res.writeStatus(status).writeHeader('content-type', 'application/json; charset=utf-8').end(body);
    });
  });
});

app.listen('127.0.0.1', 0, (socket) => {
  if (!socket) {
    console.error('ceiling server could not listen');
    process.exit(1);
  }
  process.stdout.write(`${JSON.stringify({ port: uWS.us_socket_local_port(socket) })}\n`);
});

process.on('SIGTERM', () => process.exit(0));

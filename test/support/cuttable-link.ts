import net from 'node:net';

/**
 * A TCP hop between the app and the real MongoDB wire server that the test can
 * cut (connections refused), stall (connections accepted and never answered)
 * and restore.
 */
export async function cuttableLink(target: URL) {
  const sockets = new Set<net.Socket>();
  let stalled = false;
  const hold = (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
  };
  const dropAll = () => {
    for (const s of sockets) s.destroy();
  };
  const server = net.createServer((client) => {
    hold(client);
    if (stalled) return;
    const upstream = net.connect(Number(target.port || 27017), target.hostname);
    hold(upstream);
    client.pipe(upstream).pipe(client);
  });
  const listen = (port: number) =>
    new Promise<number>((resolve) =>
      server.listen(port, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)),
    );
  const port = await listen(0);
  return {
    port,
    cut: () =>
      new Promise<void>((resolve) => {
        if (!server.listening) return resolve();
        server.close(() => resolve());
        dropAll();
      }),
    /** Open connections are dropped; new ones are accepted and never answered, as a server that hangs. */
    stall: () => {
      stalled = true;
      dropAll();
    },
    restore: () => {
      if (stalled) {
        stalled = false;
        dropAll();
      }
      return server.listening ? Promise.resolve(port) : listen(port);
    },
  };
}

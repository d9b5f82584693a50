/**
 * TCP proxies for the example tests. `stallFirst`: a proxy that stalls one connection: everything passes both ways, except that the first
 * connection whose client sends `marker` (a `LISTEN "` to PostgreSQL, ioredis's `subscribe` to Redis) stops forwarding what
 * its client sends from that message on, without closing (a stalled path). Later connections pass, their markers
 * included.
 */
import { connect, createServer, type Socket } from 'node:net';

/**
 * Joins a client's connection and its upstream for a proxy: both kept in `sockets` while open, errors (the resets
 * a proxy causes, seen from either side) ignored, and either one closing closes the other.
 */
export function pairSockets(client: Socket, upstream: Socket, sockets: Set<Socket>): void {
  for (const socket of [client, upstream]) {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => {
      sockets.delete(socket);
      client.destroy();
      upstream.destroy();
    });
  }
}

export interface StallProxy {
  /** `url` with the proxy's host and port in place of the server's. */
  url: string;
  /** Whether a connection has been stalled. */
  stalled(): boolean;
  close(): Promise<void>;
}

/** Starts a proxy to the server of `url` (its host and port) on a free port of 127.0.0.1. */
export async function stallFirst(url: string, marker: string): Promise<StallProxy> {
  const target = new URL(url);
  const sockets = new Set<Socket>();
  let stalledOne = false;
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    let stalled = false;
    pairSockets(client, upstream, sockets);
    client.on('data', (chunk: Buffer) => {
      if (!stalledOne && chunk.includes(marker)) stalledOne = stalled = true;
      if (!stalled) upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(url);
  proxied.host = `127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url: proxied.toString(),
    stalled: () => stalledOne,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

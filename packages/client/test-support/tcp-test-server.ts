/**
 * A raw TCP server on 127.0.0.1 for the client's real-socket tests: `onConnection` handles each socket; `stop()`
 * closes the server and destroys every socket. For this package's own tests only (outside src/, not published).
 */
import { createServer, type Socket } from 'node:net';

export async function tcpTestServer(onConnection: (socket: Socket) => void): Promise<{ baseUrl: string; stop: () => void }> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => {});
    onConnection(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  // Not awaiting close(): a connection undici keeps in its pool would hold it open for seconds.
  const stop = () => {
    server.close();
    for (const socket of sockets) socket.destroy();
  };
  return { baseUrl: `http://127.0.0.1:${address.port}/v1`, stop };
}

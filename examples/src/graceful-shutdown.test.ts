/**
 * SIGTERM to a running example server (started as a user would, PORT=0): it stops accepting connections,
 * answers the request in flight, closes idle keep-alive connections, closes its Redis client, and exits 0;
 * `SHUTDOWN_TIMEOUT_MS` bounds the wait. Every wait here is for an event (an answer, a close, the exit);
 * vitest's test timeout ends one that has failed.
 */
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { isRedisServerInstalled, resolveTestRedis, type TestRedis } from '@petstore/storage-redis/testing';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startExample, stopExamples } from './spawn-example.js';

afterEach(stopExamples);

/** A raw HTTP/1.1 connection: what it has received, and a promise of its end. */
interface RawConnection {
  socket: Socket;
  received(): string;
  waitFor(pattern: RegExp): Promise<void>;
  /** Resolves when the other side has closed the connection. */
  closed: Promise<void>;
}

async function openConnection(url: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await once(socket, 'connect');
  let received = '';
  const checks = new Set<() => void>();
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString();
    for (const check of checks) check();
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => undefined); // a reset shows as 'close'
  const waitFor = (pattern: RegExp) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (pattern.test(received)) {
          checks.delete(check);
          resolve();
        }
      };
      checks.add(check);
      check();
      void closed.then(() => {
        checks.delete(check);
        if (!pattern.test(received)) reject(new Error(`closed before ${pattern}; received:\n${received}`));
      });
    });
  return { socket, received: () => received, waitFor, closed };
}

const KEY = 'shutdown-key-1';

describe.each(['fastify-server.ts', 'express-server.ts'])('SIGTERM to %s', (script) => {
  it('answers the request in flight, closes idle connections, refuses new ones, then exits 0', async () => {
    const server = await startExample(script, { PETSTORE_API_KEYS: `${KEY}:pro` });

    // An idle keep-alive connection: one request answered, then nothing.
    const idle = await openConnection(server.url);
    idle.socket.write('GET /health HTTP/1.1\r\nHost: example\r\n\r\n');
    await idle.waitFor(/\{"status":"ok"\}$/);

    // A request in flight: its headers, then half its body. `100 Continue` tells that the server is answering it.
    const slow = await openConnection(server.url);
    const body = JSON.stringify({ name: 'Dogs', description: 'Canine breeds' });
    slow.socket.write(
      `POST /v1/categories HTTP/1.1\r\nHost: example\r\nAuthorization: Bearer ${KEY}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`,
    );
    await slow.waitFor(/^HTTP\/1\.1 100 Continue\r\n\r\n$/);
    slow.socket.write(body.slice(0, 10));

    server.child.kill('SIGTERM');
    await server.waitForOutput(/SIGTERM: shutting down — no new connections, answering 1 request\(s\) in flight/);
    await idle.closed;
    await expect(openConnection(server.url)).rejects.toMatchObject({ code: 'ECONNREFUSED' });

    // Shutting down, the server still waits for the rest of the body (it has not exited), and answers it.
    expect(server.child.exitCode).toBeNull();
    slow.socket.write(body.slice(10));
    await slow.closed;
    const [head, answer] = slow.received().replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '').split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 201 Created\r\n/);
    expect(head).toMatch(/\r\nconnection: close\r\n/i);
    expect(JSON.parse(answer!)).toEqual({ id: 1, name: 'Dogs', description: 'Canine breeds' });

    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.printed()).toMatch(/\nshut down\n/);
  }, 30_000);
});

// The timeout is the shared helper's (also run on a fake clock in shutdown.test.ts): one framework suffices.
it('SIGTERM to fastify-server.ts exits 1 once SHUTDOWN_TIMEOUT_MS has passed with a request still in flight', async () => {
  const server = await startExample('fastify-server.ts', { PETSTORE_API_KEYS: `${KEY}:pro`, SHUTDOWN_TIMEOUT_MS: '300' });
  const stuck = await openConnection(server.url);
  stuck.socket.write(
    `POST /v1/categories HTTP/1.1\r\nHost: example\r\nAuthorization: Bearer ${KEY}\r\n` +
      `Content-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n`,
  );
  await stuck.waitFor(/^HTTP\/1\.1 100 Continue\r\n\r\n$/);
  server.child.kill('SIGTERM');

  // Exit 1 and this line come only from the SHUTDOWN_TIMEOUT_MS timer (its timing is tested on a fake clock).
  expect(await server.exited).toEqual({ code: 1, signal: null });
  expect(server.printed()).toContain('shutdown not finished after 300 ms: exiting with 1 request(s) in flight');
  await stuck.closed;
}, 30_000);

// Whether to run is decided without starting anything; the Redis is started (and stopped) around the tests.
const redisSkipReason =
  process.env['REDIS_URL'] || process.env['PETSTORE_REQUIRE_REDIS'] === '1' || isRedisServerInstalled()
    ? undefined
    : 'REDIS_URL is not set and redis-server is not installed';
if (redisSkipReason) console.warn(`[examples] Redis shutdown test skipped: ${redisSkipReason}`);

describe.skipIf(redisSkipReason !== undefined)('SIGTERM to a server on PETSTORE_REDIS_URL', () => {
  let redis: TestRedis | undefined;
  beforeAll(async () => {
    const found = await resolveTestRedis();
    if ('skipReason' in found) throw new Error(found.skipReason);
    redis = found;
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it.each(['fastify-server.ts', 'express-server.ts'])('%s closes its Redis client (QUIT) and exits 0', async (script) => {
    const url = redis!.url;
    const observer = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await observer.connect();
    try {
      const quitCalls = async () => Number(/cmdstat_quit:calls=(\d+)/.exec(await observer.info('commandstats'))?.[1] ?? 0);
      const server = await startExample(script, { PETSTORE_API_KEYS: `${KEY}:pro`, PETSTORE_REDIS_URL: url });
      const listed = await fetch(`${server.url}/v1/categories`, { headers: { authorization: `Bearer ${KEY}` } });
      expect(listed.status).toBe(200);
      const before = await quitCalls();

      server.child.kill('SIGTERM');
      expect(await server.exited).toEqual({ code: 0, signal: null });
      expect(await quitCalls()).toBeGreaterThan(before);
    } finally {
      observer.disconnect();
    }
  }, 30_000);
});

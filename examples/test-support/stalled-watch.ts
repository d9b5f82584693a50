/**
 * The example server's start-up when the managed keys' first watch gets no answer: the watch's connection (its
 * `LISTEN` to PostgreSQL, its `subscribe` to Redis) stalled by a proxy, once.
 */
import { expect } from 'vitest';
import { startExample } from '../src/spawn-example.js';
import { stallFirst } from './tcp-proxy.js';

const backends = {
  PostgreSQL: { variable: 'PETSTORE_DATABASE_URL', marker: 'LISTEN "' },
  Redis: { variable: 'PETSTORE_REDIS_URL', marker: 'subscribe' },
} as const;

/**
 * Starts the Fastify example on `url` through the proxy with `apiKey` (plan pro) and checks that it starts anyway,
 * prints the line naming the store's deadline (2 s here), answers a list request, prints that the watch is back once the
 * manager's retry (after 1 s) gets through, and exits 0 on SIGTERM.
 */
export async function checkStartWithStalledWatch(backend: keyof typeof backends, url: string, apiKey: string): Promise<void> {
  const { variable, marker } = backends[backend];
  const proxy = await stallFirst(url, marker);
  try {
    // The stalled watch is given up after this deadline; the list request below gets it too.
    const env = { [variable]: proxy.url, PETSTORE_API_KEYS: `${apiKey}:pro`, PETSTORE_CALL_TIMEOUT_MS: '2000' };
    const server = await startExample('fastify-server.ts', env);
    expect(server.output).toContain(
      `[petstore] key-change watch not started (${backend} did not answer within callTimeoutMs (2000 ms)); checking keys at the store until it starts\n`,
    );
    const listed = await fetch(`${server.url}/v1/categories`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(listed.status).toBe(200);
    expect(await listed.json()).toEqual(expect.any(Array));
    // The proxy lets the retry's LISTEN or subscribe pass.
    await server.waitForOutput(/\[petstore\] key-change watch is back; cached keys are trusted again\n/);
    expect(proxy.stalled()).toBe(true);
    server.child.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
  } finally {
    await proxy.close();
  }
}

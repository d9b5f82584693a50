/**
 * Both stores while the connection goes away under them, in both orders: the host closes its client first
 * (`quit()` or `disconnect()`, e.g. at shutdown) with calls in flight and a batch of consumes still pending, and
 * Redis goes first (the server killed) with calls in flight. Every pending call answers — its result, or the
 * store's failure (`service_unavailable`) — and no promise is left rejected without a handler, which would end a
 * host process (Node's default for an unhandled rejection).
 */
import { isPetstoreError, type ConsumeRequest } from '@petstore/core';
import { Redis, type Cluster } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { redisCategoryStore } from './category-store.js';
import { redisRateLimitStore } from './rate-limit-store.js';
import { isRedisServerInstalled, startRedisServer } from './testing/redis-server.js';
import { connect, connectCluster, skipCluster, skipRedis, GUARD_CALL_TIMEOUT_MS, track, uniquePrefix } from '../test-support/redis.js';

const request: ConsumeRequest = { windows: [{ name: 'minute', limit: 100, windowMs: 60_000 }], cost: 1, nowMs: 0, ban: undefined, banSubject: '' };
const idempotent = (label: string) => ({ key: label.padEnd(64, '0'), fingerprint: 'f'.repeat(64), retentionMs: 60_000 });

/**
 * Collects the rejections nobody handles from now on; `none()` waits until Node has reported any (it does so
 * after the microtasks of a turn) and asserts there were none.
 */
function watchUnhandledRejections() {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  return {
    async none() {
      for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
      process.off('unhandledRejection', onUnhandled);
      expect(unhandled).toEqual([]);
    },
  };
}

/** Resolves once `client` has ended (after `quit()`, `disconnect()`, or a lost connection it gives up on). */
async function ended(client: Redis | Cluster): Promise<void> {
  // Not events.once: it would reject on the 'error' (ECONNRESET) a killed server's connection emits first.
  if (client.status !== 'end') await new Promise((resolve) => client.once('end', resolve));
}

/** The outcome of each call: `'ok'` for an answer, else the failure's code (a plain Error is `'error'`). */
function outcomes(settled: PromiseSettledResult<unknown>[]): string[] {
  return settled.map((outcome) => {
    if (outcome.status === 'fulfilled') return 'ok';
    const reason = outcome.reason as unknown;
    return isPetstoreError(reason) ? reason.code : 'error';
  });
}

afterEach(() => {
  vi.useRealTimers();
});

const clients: Array<{ on: string; skip: boolean; connect: () => Redis | Cluster; prefix: () => string }> = [
  { on: 'a Redis client', skip: skipRedis, connect: () => connect(), prefix: () => uniquePrefix() },
  { on: 'a Cluster client', skip: skipCluster, connect: () => connectCluster(), prefix: () => uniquePrefix('cluster') },
];

for (const target of clients) {
  describe.skipIf(target.skip)(`the Redis stores on ${target.on} the host closes first`, () => {
    for (const close of ['quit', 'disconnect'] as const) {
      it(`${close}() with calls in flight and a batch of consumes pending: each call answers, nothing is left unhandled`, async () => {
        const unhandled = watchUnhandledRejections();
        const client = target.connect();
        const keyPrefix = target.prefix();
        const categories = redisCategoryStore({ client, keyPrefix });
        const rateLimits = redisRateLimitStore({ client, keyPrefix, time: 'request' });
        await categories.create({ name: 'before' }); // connected, the scripts known
        await rateLimits.consume('key:before', request);
        // The deadlines on fake timers: what a call answers does not depend on how long the machine takes.
        vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
        // Written to the connection now:
        const inFlight = [categories.create({ name: 'a' }), categories.list(), categories.createIdempotent({ name: 'b' }, idempotent('b'))];
        // Waiting for the end of this turn, when their batch goes out — after the client was told to close:
        const batch = [rateLimits.consume('key:a', request), rateLimits.consume('key:b', request), rateLimits.consume('key:a', request)];
        const answers = Promise.allSettled([...inFlight, ...batch]); // handled from the start, as a host's await would
        const closing = close === 'quit' ? client.quit() : (client.disconnect(), Promise.resolve('OK'));
        await ended(client);
        await closing;
        // Anything still waiting for an answer (a command queued by a client that closed) gets the deadline's.
        await vi.advanceTimersByTimeAsync(1000);
        const settled = await answers;
        for (const outcome of outcomes(settled)) expect(['ok', 'service_unavailable']).toContain(outcome);
        // The batch left after the client was closed: a store failure (503), never an answer nor a hang.
        expect(outcomes(settled.slice(inFlight.length))).toEqual(['service_unavailable', 'service_unavailable', 'service_unavailable']);
        await unhandled.none();
      });
    }
  });
}

describe.skipIf(!isRedisServerInstalled())('the Redis stores when Redis goes first', () => {
  /** A server of its own, stopped (SIGSTOP) so that the calls sent to it stay in flight; `kill()` ends it. */
  async function frozenServer() {
    const server = await startRedisServer();
    const admin = track(new Redis(server.url));
    const pid = Number(/^process_id:(\d+)/m.exec(await admin.info('server'))?.[1]);
    expect(pid).toBeGreaterThan(0);
    admin.disconnect();
    let alive = true;
    return {
      server,
      freeze: () => process.kill(pid, 'SIGSTOP'),
      kill: () => {
        alive = false;
        process.kill(pid, 'SIGKILL');
      },
      async cleanUp() {
        if (alive) process.kill(pid, 'SIGCONT');
        await server.stop();
      },
    };
  }

  it('killed with calls in flight and a batch of consumes pending: every call answers service_unavailable, nothing is left unhandled', async () => {
    const unhandled = watchUnhandledRejections();
    const redis = await frozenServer();
    try {
      // A client that gives up when the connection drops: ioredis then rejects every queued command with
      // "Connection is closed." (its flushQueue), the failure the benchmark's servers met at teardown.
      const client = track(new Redis(redis.server.url, { retryStrategy: () => null }));
      const keyPrefix = uniquePrefix();
      const categories = redisCategoryStore({ client, keyPrefix, callTimeoutMs: 60_000 });
      const rateLimits = redisRateLimitStore({ client, keyPrefix, time: 'request', callTimeoutMs: 60_000 });
      // Through stores with time to spare on the same client (the connection up, the scripts loaded); the 500 ms
      // stores are used only on fake timers.
      await redisCategoryStore({ client, keyPrefix, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }).create({ name: 'before' });
      await redisRateLimitStore({ client, keyPrefix, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS }).consume('key:before', request);
      redis.freeze();
      const inFlight = [categories.create({ name: 'a' }), categories.list(), categories.createIdempotent({ name: 'b' }, idempotent('b'))];
      const sentBatch = [rateLimits.consume('key:a', request), rateLimits.consume('key:b', request)];
      await new Promise((resolve) => setImmediate(resolve)); // that batch is written to the connection
      const pendingBatch = [rateLimits.consume('key:a', request), rateLimits.consume('key:c', request)];
      const answers = Promise.allSettled([...inFlight, ...sentBatch, ...pendingBatch]);
      redis.kill(); // before the end of this turn, when the pending batch goes out
      const settled = await answers;
      expect(outcomes(settled)).toEqual(Array.from({ length: 7 }, () => 'service_unavailable'));
      // Answered by the lost connection itself, long before the deadline of 60 s.
      for (const outcome of settled) expect(((outcome as PromiseRejectedResult).reason as Error).cause).toMatchObject({ message: 'Connection is closed.' });
      await ended(client);
      await unhandled.none();
    } finally {
      await redis.cleanUp();
    }
  });

  it('killed after the deadline answered: the calls\' late failures are ignored', async () => {
    const unhandled = watchUnhandledRejections();
    const redis = await frozenServer();
    try {
      const client = track(new Redis(redis.server.url, { retryStrategy: () => null }));
      const keyPrefix = uniquePrefix();
      const categories = redisCategoryStore({ client, keyPrefix, callTimeoutMs: 500 });
      const rateLimits = redisRateLimitStore({ client, keyPrefix, time: 'request', callTimeoutMs: 500 });
      await categories.create({ name: 'before' });
      await rateLimits.consume('key:before', request);
      redis.freeze();
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const answers = Promise.allSettled([categories.create({ name: 'a' }), categories.list(), rateLimits.consume('key:a', request)]);
      await new Promise((resolve) => setImmediate(resolve)); // the consume's batch goes out
      await vi.advanceTimersByTimeAsync(500);
      const settled = await answers;
      expect(outcomes(settled)).toEqual(['service_unavailable', 'service_unavailable', 'service_unavailable']);
      for (const outcome of settled) expect(((outcome as PromiseRejectedResult).reason as Error).cause).toMatchObject({ name: 'RedisTimeoutError' });
      // Now the connection drops: ioredis rejects the commands it still holds, after the store has answered.
      redis.kill();
      await ended(client);
      await unhandled.none();
    } finally {
      await redis.cleanUp();
    }
  });
});

/**
 * The core's storage conformance suites and the rate-limit model comparison, run against both Redis stores (each
 * case gets a fresh key prefix), on one Redis server, on a 3-master Redis Cluster through an ioredis `Cluster`
 * client, and on one Valkey server (the open-source fork of Redis).
 */
import { runCategoryStoreConformance, runRateLimitModelComparison, runRateLimitStoreConformance } from '@petstore/core/testing';
import type { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisCategoryStore } from './category-store.js';
import { redisRateLimitStore } from './rate-limit-store.js';
import {
  connect,
  connectCluster,
  connectValkey,
  patchConsumeScript,
  keepKeysAnHourLonger,
  readRateLimitState,
  skipCluster,
  skipRedis,
  skipValkey,
  uniquePrefix,
} from '../test-support/redis.js';


const targets: Array<{ on: string; skip: boolean; connect: () => Redis | Cluster; prefix: () => string }> = [
  { on: '', skip: skipRedis, connect: () => connect(), prefix: () => uniquePrefix() },
  { on: ' on a Redis Cluster', skip: skipCluster, connect: () => connectCluster(), prefix: () => uniquePrefix('cluster') },
  { on: ' on Valkey', skip: skipValkey, connect: () => connectValkey(), prefix: () => uniquePrefix('valkey') },
];

for (const target of targets) {
  const test = { describe: describe.skipIf(target.skip), it };

  runRateLimitStoreConformance(test, {
    name: `redisRateLimitStore conformance${target.on}`,
    createStore() {
      const client = target.connect();
      const store = redisRateLimitStore({ client, keyPrefix: target.prefix(), time: 'request' });
      return {
        store,
        async remainingTtlMs(key) {
          const ttl = await client.pttl(store.redisKey(key));
          if (ttl === -2) return undefined; // no such key
          if (ttl === -1) return Number.POSITIVE_INFINITY; // no expiry
          return ttl;
        },
        async dropTtl(key) {
          await client.persist(store.redisKey(key));
        },
        // The client is closed after the test by test-support/redis.ts.
      };
    },
  });

  // The script against decideConsume, step by step (the block cache has its own comparison in
  // rate-limit-store.test.ts: answers from memory leave the record as Redis last wrote it, not as the model would).
  runRateLimitModelComparison({
    ...test,
    name: `redisRateLimitStore against the model${target.on}`,
    harness() {
      const client = patchConsumeScript(target.connect(), keepKeysAnHourLonger);
      const store = redisRateLimitStore({ client, keyPrefix: target.prefix(), time: 'request', blockCache: false });
      return { store, readState: (key) => readRateLimitState(client, store.redisKey(key)) };
    },
  });

  runCategoryStoreConformance(test, {
    name: `redisCategoryStore conformance${target.on}`,
    createStore: ({ maxCategories }) => ({
      store: redisCategoryStore({ client: target.connect(), keyPrefix: target.prefix(), maxCategories }),
    }),
  });
}

describe.skipIf(skipValkey)('the Valkey target', () => {
  it('is a Valkey server, not Redis', async () => {
    const info = await connectValkey().info('server');
    expect(info).toMatch(/^server_name:valkey\r?$/m);
    expect(info).toMatch(/^valkey_version:\d+\./m);
  });
});

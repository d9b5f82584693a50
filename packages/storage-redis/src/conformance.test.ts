/**
 * The core's storage conformance suites, run against both Redis stores (each case gets a fresh key prefix).
 */
import { runCategoryStoreConformance, runRateLimitStoreConformance } from '@petstore/core/testing';
import { describe, it } from 'vitest';
import { redisCategoryStore } from './category-store.js';
import { redisRateLimitStore } from './rate-limit-store.js';
import { connect, skipRedis, uniquePrefix } from './test-support/redis.js';

const test = { describe: describe.skipIf(skipRedis), it };

runRateLimitStoreConformance(test, {
  name: 'redisRateLimitStore conformance',
  createStore() {
    const client = connect();
    const store = redisRateLimitStore({ client, keyPrefix: uniquePrefix(), time: 'request' });
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

runCategoryStoreConformance(test, {
  name: 'redisCategoryStore conformance',
  createStore: ({ maxCategories }) => ({
    store: redisCategoryStore({ client: connect(), keyPrefix: uniquePrefix(), maxCategories }),
  }),
});

import {
  runApiKeyRecordStoreConformance,
  runCategoryStoreConformance,
  runRateLimitModelComparison,
  runRateLimitStoreConformance,
} from '@petstore/core/testing';
import { describe, it } from 'vitest';
import { memoryApiKeyRecordStore, memoryCategoryStore, memoryRateLimitStore } from './index.js';

runRateLimitStoreConformance(
  { describe, it },
  {
    name: 'memoryRateLimitStore conformance',
    createStore: () => {
      const store = memoryRateLimitStore();
      return { store, remainingTtlMs: async (key) => store.remainingTtlMs(key) };
    },
    // An lru-cache entry gets its TTL with every write; there is no way to lose it.
    capabilities: { lostTtl: false },
  },
);

runRateLimitModelComparison({
  describe,
  it,
  name: 'memoryRateLimitStore against the model',
  harness: () => {
    const store = memoryRateLimitStore();
    return { store, readState: async (key) => store.readState(key) };
  },
});

runCategoryStoreConformance(
  { describe, it },
  { name: 'memoryCategoryStore conformance', createStore: (options) => ({ store: memoryCategoryStore(options) }) },
);

runApiKeyRecordStoreConformance(
  { describe, it },
  {
    name: 'memoryApiKeyRecordStore conformance',
    createStore: ({ maxRecords }) => ({ store: memoryApiKeyRecordStore({ maxRecords }) }),
    // One process, one instance: no notification path that could break.
    capabilities: { reconnect: false },
  },
);

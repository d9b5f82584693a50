import { createPetstore, staticApiKeys, type Petstore } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import type { ExampleConfig } from './config.js';

/**
 * The API on embedded memory storage. Anonymous callers get their own rate-limit store, so a flood of
 * client addresses cannot evict the counters of real API keys.
 */
export function examplePetstore(config: ExampleConfig): Petstore {
  return createPetstore({
    apiKeys: staticApiKeys(config.apiKeys),
    categories: memoryCategoryStore(),
    rateLimit: {
      store: memoryRateLimitStore({ maxKeys: 100_000 }),
      anonymousStore: memoryRateLimitStore({ maxKeys: 100_000 }),
    },
  });
}

import { createPetstore, staticApiKeys, type Petstore, type StoreFailurePolicy } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { redisCategoryStore, redisRateLimitStore } from '@petstore/storage-redis';
import { Redis } from 'ioredis';
import type { ExampleConfig } from './config.js';
import { exampleHandlers } from './host-operations.js';

/** What both storage setups share: the host's operations, their stability and deprecation. */
const hostOptions = {
  handlers: exampleHandlers,
  stability: { listStoreOrders: 'beta' },
  // Deprecated, with no sunset date yet: it keeps working (and the petstore says so once at start-up). Add a
  // sunsetAtMs when the date is decided; from then on the operation answers 410.
  deprecations: {
    getPetById: {
      deprecatedAtMs: Date.UTC(2026, 0, 1),
      documentationUrl: 'https://petstore.example/docs/deprecations#get-pet-by-id',
    },
  },
} satisfies Partial<Parameters<typeof createPetstore>[0]>;

/** The API of an example server, and how to release what it holds. */
export interface ExamplePetstore {
  petstore: Petstore;
  close(): Promise<void>;
}

/**
 * The API on memory storage, or on Redis when `config.redisUrl` is set.
 *
 * Memory: anonymous callers get their own rate-limit store (the default), so a flood of client addresses cannot
 * evict the counters of real API keys.
 *
 * Redis: one client shared by both stores. `enableOfflineQueue: false` makes commands fail at once while
 * Redis is unreachable instead of queueing (a queued create could run long after its request got a 503);
 * ioredis reconnects by itself with backoff. Reset times come from Redis's clock.
 */
export async function examplePetstore(config: ExampleConfig): Promise<ExamplePetstore> {
  if (config.redisUrl === undefined) {
    return {
      petstore: createPetstore({
        ...hostOptions,
        apiKeys: staticApiKeys(config.apiKeys),
        categories: memoryCategoryStore(),
        // Callers without a key get a second store like this one (its newStore()), so a flood of client
        // addresses cannot evict the counters of API keys.
        rateLimit: { store: memoryRateLimitStore({ maxKeys: 100_000 }), standardHeaders: config.standardHeaders },
      }),
      close: async () => undefined,
    };
  }
  const client = new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: true });
  client.on('error', () => undefined); // reported per request through the failure policy instead
  await client.connect();
  const onStoreFailure: StoreFailurePolicy =
    config.redisFailure === 'fail-open'
      ? { mode: 'fail-open', insuranceStore: memoryRateLimitStore({ maxKeys: 100_000 }) }
      : { mode: 'fail-closed', retryAfterSeconds: 5 };
  let lastReport = 0;
  return {
    petstore: createPetstore({
      ...hostOptions,
      apiKeys: staticApiKeys(config.apiKeys),
      categories: redisCategoryStore({ client, timeoutMs: 500 }),
      rateLimit: {
        store: redisRateLimitStore({ client, timeoutMs: 500 }),
        onStoreFailure,
        standardHeaders: config.standardHeaders,
        onStoreError: (error) => {
          // At most one line every 10 s while Redis is away.
          if (Date.now() - lastReport < 10_000) return;
          lastReport = Date.now();
          console.error(`[petstore] Redis unavailable (${config.redisFailure}):`, (error as Error).message);
        },
      },
    }),
    close: async () => {
      await client.quit().catch(() => client.disconnect());
    },
  };
}

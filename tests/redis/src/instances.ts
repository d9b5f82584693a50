/**
 * App instances for the Redis suites: separate Fastify and Express servers on real sockets, each with its own
 * Redis client (a `Redis`, or a `Cluster` on a Redis Cluster) and its own petstore, sharing nothing but Redis.
 */
import { createPetstore, staticApiKeys, type CategoryStore, type Petstore, type StaticApiKey, type StoreFailurePolicy } from '@petstore/core';
import { redisCategoryStore, redisRateLimitStore } from '@petstore/storage-redis';
import type { RedisClusterNode } from '@petstore/storage-redis/testing';
import { Cluster, Redis } from 'ioredis';
import { servePetstore, type Instance } from './serve.js';

export { call, type Answer, type Instance } from './serve.js';

/** How to build one instance. */
export interface InstanceOptions {
  framework: 'fastify' | 'express';
  /** The Redis server; ignored when `cluster` is given. */
  redisUrl?: string;
  /** Startup nodes of a Redis Cluster: the instance then uses its own ioredis `Cluster` client. */
  cluster?: RedisClusterNode[];
  keyPrefix: string;
  apiKeys: StaticApiKey[];
  onStoreFailure?: StoreFailurePolicy;
  /** Category store override (default: Redis). */
  categories?: CategoryStore;
  /**
   * The stores' deadline per call, ms. Default 1000: a stopped Redis answers 503 soon (fault.test.ts). The
   * exactness suites pass a generous guard instead, so that a busy machine's slow answer is not a 503 and a wrong count.
   */
  callTimeoutMs?: number;
}

/** The stores' deadline in the suites that count answers. */
export { GUARD_CALL_TIMEOUT_MS } from '../../../packages/core/test-support/call-timeout.js';

/**
 * Starts one instance (its petstore too, for the operator's calls). Its Redis client does not queue commands
 * while disconnected (they fail at once, and the failure policy answers) and reconnects by itself.
 */
export async function startInstance(options: InstanceOptions): Promise<Instance & { petstore: Petstore }> {
  const client: Redis | Cluster =
    options.cluster !== undefined
      ? new Cluster(options.cluster, {
          enableOfflineQueue: false,
          lazyConnect: true,
          clusterRetryStrategy: (attempt) => Math.min(attempt * 100, 1000),
          redisOptions: { maxRetriesPerRequest: 1 },
        })
      : new Redis(options.redisUrl ?? 'redis://127.0.0.1:6379', {
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
          lazyConnect: true,
          retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
        });
  client.on('error', () => undefined);
  await client.connect();
  const callTimeoutMs = options.callTimeoutMs ?? 1000;
  const petstore = createPetstore({
    apiKeys: staticApiKeys(options.apiKeys),
    categories: options.categories ?? redisCategoryStore({ client, keyPrefix: options.keyPrefix, callTimeoutMs }),
    rateLimit: {
      store: redisRateLimitStore({ client, keyPrefix: options.keyPrefix, callTimeoutMs }),
      ...(options.onStoreFailure ? { onStoreFailure: options.onStoreFailure } : {}),
      onStoreError: () => undefined,
    },
    onInternalError: () => undefined,
  });
  const closeClient = async () => {
    await client.quit().catch(() => client.disconnect());
  };
  return { ...(await servePetstore(options.framework, petstore, closeClient)), petstore };
}

/** Redis's clock now (`TIME`, the clock the consume script decides at), Unix epoch ms, rounded down. */
export async function redisNowMs(redisUrl: string): Promise<number> {
  const client = new Redis(redisUrl);
  try {
    const [seconds, micros] = (await client.time()) as [string | number, string | number];
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  } finally {
    client.disconnect();
  }
}

/** The minute Redis's clock is in (Unix epoch minutes): the fixed minute window the script decides in. */
export async function redisMinute(redisUrl: string): Promise<number> {
  return Math.floor((await redisNowMs(redisUrl)) / 60_000);
}

/**
 * Runs `burst` with each of `keys` in turn until one run starts and ends in the same minute of Redis's clock
 * (a fixed minute window that ends during a burst admits a second quota), and answers that run's result and
 * key; throws when every run straddled a minute boundary. No waiting for the clock: a run that straddles one
 * is simply made again with a fresh key.
 */
export async function withinOneMinute<T>(redisUrl: string, keys: readonly string[], burst: (key: string) => Promise<T>): Promise<{ key: string; result: T }> {
  for (const key of keys) {
    const before = await redisMinute(redisUrl);
    const result = await burst(key);
    if ((await redisMinute(redisUrl)) === before) return { key, result };
  }
  throw new Error(`every burst (${keys.length}) straddled a minute boundary`);
}

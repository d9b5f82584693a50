/**
 * vitest globalSetup: finds a Redis once per run (REDIS_URL, else a throwaway redis-server, else skip) and
 * hands its URL to the tests with `provide('redisUrl', …)`; likewise a Redis Cluster (REDIS_CLUSTER_NODES,
 * else a throwaway 3-master cluster, else skip), whose nodes go to `provide('redisCluster', …)`, and a Valkey
 * server (VALKEY_URL, else a throwaway valkey-server, else skip) for `provide('valkeyUrl', …)`.
 */
import type { TestProject } from 'vitest/node';
import { resolveTestRedisCluster, type RedisClusterNode } from '../src/testing/redis-cluster.js';
import { resolveTestRedis } from '../src/testing/resolve-test-redis.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the Redis under test; `null` when Redis tests are skipped. */
    redisUrl: string | null;
    /** Why Redis tests are skipped; `null` when they run. */
    redisSkipReason: string | null;
    /** Startup nodes of the Redis Cluster under test; `null` when cluster tests are skipped. */
    redisCluster: RedisClusterNode[] | null;
    /** Why cluster tests are skipped; `null` when they run. */
    redisClusterSkipReason: string | null;
    /** URL of the Valkey server under test; `null` when Valkey tests are skipped. */
    valkeyUrl: string | null;
    /** Why Valkey tests are skipped; `null` when they run. */
    valkeySkipReason: string | null;
  }
}

export default async function setup({ provide }: TestProject): Promise<() => Promise<void>> {
  // Valkey: the same finder, with VALKEY_URL and the valkey-server binary.
  const valkeyEnv = { ...process.env, REDIS_URL: process.env.VALKEY_URL };
  const [redis, cluster, valkey] = await Promise.allSettled([
    resolveTestRedis(),
    resolveTestRedisCluster(),
    resolveTestRedis(valkeyEnv, { binary: 'valkey-server' }),
  ]);
  const stops: Array<() => Promise<void>> = [];
  for (const found of [redis, cluster, valkey]) if (found.status === 'fulfilled' && !('skipReason' in found.value)) stops.push(found.value.stop);
  const stopAll = async () => {
    await Promise.all(stops.map((stop) => stop()));
  };
  for (const found of [redis, cluster, valkey]) {
    if (found.status === 'rejected') {
      await stopAll();
      throw found.reason;
    }
  }
  /** Hands one found server to the tests through `give`, or `null` and why its tests are skipped. */
  const offer = <T>(
    label: string,
    found: PromiseSettledResult<T | { skipReason: string }>,
    give: (value: T | null, skipReason: string | null) => void,
  ): void => {
    const value = (found as PromiseFulfilledResult<T | { skipReason: string }>).value;
    if (typeof value === 'object' && value !== null && 'skipReason' in value) {
      console.warn(`[@petstore/storage-redis] ${label} tests skipped: ${value.skipReason}`);
      give(null, value.skipReason);
    } else give(value as T, null);
  };
  offer('Redis', redis, (server, reason) => {
    provide('redisUrl', server?.url ?? null);
    provide('redisSkipReason', reason);
  });
  offer('Redis Cluster', cluster, (found, reason) => {
    provide('redisCluster', found?.nodes ?? null);
    provide('redisClusterSkipReason', reason);
  });
  offer('Valkey', valkey, (server, reason) => {
    provide('valkeyUrl', server?.url ?? null);
    provide('valkeySkipReason', reason);
  });
  return stopAll;
}

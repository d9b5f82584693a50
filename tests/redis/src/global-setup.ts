/**
 * Finds a Redis for the suites: `REDIS_URL`, else a throwaway `redis-server`, else a skip with its reason
 * (an error instead when PETSTORE_REQUIRE_REDIS=1, as in CI). Likewise a Redis Cluster:
 * `REDIS_CLUSTER_NODES`, else a throwaway 3-master cluster, else a skip.
 */
import { resolveTestRedis, resolveTestRedisCluster, type RedisClusterNode } from '@petstore/storage-redis/testing';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string | undefined;
    redisSkipReason: string | undefined;
    /** Startup nodes of the Redis Cluster under test; `undefined` when cluster suites are skipped. */
    redisCluster: RedisClusterNode[] | undefined;
    redisClusterSkipReason: string | undefined;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const [redis, cluster] = await Promise.allSettled([resolveTestRedis(), resolveTestRedisCluster()]);
  const stops: Array<() => Promise<void>> = [];
  for (const found of [redis, cluster]) if (found.status === 'fulfilled' && !('skipReason' in found.value)) stops.push(found.value.stop);
  const stopAll = async () => {
    await Promise.all(stops.map((stop) => stop()));
  };
  if (redis.status === 'rejected' || cluster.status === 'rejected') {
    await stopAll();
    throw redis.status === 'rejected' ? redis.reason : (cluster as PromiseRejectedResult).reason;
  }
  if ('skipReason' in redis.value) {
    console.warn(`[redis-tests] skipped: ${redis.value.skipReason}`);
    project.provide('redisUrl', undefined);
    project.provide('redisSkipReason', redis.value.skipReason);
  } else {
    project.provide('redisUrl', redis.value.url);
    project.provide('redisSkipReason', undefined);
  }
  if ('skipReason' in cluster.value) {
    console.warn(`[redis-tests] cluster suites skipped: ${cluster.value.skipReason}`);
    project.provide('redisCluster', undefined);
    project.provide('redisClusterSkipReason', cluster.value.skipReason);
  } else {
    project.provide('redisCluster', cluster.value.nodes);
    project.provide('redisClusterSkipReason', undefined);
  }
  return stopAll;
}

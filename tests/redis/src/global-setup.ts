/**
 * Finds a Redis for the suites: `REDIS_URL`, else a throwaway `redis-server`, else a skip with its reason
 * (an error instead when PETSTORE_REQUIRE_REDIS=1, as in CI). Likewise a Redis Cluster:
 * `REDIS_CLUSTER_NODES`, else a throwaway 3-master cluster, else a skip. Found once per run, with the other
 * projects' servers (scripts/test-servers.ts).
 */
import type { RedisClusterNode } from '@petstore/storage-redis/testing';
import type { TestProject } from 'vitest/node';
import { testServers } from '../../../scripts/test-servers.js';

// `redisUrl` and `redisSkipReason` (`null` when none) are declared with the other projects' in
// scripts/test-servers.ts.
declare module 'vitest' {
  export interface ProvidedContext {
    /** Startup nodes of the Redis Cluster under test; `undefined` when cluster suites are skipped. */
    redisCluster: RedisClusterNode[] | undefined;
    redisClusterSkipReason: string | undefined;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { found, release } = await testServers(project, ['redis', 'redisCluster']);
  const { redis, redisCluster } = found;
  if ('skipReason' in redis) console.warn(`[redis-tests] skipped: ${redis.skipReason}`);
  if ('skipReason' in redisCluster) console.warn(`[redis-tests] cluster suites skipped: ${redisCluster.skipReason}`);
  project.provide('redisUrl', 'url' in redis ? redis.url : null);
  project.provide('redisSkipReason', 'skipReason' in redis ? redis.skipReason : null);
  project.provide('redisCluster', 'nodes' in redisCluster ? redisCluster.nodes : undefined);
  project.provide('redisClusterSkipReason', 'skipReason' in redisCluster ? redisCluster.skipReason : undefined);
  return release;
}

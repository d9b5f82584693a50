/**
 * vitest globalSetup: a Redis (REDIS_URL, else a throwaway redis-server, else skip) for `provide('redisUrl', …)`,
 * a Redis Cluster (REDIS_CLUSTER_NODES, else a throwaway 3-master cluster, else skip) for
 * `provide('redisCluster', …)`, and a Valkey server (VALKEY_URL, else a throwaway valkey-server, else skip) for
 * `provide('valkeyUrl', …)`: found once per run, with the other projects' servers (scripts/test-servers.ts).
 */
import type { TestProject } from 'vitest/node';
import { testServers } from '../../../scripts/test-servers.js';
import type { RedisClusterNode } from '../src/testing/redis-cluster.js';

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

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { found, release } = await testServers(project, ['redis', 'redisCluster', 'valkey']);
  const skipped = (label: string, reason: string) => {
    console.warn(`[@petstore/storage-redis] ${label} tests skipped: ${reason}`);
    return reason;
  };
  const { redis, redisCluster, valkey } = found;
  project.provide('redisUrl', 'url' in redis ? redis.url : null);
  project.provide('redisSkipReason', 'skipReason' in redis ? skipped('Redis', redis.skipReason) : null);
  project.provide('redisCluster', 'nodes' in redisCluster ? redisCluster.nodes : null);
  project.provide('redisClusterSkipReason', 'skipReason' in redisCluster ? skipped('Redis Cluster', redisCluster.skipReason) : null);
  project.provide('valkeyUrl', 'url' in valkey ? valkey.url : null);
  project.provide('valkeySkipReason', 'skipReason' in valkey ? skipped('Valkey', valkey.skipReason) : null);
  return release;
}

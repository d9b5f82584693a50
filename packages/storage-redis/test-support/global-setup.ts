/**
 * vitest globalSetup of this workspace run alone: a Redis (REDIS_URL, else a throwaway redis-server), a Redis
 * Cluster (REDIS_CLUSTER_NODES, else a throwaway 3-master cluster) and a Valkey server (VALKEY_URL, else a
 * throwaway valkey-server), each else a skip with its reason, for `inject`; see scripts/test-servers.ts.
 */
import type { TestProject } from 'vitest/node';
import { setupTestServers } from '../../../scripts/test-servers.js';

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupTestServers(project, ['redis', 'redisCluster', 'valkey'], '@petstore/storage-redis');
}

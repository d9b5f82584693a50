/**
 * vitest globalSetup of this workspace run alone: a Redis (REDIS_URL, else a throwaway redis-server) and a Redis
 * Cluster (REDIS_CLUSTER_NODES, else a throwaway 3-master cluster), each else a skip with its reason (an error
 * under PETSTORE_REQUIRE_REDIS=1, as in CI); see scripts/test-servers.ts.
 */
import type { TestProject } from 'vitest/node';
import { setupTestServers } from '../../../scripts/test-servers.js';

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupTestServers(project, ['redis', 'redisCluster'], 'redis-tests');
}

/**
 * vitest globalSetup of this workspace run alone: the PostgreSQL and the Redis of the example tests that run on them
 * (DATABASE_URL / REDIS_URL, else throwaway servers, else a skip with its reason); see scripts/test-servers.ts.
 * The examples keep their data apart by the run's own keys and names, or a database of their own (database.ts).
 * A test that stops its Redis (graceful-shutdown.test.ts) starts one of its own.
 */
import type { TestProject } from 'vitest/node';
import { setupTestServers } from '../../scripts/test-servers.js';

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupTestServers(project, ['postgres', 'redis'], 'examples');
}

/**
 * vitest globalSetup of this workspace run alone: a PostgreSQL and a Redis for the command's tests (DATABASE_URL /
 * REDIS_URL, else throwaway servers, else a skip with its reason); see scripts/test-servers.ts.
 */
import type { TestProject } from 'vitest/node';
import { setupTestServers } from '../../../scripts/test-servers.js';

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupTestServers(project, ['postgres', 'redis'], '@petstore/cli');
}

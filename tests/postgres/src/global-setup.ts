/**
 * vitest globalSetup of this workspace run alone: a PostgreSQL (DATABASE_URL, else a throwaway server, else a skip
 * with its reason) for the suites that share one; see scripts/test-servers.ts. The suites that kill or restart
 * their server start one of their own.
 */
import type { TestProject } from 'vitest/node';
import { setupTestServers } from '../../../scripts/test-servers.js';

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupTestServers(project, ['postgres'], 'postgres-tests');
}

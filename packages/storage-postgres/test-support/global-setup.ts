/**
 * vitest globalSetup of this workspace run alone: a PostgreSQL (DATABASE_URL, else a throwaway server, else a skip
 * with its reason) for `inject('postgresUrl')`; see scripts/test-servers.ts.
 */
import type { TestProject } from 'vitest/node';
import { setupTestServers } from '../../../scripts/test-servers.js';

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupTestServers(project, ['postgres'], '@petstore/storage-postgres');
}

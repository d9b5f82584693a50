/**
 * vitest globalSetup: a PostgreSQL (DATABASE_URL, else a throwaway server, else skip) for
 * `provide('postgresUrl', …)`: found once per run, with the other projects' servers (scripts/test-servers.ts).
 */
import type { TestProject } from 'vitest/node';
import { testServers } from '../../../scripts/test-servers.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the PostgreSQL under test; `null` when its tests are skipped. */
    postgresUrl: string | null;
    /** Why PostgreSQL tests are skipped; `null` when they run. */
    postgresSkipReason: string | null;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { found, release } = await testServers(project, ['postgres']);
  const { postgres } = found;
  if ('skipReason' in postgres) console.warn(`[@petstore/storage-postgres] PostgreSQL tests skipped: ${postgres.skipReason}`);
  project.provide('postgresUrl', 'url' in postgres ? postgres.url : null);
  project.provide('postgresSkipReason', 'skipReason' in postgres ? postgres.skipReason : null);
  return release;
}

/**
 * vitest globalSetup: finds a PostgreSQL once per run (DATABASE_URL, else a throwaway server, else skip) and hands
 * its URL to the tests with `provide('postgresUrl', …)`.
 */
import type { TestProject } from 'vitest/node';
import { resolveTestPostgres } from '../src/testing/resolve-test-postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the PostgreSQL under test; `null` when its tests are skipped. */
    postgresUrl: string | null;
    /** Why PostgreSQL tests are skipped; `null` when they run. */
    postgresSkipReason: string | null;
  }
}

export default async function setup({ provide }: TestProject): Promise<() => Promise<void>> {
  const found = await resolveTestPostgres();
  if ('skipReason' in found) {
    console.warn(`[@petstore/storage-postgres] PostgreSQL tests skipped: ${found.skipReason}`);
    provide('postgresUrl', null);
    provide('postgresSkipReason', found.skipReason);
    return async () => undefined;
  }
  provide('postgresUrl', found.url);
  provide('postgresSkipReason', null);
  return found.stop;
}

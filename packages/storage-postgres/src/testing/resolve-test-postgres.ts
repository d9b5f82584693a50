/**
 * Which PostgreSQL a test run uses: the one in `DATABASE_URL`, a throwaway local server, or none (skip).
 */
import { findPostgresBinDir, startPostgresServer } from './postgres-server.js';

/** A PostgreSQL to test against; `stop()` stops it when this run started it (a no-op for `DATABASE_URL`). */
export interface TestPostgres {
  url: string;
  stop(): Promise<void>;
}

/** Why PostgreSQL tests are skipped in this run. */
export interface TestPostgresSkip {
  skipReason: string;
}

/**
 * Finds a PostgreSQL for tests, in this order:
 *
 * 1. `DATABASE_URL` when set (e.g. a CI service container); used as is, never stopped.
 * 2. A throwaway server ({@link startPostgresServer}) when PostgreSQL is installed; `stop()` ends it.
 * 3. Otherwise `{ skipReason }`, for `describe.skipIf` — unless `PETSTORE_REQUIRE_POSTGRES=1`, which makes a
 *    missing PostgreSQL an error, so CI cannot pass by skipping.
 *
 * @param env where to read `DATABASE_URL`, `PETSTORE_PG_BINDIR` and `PETSTORE_REQUIRE_POSTGRES`. Default `process.env`.
 * @throws Error when `PETSTORE_REQUIRE_POSTGRES=1` and no PostgreSQL is available (the message says why).
 */
export async function resolveTestPostgres(env: Record<string, string | undefined> = process.env): Promise<TestPostgres | TestPostgresSkip> {
  const url = env.DATABASE_URL;
  if (url !== undefined && url !== '') return { url, stop: async () => {} };
  let skipReason: string;
  const binDir = findPostgresBinDir(env);
  if (binDir === undefined) {
    skipReason = 'DATABASE_URL is not set and PostgreSQL is not installed (apt-get install postgresql)';
  } else {
    try {
      const server = await startPostgresServer({ binDir });
      return { url: server.url, stop: () => server.stop() };
    } catch (error) {
      skipReason = `DATABASE_URL is not set and PostgreSQL failed to start: ${error instanceof Error ? error.message : String(error)}`;
    }
  }
  if (env.PETSTORE_REQUIRE_POSTGRES === '1') throw new Error(`No PostgreSQL for the tests (PETSTORE_REQUIRE_POSTGRES=1): ${skipReason}`);
  return { skipReason };
}

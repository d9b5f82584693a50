/**
 * Which Redis a test run uses: the one in `REDIS_URL`, a throwaway local server, or none (skip).
 */
import { isRedisServerInstalled, startRedisServer } from './redis-server.js';

/** A Redis to test against; `stop()` stops it when this run started it (a no-op for `REDIS_URL`). */
export interface TestRedis {
  url: string;
  stop(): Promise<void>;
}

/** Why Redis tests are skipped in this run. */
export interface TestRedisSkip {
  skipReason: string;
}

/**
 * Finds a Redis for tests, in this order:
 *
 * 1. `REDIS_URL` when set (e.g. a CI service container); used as is, never stopped.
 * 2. A throwaway `redis-server` ({@link startRedisServer}) when the binary is on `PATH`; `stop()` ends it.
 * 3. Otherwise `{ skipReason }`, for `describe.skipIf` — unless `PETSTORE_REQUIRE_REDIS=1`, which makes a
 *    missing Redis an error, so CI cannot pass by skipping.
 *
 * @param env where to read `REDIS_URL` and `PETSTORE_REQUIRE_REDIS`. Default `process.env`.
 * @param options.binary the server binary to start (path or name on `PATH`). Default `redis-server`.
 * @throws Error when `PETSTORE_REQUIRE_REDIS=1` and no Redis is available (the message says why).
 */
export async function resolveTestRedis(
  env: Record<string, string | undefined> = process.env,
  options: { binary?: string } = {},
): Promise<TestRedis | TestRedisSkip> {
  const url = env.REDIS_URL;
  if (url !== undefined && url !== '') return { url, stop: async () => {} };
  const binary = options.binary ?? 'redis-server';
  let skipReason: string;
  if (isRedisServerInstalled(binary)) {
    try {
      const server = await startRedisServer({ binary });
      return { url: server.url, stop: () => server.stop() };
    } catch (error) {
      skipReason = `REDIS_URL is not set and ${binary} failed to start: ${error instanceof Error ? error.message : String(error)}`;
    }
  } else {
    skipReason = `REDIS_URL is not set and ${binary} is not installed`;
  }
  if (env.PETSTORE_REQUIRE_REDIS === '1') throw new Error(`No Redis for the tests (PETSTORE_REQUIRE_REDIS=1): ${skipReason}`);
  return { skipReason };
}

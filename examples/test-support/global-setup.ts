/**
 * vitest globalSetup: the PostgreSQL and the Redis of the example tests that run on them (DATABASE_URL / REDIS_URL,
 * else throwaway servers, else a skip with its reason), found once per run with the other projects' servers
 * (scripts/test-servers.ts). The examples keep their data apart by the run's own keys and names. A test that
 * stops its Redis (graceful-shutdown.test.ts) starts one of its own.
 */
import type { TestProject } from 'vitest/node';
import { testServers } from '../../scripts/test-servers.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the PostgreSQL under test; `null` when its tests are skipped. */
    postgresUrl: string | null;
    postgresSkipReason: string | null;
    /** URL of the Redis under test; `null` when its tests are skipped. */
    redisUrl: string | null;
    redisSkipReason: string | null;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { found, release } = await testServers(project, ['postgres', 'redis']);
  const { postgres, redis } = found;
  if ('skipReason' in postgres) console.warn(`[examples] PostgreSQL examples skipped: ${postgres.skipReason}`);
  if ('skipReason' in redis) console.warn(`[examples] Redis examples skipped: ${redis.skipReason}`);
  project.provide('postgresUrl', 'url' in postgres ? postgres.url : null);
  project.provide('postgresSkipReason', 'skipReason' in postgres ? postgres.skipReason : null);
  project.provide('redisUrl', 'url' in redis ? redis.url : null);
  project.provide('redisSkipReason', 'skipReason' in redis ? redis.skipReason : null);
  return release;
}

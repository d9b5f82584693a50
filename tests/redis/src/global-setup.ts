/**
 * Finds a Redis for the suites: `REDIS_URL`, else a throwaway `redis-server`, else a skip with its reason
 * (an error instead when PETSTORE_REQUIRE_REDIS=1, as in CI).
 */
import { resolveTestRedis } from '@petstore/storage-redis/testing';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string | undefined;
    redisSkipReason: string | undefined;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const redis = await resolveTestRedis();
  if ('skipReason' in redis) {
    console.warn(`[redis-tests] skipped: ${redis.skipReason}`);
    project.provide('redisUrl', undefined);
    project.provide('redisSkipReason', redis.skipReason);
    return async () => undefined;
  }
  project.provide('redisUrl', redis.url);
  project.provide('redisSkipReason', undefined);
  return () => redis.stop();
}

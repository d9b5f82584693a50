/**
 * vitest globalSetup: finds a Redis once per run (REDIS_URL, else a throwaway redis-server, else skip) and
 * hands its URL to the tests with `provide('redisUrl', …)`.
 */
import type { TestProject } from 'vitest/node';
import { resolveTestRedis } from '../testing/resolve-test-redis.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the Redis under test; `null` when Redis tests are skipped. */
    redisUrl: string | null;
    /** Why Redis tests are skipped; `null` when they run. */
    redisSkipReason: string | null;
  }
}

export default async function setup({ provide }: TestProject): Promise<() => Promise<void>> {
  const redis = await resolveTestRedis();
  if ('skipReason' in redis) {
    console.warn(`[@petstore/storage-redis] Redis tests skipped: ${redis.skipReason}`);
    provide('redisUrl', null);
    provide('redisSkipReason', redis.skipReason);
    return async () => {};
  }
  provide('redisUrl', redis.url);
  provide('redisSkipReason', null);
  return () => redis.stop();
}

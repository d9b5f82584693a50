/**
 * The throwaway servers of a test run, started together.
 *
 * `npm test` (the root vitest.config.ts) uses this module as its global setup: it starts every server that any
 * suite needs, all at once (PostgreSQL, Redis, a 3-master Redis Cluster, Valkey), and gives each test file their
 * addresses with `inject`. The suites share them safely: each uses key prefixes, schemas, tables or databases of
 * its own, as when `REDIS_URL` or `DATABASE_URL` points every suite at one server. A workspace run alone
 * (`npm test -w <workspace>`) starts only what its own global setup asks for, with the same two functions.
 *
 * Each server is found as the resolvers of the testing entries find it: the environment variable, else a throwaway
 * server, else a skip with its reason (an error under PETSTORE_REQUIRE_REDIS / PETSTORE_REQUIRE_POSTGRES).
 */
import { resolveTestPostgres } from '@petstore/storage-postgres/testing';
import { resolveTestRedis, resolveTestRedisCluster, type RedisClusterNode } from '@petstore/storage-redis/testing';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the PostgreSQL under test; `null` when its tests are skipped. */
    postgresUrl: string | null;
    /** Why PostgreSQL tests are skipped; `null` when they run. */
    postgresSkipReason: string | null;
    /** URL of the Redis under test; `null` when its tests are skipped. */
    redisUrl: string | null;
    /** Why Redis tests are skipped; `null` when they run. */
    redisSkipReason: string | null;
    /** Startup nodes of the Redis Cluster under test; `null` when its tests are skipped. */
    redisCluster: RedisClusterNode[] | null;
    /** Why Redis Cluster tests are skipped; `null` when they run. */
    redisClusterSkipReason: string | null;
    /** URL of the Valkey server under test; `null` when its tests are skipped. */
    valkeyUrl: string | null;
    /** Why Valkey tests are skipped; `null` when they run. */
    valkeySkipReason: string | null;
  }
}

/** What one kind of server resolves to: where it is, or why its tests are skipped. */
export interface FoundServers {
  redis: { url: string } | { skipReason: string };
  redisCluster: { nodes: RedisClusterNode[] } | { skipReason: string };
  valkey: { url: string } | { skipReason: string };
  postgres: { url: string } | { skipReason: string };
}
export type ServerKind = keyof FoundServers;

type Started<K extends ServerKind> = { found: FoundServers[K]; stop?: () => Promise<void> };

function start<K extends ServerKind>(kind: K): Promise<Started<K>> {
  const keep = (found: { url: string; stop?: () => Promise<void> } | { skipReason: string }): Started<K> =>
    ('skipReason' in found ? { found } : { found: { url: found.url }, stop: found.stop }) as Started<K>;
  switch (kind) {
    case 'redis':
      return resolveTestRedis().then(keep);
    case 'valkey':
      return resolveTestRedis({ ...process.env, REDIS_URL: process.env['VALKEY_URL'] }, { binary: 'valkey-server' }).then(keep);
    case 'postgres':
      return resolveTestPostgres().then(keep);
    default:
      return resolveTestRedisCluster().then(
        (found) => ('skipReason' in found ? { found } : { found: { nodes: found.nodes }, stop: found.stop }) as Started<K>,
      );
  }
}

/**
 * Starts (or finds) the servers `kinds`, all at once.
 * @returns what each resolved to, and `stop()`, which stops the servers it started
 * @throws when a server cannot be had and its suite is required (the servers already started are stopped)
 */
export async function startTestServers<K extends ServerKind>(
  kinds: readonly K[],
): Promise<{ found: Pick<FoundServers, K>; stop: () => Promise<void> }> {
  const settled = await Promise.allSettled(kinds.map(start));
  const stop = async () => {
    await Promise.all(settled.map((result) => (result.status === 'fulfilled' ? result.value.stop?.() : undefined)));
  };
  const failed = settled.find((result) => result.status === 'rejected');
  if (failed !== undefined) {
    await stop();
    throw failed.reason;
  }
  const found = Object.fromEntries(kinds.map((kind, index) => [kind, (settled[index] as PromiseFulfilledResult<Started<K>>).value.found]));
  return { found: found as Pick<FoundServers, K>, stop };
}

/** Gives the tests (`inject`) the address of each server found, or `null` and the reason it is skipped (printed under `label`). */
export function provideTestServers(project: TestProject, found: Partial<FoundServers>, label: string): void {
  const skipped = (what: string, reason: string) => {
    console.warn(`[${label}] ${what} tests skipped: ${reason}`);
    return reason;
  };
  const { redis, redisCluster, valkey, postgres } = found;
  if (postgres !== undefined) {
    project.provide('postgresUrl', 'url' in postgres ? postgres.url : null);
    project.provide('postgresSkipReason', 'skipReason' in postgres ? skipped('PostgreSQL', postgres.skipReason) : null);
  }
  if (redis !== undefined) {
    project.provide('redisUrl', 'url' in redis ? redis.url : null);
    project.provide('redisSkipReason', 'skipReason' in redis ? skipped('Redis', redis.skipReason) : null);
  }
  if (redisCluster !== undefined) {
    project.provide('redisCluster', 'nodes' in redisCluster ? redisCluster.nodes : null);
    project.provide('redisClusterSkipReason', 'skipReason' in redisCluster ? skipped('Redis Cluster', redisCluster.skipReason) : null);
  }
  if (valkey !== undefined) {
    project.provide('valkeyUrl', 'url' in valkey ? valkey.url : null);
    project.provide('valkeySkipReason', 'skipReason' in valkey ? skipped('Valkey', valkey.skipReason) : null);
  }
}

/**
 * A global setup's whole work: starts the servers `kinds` and provides them to the tests.
 * @returns the teardown, which stops them
 */
export async function setupTestServers(project: TestProject, kinds: readonly ServerKind[], label: string): Promise<() => Promise<void>> {
  const { found, stop } = await startTestServers(kinds);
  provideTestServers(project, found, label);
  return stop;
}

/** The global setup of `npm test`: every server of every suite. */
export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return setupTestServers(project, ['postgres', 'redis', 'redisCluster', 'valkey'], 'npm test');
}

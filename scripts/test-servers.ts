/**
 * The throwaway servers of one test run, started once and together.
 *
 * vitest runs the projects' global setups one after another, so three setups that each start their servers
 * (storage-postgres: initdb and PostgreSQL; storage-redis: Redis, a 3-master cluster and Valkey; tests/redis: Redis
 * and another cluster) kept every core idle for the sum of their start-ups before the first test. Here the first
 * setup to ask starts every server that any project of the run needs, all at once; the later setups find theirs
 * started or starting, and a Redis Cluster is started once for both projects that use it. The suites already
 * share servers safely (each uses key prefixes, schemas and tables of its own, as when `REDIS_URL` or
 * `DATABASE_URL` points every suite at one server). The last project to finish stops them.
 *
 * Each server is found as the resolvers of the testing entries find it: the environment variable, else a throwaway
 * server, else a skip with its reason (an error under PETSTORE_REQUIRE_REDIS / PETSTORE_REQUIRE_POSTGRES).
 */
import { resolveTestPostgres } from '@petstore/storage-postgres/testing';
import { resolveTestRedis, resolveTestRedisCluster, type RedisClusterNode } from '@petstore/storage-redis/testing';
import type { TestProject } from 'vitest/node';

/** What one kind of server resolves to: where it is, or why its tests are skipped. */
export interface FoundServers {
  redis: { url: string } | { skipReason: string };
  redisCluster: { nodes: RedisClusterNode[] } | { skipReason: string };
  valkey: { url: string } | { skipReason: string };
  postgres: { url: string } | { skipReason: string };
}
export type ServerKind = keyof FoundServers;

/** The servers each project's global setup asks for: the union over the run's projects is started at once. */
const SERVERS_OF_PROJECT: Readonly<Record<string, readonly ServerKind[]>> = {
  '@petstore/storage-redis': ['redis', 'redisCluster', 'valkey'],
  '@petstore/storage-postgres': ['postgres'],
  '@petstore/redis-tests': ['redis', 'redisCluster'],
  '@petstore/cli': ['postgres', 'redis'],
  '@petstore/examples': ['postgres', 'redis'],
};

type Started = { found: FoundServers[ServerKind]; stop: () => Promise<void> };

interface Registry {
  servers: Map<ServerKind, Promise<Started>>;
  /** Projects that asked and have not released yet. */
  users: number;
}

// The global setups of the projects are loaded apart (a module graph per project), so the registry lives on the
// one object they share: the main vitest process's global.
const REGISTRY = Symbol.for('petstore.testServers');
function registry(): Registry {
  const holder = globalThis as { [REGISTRY]?: Registry };
  holder[REGISTRY] ??= { servers: new Map(), users: 0 };
  return holder[REGISTRY];
}

function start(kind: ServerKind): Promise<Started> {
  const none = async () => undefined;
  const keep = <T extends object>(found: T | { skipReason: string }, stop?: () => Promise<void>): Started => ({
    found: found as FoundServers[ServerKind],
    stop: 'skipReason' in found ? none : (stop ?? none),
  });
  switch (kind) {
    case 'redis':
      return resolveTestRedis().then((found) => keep('skipReason' in found ? found : { url: found.url }, 'stop' in found ? found.stop : undefined));
    case 'valkey':
      return resolveTestRedis({ ...process.env, REDIS_URL: process.env['VALKEY_URL'] }, { binary: 'valkey-server' }).then((found) =>
        keep('skipReason' in found ? found : { url: found.url }, 'stop' in found ? found.stop : undefined),
      );
    case 'redisCluster':
      return resolveTestRedisCluster().then((found) =>
        keep('skipReason' in found ? found : { nodes: found.nodes }, 'stop' in found ? found.stop : undefined),
      );
    case 'postgres':
      return resolveTestPostgres().then((found) => keep('skipReason' in found ? found : { url: found.url }, 'stop' in found ? found.stop : undefined));
  }
}

/**
 * The servers `kinds` for `project`'s global setup; starts, the first time it is called in a run, every server
 * that the run's projects need (in parallel). Rejects when a server cannot be had and its suite is required.
 * @returns the servers, and `release` for the setup's teardown: the last release stops them all
 */
export async function testServers<K extends ServerKind>(
  project: TestProject,
  kinds: readonly K[],
): Promise<{ found: Pick<FoundServers, K>; release: () => Promise<void> }> {
  const state = registry();
  const wanted = new Set<ServerKind>(kinds);
  for (const other of project.vitest.projects) for (const kind of SERVERS_OF_PROJECT[other.name] ?? []) wanted.add(kind);
  for (const kind of wanted) {
    if (state.servers.has(kind)) continue;
    const started = start(kind);
    started.catch(() => undefined); // a server no setup waits for yet must not fail the run as an unhandled rejection
    state.servers.set(kind, started);
  }
  state.users += 1;
  const release = async () => {
    state.users -= 1;
    if (state.users > 0) return;
    const all = [...state.servers.values()];
    state.servers.clear();
    await Promise.all(all.map((started) => started.then((server) => server.stop(), () => undefined)));
  };
  try {
    const entries = await Promise.all(kinds.map(async (kind) => [kind, (await (state.servers.get(kind) as Promise<Started>)).found] as const));
    return { found: Object.fromEntries(entries) as Pick<FoundServers, K>, release };
  } catch (error) {
    await release();
    throw error;
  }
}

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

/**
 * A global setup's whole work for a project whose tests use one PostgreSQL and one Redis: finds them (with the
 * run's other servers), warns of a skip under `label`, and provides `postgresUrl`, `redisUrl` and their skip
 * reasons to the tests (`inject`). Resolves with the teardown.
 */
export async function providePostgresAndRedis(project: TestProject, label: string): Promise<() => Promise<void>> {
  const { found, release } = await testServers(project, ['postgres', 'redis']);
  const { postgres, redis } = found;
  if ('skipReason' in postgres) console.warn(`[${label}] PostgreSQL tests skipped: ${postgres.skipReason}`);
  if ('skipReason' in redis) console.warn(`[${label}] Redis tests skipped: ${redis.skipReason}`);
  project.provide('postgresUrl', 'url' in postgres ? postgres.url : null);
  project.provide('postgresSkipReason', 'skipReason' in postgres ? postgres.skipReason : null);
  project.provide('redisUrl', 'url' in redis ? redis.url : null);
  project.provide('redisSkipReason', 'skipReason' in redis ? redis.skipReason : null);
  return release;
}

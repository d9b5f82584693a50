/**
 * The servers the HTTP benchmark compares. Each answers GET /v1/categories with the same three categories,
 * authenticated with one API key whose quota is large enough never to reject.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import bearerAuth from '@fastify/bearer-auth';
import rateLimit from '@fastify/rate-limit';
import { petstoreExpress } from '@petstore/adapter-express';
import { petstoreFastify } from '@petstore/adapter-fastify';
import {
  createPetstore,
  managedApiKeys,
  staticApiKeys,
  type ApiKeyRecordStore,
  type ApiKeyStore,
  type CategoryStore,
  type ManagedApiKeys,
  type Petstore,
  type RateLimitStore,
} from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { migratePostgres, postgresApiKeyRecordStore, postgresCategoryStore, postgresRateLimitStore } from '@petstore/storage-postgres';
import { redisApiKeyRecordStore, redisCategoryStore, redisRateLimitStore } from '@petstore/storage-redis';
import express from 'express';
import { rateLimit as expressRateLimit } from 'express-rate-limit';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import pg from 'pg';

/** The API key every server accepts. */
export const BENCH_KEY = 'bench-key-4f9a1c2e7b';

/**
 * The API keys a server accepts when started with `BENCH_KEYS=<count>` (default 1): `BENCH_KEY` first, then
 * `bench-key-<i>`. The scale-out benchmark sends requests spread over them, so they are counted apart.
 */
export function benchKeys(count: number): string[] {
  return [BENCH_KEY, ...Array.from({ length: count - 1 }, (_, i) => `bench-key-${i + 1}`)];
}
/** A quota no run can use up (requests per minute and per day of every benchmark key, static or managed). */
export const HUGE_QUOTA = 1_000_000_000;
const HUGE = HUGE_QUOTA;

export const CATEGORIES = [
  { id: 1, name: 'Dogs', description: 'Canine breeds' },
  { id: 2, name: 'Cats', description: 'Feline breeds' },
  { id: 3, name: 'Birds' },
];

/** The servers, in the order of the report. */
export const SERVER_NAMES = [
  'fastify-bare',
  'fastify-petstore',
  'fastify-peer',
  'express-bare',
  'express-petstore',
  'express-peer',
  'fastify-petstore-redis',
  'express-petstore-redis',
  'fastify-peer-redis',
  'fastify-peer-redis-pipelined',
  'fastify-petstore-postgres-limits',
  'fastify-petstore-postgres',
  'fastify-petstore-postgres-redis',
  'fastify-petstore-redis-all',
  'fastify-petstore-static-1000',
  'fastify-petstore-managed-redis',
  'fastify-petstore-managed-postgres',
] as const;
export type ServerName = (typeof SERVER_NAMES)[number];

/** Where a store keeps its data. */
export type Backend = 'memory' | 'redis' | 'postgres';

/** How a server authenticates: `staticApiKeys` (the keys of `BENCH_KEYS`), or `managedApiKeys` over a Redis or PostgreSQL record store. */
export type ApiKeysBackend = 'static' | 'managed-redis' | 'managed-postgres';

/**
 * Where each of our servers keeps its categories and its rate limits (the anonymous store is always memory), and
 * how it authenticates. The `*-postgres*` servers need a PostgreSQL schema holding the migrated tables and the
 * three categories ({@link seedPostgres}); `fastify-petstore-redis-all` keeps its categories in Redis under the key
 * prefix of {@link ServerDatabases.redisKeyPrefix}, writing the three at start when none are there; the
 * `*-managed-*` servers accept the managed keys the benchmark issued into their record store beforehand (the Redis
 * one under that same key prefix).
 */
export const PETSTORE_BACKENDS = {
  'fastify-petstore': { categories: 'memory', rateLimits: 'memory', apiKeys: 'static' },
  'express-petstore': { categories: 'memory', rateLimits: 'memory', apiKeys: 'static' },
  'fastify-petstore-redis': { categories: 'memory', rateLimits: 'redis', apiKeys: 'static' },
  'express-petstore-redis': { categories: 'memory', rateLimits: 'redis', apiKeys: 'static' },
  'fastify-petstore-postgres-limits': { categories: 'memory', rateLimits: 'postgres', apiKeys: 'static' },
  'fastify-petstore-postgres': { categories: 'postgres', rateLimits: 'postgres', apiKeys: 'static' },
  'fastify-petstore-postgres-redis': { categories: 'postgres', rateLimits: 'redis', apiKeys: 'static' },
  'fastify-petstore-redis-all': { categories: 'redis', rateLimits: 'redis', apiKeys: 'static' },
  'fastify-petstore-static-1000': { categories: 'memory', rateLimits: 'memory', apiKeys: 'static' },
  'fastify-petstore-managed-redis': { categories: 'memory', rateLimits: 'memory', apiKeys: 'managed-redis' },
  'fastify-petstore-managed-postgres': { categories: 'memory', rateLimits: 'memory', apiKeys: 'managed-postgres' },
} as const satisfies Partial<Record<ServerName, { categories: Backend; rateLimits: Backend; apiKeys: ApiKeysBackend }>>;

/** Servers measured in the Backends table only (API keys at scale), not in the HTTP table. */
export const BACKENDS_ONLY_SERVERS: readonly ServerName[] = ['fastify-petstore-redis-all', 'fastify-petstore-static-1000', 'fastify-petstore-managed-redis', 'fastify-petstore-managed-postgres'];
export type PetstoreServerName = keyof typeof PETSTORE_BACKENDS;

const isPetstoreServer = (name: ServerName): name is PetstoreServerName => Object.hasOwn(PETSTORE_BACKENDS, name);

/** Whether a server needs Redis (`redisUrl`) or PostgreSQL (`postgres`) of {@link ServerDatabases}. */
export function serverNeeds(name: ServerName): { redis: boolean; postgres: boolean } {
  const backends = isPetstoreServer(name) ? PETSTORE_BACKENDS[name] : undefined;
  return {
    redis: name.includes('-redis'),
    postgres:
      backends !== undefined && (backends.categories === 'postgres' || backends.rateLimits === 'postgres' || backends.apiKeys === 'managed-postgres'),
  };
}

/** The databases a server connects to; its PostgreSQL stores use the tables of `postgres.schema`. */
export interface ServerDatabases {
  redisUrl?: string;
  /** The `keyPrefix` of the managed keys' Redis record store (default `petstore:`). */
  redisKeyPrefix?: string;
  postgres?: { url: string; schema: string };
}

/** Connections of each server's `pg.Pool`. */
export const POSTGRES_POOL_SIZE = 10;

/**
 * Brings `schema` up to date with `migratePostgres` and fills its categories table with {@link CATEGORIES} (ids
 * 1–3 from a new table's identity column), once, before the `*-postgres*` servers start: they only read it.
 * @throws Error when the table already holds other categories (the servers would answer another body).
 */
export async function seedPostgres(pool: pg.Pool, schema: string): Promise<void> {
  await migratePostgres({ pool, schema });
  await seededCategories(postgresCategoryStore({ pool, schema }), `the categories table of schema ${schema}`);
}

/** The three categories in `categories`, created there when it holds none. @throws Error when it holds others. */
async function seededCategories(categories: CategoryStore, where: string): Promise<void> {
  if ((await categories.list()).length === 0) await createCategories(categories);
  const stored = await categories.list();
  if (JSON.stringify(stored) !== JSON.stringify(CATEGORIES)) {
    throw new Error(`${where} holds ${JSON.stringify(stored)}, not the benchmark's three categories`);
  }
}

async function createCategories(categories: CategoryStore): Promise<void> {
  for (const { name, description } of CATEGORIES) {
    await categories.create(description === undefined ? { name } : { name, description });
  }
}

/**
 * Managed keys over the record store of `backend`, the store's `findByDigest` calls counted (`lookups()`);
 * resolves once the manager hears the store's change notifications.
 */
async function managedKeys(
  backend: Exclude<ApiKeysBackend, 'static'>,
  stores: { redis: Redis | undefined; redisKeyPrefix: string | undefined; pool: pg.Pool | undefined; schema: string | undefined },
): Promise<{ keys: ManagedApiKeys; records: ApiKeyRecordStore; lookups: () => number }> {
  const { redis, redisKeyPrefix, pool, schema } = stores;
  const records =
    backend === 'managed-redis'
      ? redisApiKeyRecordStore({ client: redis as Redis, ...(redisKeyPrefix === undefined ? {} : { keyPrefix: redisKeyPrefix }) })
      : postgresApiKeyRecordStore({ pool: pool as pg.Pool, ...(schema === undefined ? {} : { schema }) });
  const lookups = countCalls(records, 'findByDigest');
  const keys = managedApiKeys({ store: records });
  await keys.ready();
  return { keys, records, lookups };
}

async function ourPetstore(
  name: PetstoreServerName,
  stores: { redis: Redis | undefined; redisKeyPrefix: string | undefined; pool: pg.Pool | undefined; schema: string | undefined },
  keys: string[],
  apiKeyStore: ApiKeyStore | undefined,
): Promise<Petstore> {
  const backends: { categories: Backend; rateLimits: Backend } = PETSTORE_BACKENDS[name];
  const { redis, redisKeyPrefix, pool, schema } = stores;
  let categories: CategoryStore;
  if (backends.categories === 'postgres') {
    categories = postgresCategoryStore({ pool: pool as pg.Pool, schema });
  } else if (backends.categories === 'redis') {
    categories = redisCategoryStore({ client: redis as Redis, ...(redisKeyPrefix === undefined ? {} : { keyPrefix: redisKeyPrefix }) });
    await seededCategories(categories, `the Redis category store of prefix ${redisKeyPrefix ?? 'petstore:'}`);
  } else {
    categories = memoryCategoryStore();
    await createCategories(categories);
  }
  const store: RateLimitStore =
    backends.rateLimits === 'redis'
      ? redisRateLimitStore({ client: redis as Redis })
      : backends.rateLimits === 'postgres'
        ? postgresRateLimitStore({ pool: pool as pg.Pool, schema })
        : memoryRateLimitStore();
  return createPetstore({
    apiKeys: apiKeyStore ?? staticApiKeys(keys.map((key) => ({ key, plan: 'enterprise', limits: { requestsPerMinute: HUGE, requestsPerDay: HUGE } }))),
    categories,
    rateLimit: { store, anonymousStore: memoryRateLimitStore() },
  });
}

/** The peer's bearer check for Express: SHA-256 digests compared in constant time. */
function expressBearer(): express.RequestHandler {
  const expected = createHash('sha256').update(BENCH_KEY).digest();
  return (request, response, next) => {
    const header = request.headers.authorization ?? '';
    const token = header.startsWith('Bearer ') ? header.slice(7) : '';
    if (!timingSafeEqual(createHash('sha256').update(token).digest(), expected)) {
      response.status(401).json({ code: 'unauthorized', message: 'invalid key', status: 401 });
      return;
    }
    next();
  };
}

/**
 * A running benchmark server. `redisCommands()` counts the commands its Redis client sent (round trips),
 * `postgresStatements()` the statements its `pg.Pool` ran (each one round trip), `apiKeyLookups()` the calls of
 * its managed keys' record store's `findByDigest` (0 with static keys).
 */
export interface BenchServer {
  port: number;
  redisCommands(): number;
  postgresStatements(): number;
  apiKeyLookups(): number;
  close(): Promise<void>;
}

/** Wraps `target[method]` (when there is a target) so that its calls are counted; answers the count so far. */
function countCalls<T extends object, K extends keyof T>(target: T | undefined, method: K): () => number {
  let calls = 0;
  if (target !== undefined) {
    const original = (target[method] as (...args: unknown[]) => unknown).bind(target);
    target[method] = ((...args: unknown[]) => {
      calls += 1;
      return original(...args);
    }) as T[K];
  }
  return () => calls;
}

/**
 * Counts the statements run on the connections `pool` hands out (`pool.query`, or `query` on a client of
 * `pool.connect()`): each connection's `query` wrapped when the pool first hands it out (its `'acquire'` event).
 */
function countStatements(pool: pg.Pool | undefined): () => number {
  let statements = 0;
  const counted = new WeakSet<pg.PoolClient>();
  pool?.on('acquire', (client) => {
    if (counted.has(client)) return;
    counted.add(client);
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      statements += 1;
      return query(...args);
    };
  });
  return () => statements;
}

/**
 * Starts one server on 127.0.0.1, port 0, accepting `keys`, on the databases it needs ({@link serverNeeds}).
 * `fastify-peer-redis-pipelined` is `fastify-peer-redis` with ioredis's `enableAutoPipelining`, an option its
 * users can set on their client.
 */
export async function startServer(name: ServerName, databases: ServerDatabases, keys: string[] = [BENCH_KEY]): Promise<BenchServer> {
  const needs = serverNeeds(name);
  if (needs.redis && databases.redisUrl === undefined) throw new Error(`${name} needs Redis`);
  if (needs.postgres && databases.postgres === undefined) throw new Error(`${name} needs PostgreSQL`);
  const redis = needs.redis
    ? new Redis(databases.redisUrl as string, { enableOfflineQueue: true, enableAutoPipelining: name.endsWith('-pipelined') })
    : undefined;
  // idleTimeoutMillis 0: connections stay open between the rounds, as on a busy server, so no round pays for
  // connecting (a new PostgreSQL backend process each).
  const pool = needs.postgres
    ? new pg.Pool({ connectionString: databases.postgres?.url, max: POSTGRES_POOL_SIZE, idleTimeoutMillis: 0 })
    : undefined;
  // An idle connection that drops emits 'error' on the pool; without a listener it would end the process.
  pool?.on('error', (error) => console.error(`${name}: an idle PostgreSQL connection failed: ${error.message}`));
  // Every statement of the stores runs on a connection the pool hands out, and every request to Redis, whatever the
  // library, goes through sendCommand: count them there.
  const postgresStatements = countStatements(pool);
  const redisCommands = countCalls(redis, 'sendCommand');
  const closeDatabases = async () => {
    // Redis may be going away at the same moment (the benchmark stops it as it stops the servers): QUIT then fails
    // with "Connection is closed." and there is nothing left to close.
    if (redis) await redis.quit().catch(() => redis.disconnect());
    if (pool) await pool.end();
  };
  const stores = { redis, redisKeyPrefix: databases.redisKeyPrefix, pool, schema: databases.postgres?.schema };
  const apiKeysBackend: ApiKeysBackend = isPetstoreServer(name) ? PETSTORE_BACKENDS[name].apiKeys : 'static';
  const managed = apiKeysBackend === 'static' ? undefined : await managedKeys(apiKeysBackend, stores);
  const apiKeyLookups = managed?.lookups ?? (() => 0);
  const closeManaged = async () => {
    await managed?.keys.close();
    await managed?.records.close?.();
  };
  if (name.startsWith('fastify')) {
    const app = Fastify({ logger: false });
    if (name === 'fastify-bare') {
      app.get('/v1/categories', async () => CATEGORIES);
    } else if (name.startsWith('fastify-peer')) {
      // With many keys, @fastify/bearer-auth's own check compares the token with every key in turn (constant
      // time, O(keys)); give it what ours does instead, a lookup by SHA-256 digest, so the benchmark compares
      // rate limiting, not key lookup.
      const digests = new Set(keys.map((key) => createHash('sha256').update(key).digest('hex')));
      await app.register(
        bearerAuth,
        keys.length === 1 ? { keys: new Set(keys) } : { keys: new Set<string>(), auth: (token: string) => digests.has(createHash('sha256').update(token).digest('hex')) },
      );
      await app.register(rateLimit, {
        max: HUGE,
        timeWindow: 60_000,
        hook: 'preHandler', // after authentication, as ours
        keyGenerator: (request) => request.headers.authorization ?? request.ip,
        ...(redis ? { redis } : {}),
      });
      app.get('/v1/categories', async () => CATEGORIES);
    } else if (isPetstoreServer(name)) {
      await app.register(petstoreFastify, { prefix: '/v1', petstore: await ourPetstore(name, stores, keys, managed?.keys) });
    } else {
      throw new Error(`unknown server ${name}`);
    }
    await app.listen({ port: 0, host: '127.0.0.1' });
    return {
      port: (app.server.address() as AddressInfo).port,
      redisCommands,
      postgresStatements,
      apiKeyLookups,
      close: async () => {
        await app.close();
        await closeManaged();
        await closeDatabases();
      },
    };
  }
  const app = express();
  if (name === 'express-bare') {
    app.get('/v1/categories', (_request, response) => {
      response.json(CATEGORIES);
    });
  } else if (name === 'express-peer') {
    app.use(
      '/v1',
      expressBearer(),
      expressRateLimit({
        windowMs: 60_000,
        limit: HUGE,
        standardHeaders: 'draft-6',
        legacyHeaders: true,
        keyGenerator: (request) => request.headers.authorization ?? 'anonymous',
        validate: false,
      }),
    );
    app.get('/v1/categories', (_request, response) => {
      response.json(CATEGORIES);
    });
  } else if (isPetstoreServer(name)) {
    app.use('/v1', petstoreExpress({ petstore: await ourPetstore(name, stores, keys, managed?.keys) }));
  } else {
    throw new Error(`unknown server ${name}`);
  }
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    redisCommands,
    postgresStatements,
    apiKeyLookups,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await closeManaged();
      await closeDatabases();
    },
  };
}

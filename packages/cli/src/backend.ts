/**
 * The stores a command works on: where the servers' deployment record (deployment.ts) says they keep each kind of
 * data, reached through the environment the example servers read (`PETSTORE_DATABASE_URL`, `PETSTORE_REDIS_URL`).
 * The clients (pg, ioredis) and the storage packages are imported only for the stores named there.
 */
import type { ApiKeyRecordStore, RateLimitStore } from '@petstore/core';
import type { MigrationReport, PostgresMigration } from '@petstore/storage-postgres';
import type { Redis } from 'ioredis';
import type { Pool } from 'pg';
import {
  createDeploymentTable,
  readPostgresDeployment,
  readRedisDeployment,
  UnreadableDeploymentError,
  type DeploymentStore,
  type PetstoreDeployment,
  type RecordedDeployment,
} from './deployment.js';
import { FailedError, UsageError } from './errors.js';
import { describeError, redactUrl } from '@petstore/internal';

/** What a command asks for. */
export interface BackendNeeds {
  keys: boolean;
  rateLimits: boolean;
  /** Bring the PostgreSQL tables up to date first (`petstore migrate`); every other command only checks them. */
  migrate?: boolean;
}

/** The open stores, and how to release their connections. */
export interface Backend {
  /** Present when asked for. */
  keys?: ApiKeyRecordStore;
  /** Present when asked for. */
  rateLimits?: RateLimitStore;
  /** What `migrate` applied, when asked for and PostgreSQL is configured. */
  migration?: MigrationReport;
  close(): Promise<void>;
}

/** The variables the commands read (the same as the example servers'). */
export const DATABASE_URL_VARIABLE = 'PETSTORE_DATABASE_URL';
export const REDIS_URL_VARIABLE = 'PETSTORE_REDIS_URL';

/**
 * The deadline of one store call, in ms. A server answering requests gives up after a second (the stores' default);
 * an operator's command can wait longer for a busy database rather than fail a change it may have made.
 */
const CALL_TIMEOUT_MS = 10_000;

export { describeError, redactUrl } from '@petstore/internal';


/** Store names as messages say them. */
const STORE_NAMES: Record<DeploymentStore, string> = { postgresql: 'PostgreSQL', redis: 'Redis' };
/** The variable that names each store. */
const STORE_VARIABLES: Record<DeploymentStore, string> = { postgresql: DATABASE_URL_VARIABLE, redis: REDIS_URL_VARIABLE };

/**
 * Where the servers keep each kind of data when no store holds their record (servers of an earlier release, or
 * none started yet): the rule those servers followed, given the same variables as this command.
 */
function layoutWithoutRecord(databaseUrl: string | undefined, redisUrl: string | undefined): PetstoreDeployment {
  const keys: DeploymentStore = databaseUrl !== undefined ? 'postgresql' : 'redis';
  return { apiKeys: keys, categories: keys, rateLimits: redisUrl !== undefined ? 'redis' : 'postgresql' };
}

/**
 * Opens what `needs` asks for, where the servers keep it: first the servers' deployment record is read from every
 * store the environment names (the newest wins when PostgreSQL and Redis disagree); without one, the rule of
 * {@link layoutWithoutRecord}. `migrate` reads no record: it works on PostgreSQL only.
 * @throws UsageError when neither variable is set, or when the servers keep what the command needs in a store
 *   whose variable is not set (`rate limits are kept in Redis by the servers: set PETSTORE_REDIS_URL`); nothing is
 *   read but the record then
 * @throws FailedError naming the variable and the URL without its secrets when a server named cannot be reached or
 *   its record cannot be read, or (PostgreSQL) the tables are missing or behind this release (`run petstore migrate
 *   first`), or with `needs.migrate` cannot be brought up to date; nothing is left open then
 */
export async function openBackend(env: Record<string, string | undefined>, needs: BackendNeeds): Promise<Backend> {
  const databaseUrl = env[DATABASE_URL_VARIABLE]?.trim() || undefined;
  const redisUrl = env[REDIS_URL_VARIABLE]?.trim() || undefined;
  if (databaseUrl === undefined && redisUrl === undefined) {
    throw new UsageError(
      `set ${DATABASE_URL_VARIABLE} (PostgreSQL, e.g. postgres://user:pass@127.0.0.1:5432/petstore) or ${REDIS_URL_VARIABLE} (Redis, e.g. redis://127.0.0.1:6379), as for the API servers`,
    );
  }
  const migrate = needs.migrate === true;
  const closers: Array<() => Promise<void>> = [];
  const close = async () => {
    for (const closeOne of closers.splice(0).reverse()) await closeOne().catch(() => undefined);
  };
  const backend: Backend = { close };
  try {
    let pool: Pool | undefined;
    let postgres: typeof import('@petstore/storage-postgres') | undefined;
    const failed = (error: unknown) =>
      new FailedError(`${DATABASE_URL_VARIABLE}: PostgreSQL at ${redactUrl(databaseUrl as string)} failed: ${describeError(error)}`, { cause: error });
    if (databaseUrl !== undefined) {
      const [{ default: pg }, storage] = await Promise.all([import('pg'), import('@petstore/storage-postgres')]);
      postgres = storage;
      // A connection attempt gives up after 10 s, as the example servers'.
      pool = new pg.Pool({ connectionString: databaseUrl, max: 2, connectionTimeoutMillis: 10_000 });
      pool.on('error', () => undefined); // a dropped idle connection: the next query reports it
      const opened = pool;
      closers.push(() => opened.end());
    }
    if (migrate) {
      // Only PETSTORE_REDIS_URL: Redis keeps no schema.
      if (pool === undefined || postgres === undefined) return backend;
      backend.migration = await postgres.migratePostgres({ pool }).catch((error: unknown) => {
        throw failed(error);
      });
      // The servers' record is written at their start-up; its table exists from now on, so that SELECT granted on
      // every table afterwards covers it.
      await createDeploymentTable(pool).catch((error: unknown) => {
        throw failed(error);
      });
      return backend;
    }
    let client: Redis | undefined;
    let redis: typeof import('@petstore/storage-redis') | undefined;
    if (redisUrl !== undefined) {
      const url = redisUrl;
      const [{ Redis }, storage] = await Promise.all([import('ioredis'), import('@petstore/storage-redis')]);
      redis = storage;
      // One attempt, no reconnection and no queue: a command fails at once when Redis is away.
      const opened = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, retryStrategy: () => null });
      let lastError: unknown;
      opened.on('error', (error: unknown) => {
        lastError = error;
      });
      closers.push(async () => {
        await opened.quit().catch(() => opened.disconnect());
      });
      await opened.connect().catch((error: unknown) => {
        throw new FailedError(`${REDIS_URL_VARIABLE}: Redis at ${redactUrl(url)} failed: ${describeError(lastError ?? error)}`, { cause: error });
      });
      client = opened;
    }

    const layout = (await recordedLayout(pool, client, databaseUrl, redisUrl)) ?? layoutWithoutRecord(databaseUrl, redisUrl);
    const wanted: Array<[keyof PetstoreDeployment, string]> = [];
    if (needs.keys) wanted.push(['apiKeys', 'API keys']);
    if (needs.rateLimits) wanted.push(['rateLimits', 'rate limits']);
    for (const [kind, what] of wanted) {
      const store = layout[kind];
      if ((store === 'postgresql' ? databaseUrl : redisUrl) === undefined) {
        throw new UsageError(`${what} are kept in ${STORE_NAMES[store]} by the servers: set ${STORE_VARIABLES[store]}`);
      }
    }
    const usePostgres = (needs.keys && layout.apiKeys === 'postgresql') || (needs.rateLimits && layout.rateLimits === 'postgresql');
    if (usePostgres && pool !== undefined && postgres !== undefined) {
      // Commands only read and write rows (a role with SELECT and the rights it writes with is enough): the
      // schema is `petstore migrate`'s.
      const versions = `"${postgres.DEFAULT_SCHEMA}"."${postgres.MIGRATIONS_TABLE}"`;
      await assertMigrated(pool, versions, postgres.postgresMigrations(), failed, databaseUrl as string);
      if (needs.keys && layout.apiKeys === 'postgresql') backend.keys = postgres.postgresApiKeyRecordStore({ pool, callTimeoutMs: CALL_TIMEOUT_MS });
      if (needs.rateLimits && layout.rateLimits === 'postgresql') backend.rateLimits = postgres.postgresRateLimitStore({ pool, callTimeoutMs: CALL_TIMEOUT_MS });
    }
    if (client !== undefined && redis !== undefined) {
      if (needs.keys && layout.apiKeys === 'redis') backend.keys = redis.redisApiKeyRecordStore({ client, callTimeoutMs: CALL_TIMEOUT_MS });
      if (needs.rateLimits && layout.rateLimits === 'redis') backend.rateLimits = redis.redisRateLimitStore({ client, callTimeoutMs: CALL_TIMEOUT_MS });
    }
  } catch (error) {
    await close();
    throw error;
  }
  return backend;
}

/**
 * The servers' deployment record from the stores given, the newest of them; `undefined` when none holds one.
 * @throws FailedError naming the variable when a record cannot be read or is not understood
 */
async function recordedLayout(
  pool: Pool | undefined,
  client: Redis | undefined,
  databaseUrl: string | undefined,
  redisUrl: string | undefined,
): Promise<PetstoreDeployment | undefined> {
  const unreadable = (variable: string, name: string, url: string, error: unknown) =>
    new FailedError(
      error instanceof UnreadableDeploymentError
        ? `${variable}: the servers' record of where they keep their data (${error.message}) is not one this petstore understands: use the @petstore/cli of the servers' release`
        : `${variable}: ${name} at ${redactUrl(url)} failed: ${describeError(error)}`,
      { cause: error },
    );
  const records: RecordedDeployment[] = [];
  if (pool !== undefined) {
    const found = await readPostgresDeployment(pool).catch((error: unknown) => {
      throw unreadable(DATABASE_URL_VARIABLE, 'PostgreSQL', databaseUrl as string, error);
    });
    if (found !== undefined) records.push(found);
  }
  if (client !== undefined) {
    const found = await readRedisDeployment(client).catch((error: unknown) => {
      throw unreadable(REDIS_URL_VARIABLE, 'Redis', redisUrl as string, error);
    });
    if (found !== undefined) records.push(found);
  }
  return records.sort((a, b) => b.recordedAtMs - a.recordedAtMs)[0]?.deployment;
}

/** SQLSTATE undefined_table: the migrations table is missing, so the database was never migrated. */
const UNDEFINED_TABLE = '42P01';

/**
 * Checks that every migration of this release is recorded in the migrations table, reading it only.
 * @throws FailedError telling the operator to run `petstore migrate` when the table is missing or a migration
 *   is not recorded; `failed(error)` when the database cannot be read
 */
async function assertMigrated(
  pool: Pool,
  versions: string,
  migrations: PostgresMigration[],
  failed: (error: unknown) => Error,
  url: string,
): Promise<void> {
  let rows: Array<{ table_name: string; version: number }>;
  try {
    rows = (await pool.query<{ table_name: string; version: number }>(`SELECT table_name, version FROM ${versions}`)).rows;
  } catch (error) {
    if ((error as { code?: unknown }).code === UNDEFINED_TABLE) {
      throw new FailedError(`${DATABASE_URL_VARIABLE}: PostgreSQL at ${redactUrl(url)} has no petstore tables: run petstore migrate first`, { cause: error });
    }
    throw failed(error);
  }
  const pending = migrations.filter((migration) => !rows.some((row) => row.table_name === migration.table && row.version === migration.version));
  if (pending.length > 0) {
    throw new FailedError(
      `${DATABASE_URL_VARIABLE}: PostgreSQL at ${redactUrl(url)} lacks ${pending.length} migration(s) of this release: run petstore migrate first`,
    );
  }
}

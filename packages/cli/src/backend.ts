/**
 * The stores a command works on, from the environment the example servers read: the managed keys in PostgreSQL
 * (`PETSTORE_DATABASE_URL`) or else Redis (`PETSTORE_REDIS_URL`); the rate limits in Redis when it is set, else
 * PostgreSQL. The clients (pg, ioredis) and the storage packages are imported only for the backend in use.
 */
import type { ApiKeyRecordStore, RateLimitStore } from '@petstore/core';
import type { MigrationReport, PostgresMigration } from '@petstore/storage-postgres';
import type { Pool } from 'pg';
import { FailedError, UsageError } from './errors.js';
import { redactUrl } from './redact.js';

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

export { redactUrl } from './redact.js';

/**
 * What an error says in one line: its message, else its code, else an AggregateError's messages; then, after
 * `: `, what its `cause` says, when that adds something (a store's "PostgreSQL refused the statement" is followed
 * by the database's reason, e.g. "permission denied for table …").
 */
export function describeError(error: unknown, depth = 0): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  let text = error.message;
  if (text === '' && error instanceof AggregateError) text = error.errors.map((each) => describeError(each, depth + 1)).join('; ');
  if (text === '' && typeof code === 'string') text = code;
  text = (text || error.name).replace(/\s*\n\s*/g, ' ');
  const cause = depth < 3 && error.cause instanceof Error ? describeError(error.cause, depth + 1) : '';
  return cause === '' || text.includes(cause) ? text : `${text}: ${cause}`;
}

/**
 * Opens what `needs` asks for.
 * @throws UsageError when neither variable is set
 * @throws FailedError naming the variable and the URL without its secrets when the server cannot be reached, or
 *   (PostgreSQL) the tables are missing or behind this release (`run petstore migrate first`), or with
 *   `needs.migrate` cannot be brought up to date; nothing is left open then
 */
export async function openBackend(env: Record<string, string | undefined>, needs: BackendNeeds): Promise<Backend> {
  const databaseUrl = env[DATABASE_URL_VARIABLE]?.trim() || undefined;
  const redisUrl = env[REDIS_URL_VARIABLE]?.trim() || undefined;
  if (databaseUrl === undefined && redisUrl === undefined) {
    throw new UsageError(
      `set ${DATABASE_URL_VARIABLE} (PostgreSQL, e.g. postgres://user:pass@127.0.0.1:5432/petstore) or ${REDIS_URL_VARIABLE} (Redis, e.g. redis://127.0.0.1:6379), as for the API servers`,
    );
  }
  const usePostgres = (needs.keys && databaseUrl !== undefined) || (needs.rateLimits && redisUrl === undefined) || (needs.migrate === true && databaseUrl !== undefined);
  const useRedis = (needs.keys && databaseUrl === undefined) || (needs.rateLimits && redisUrl !== undefined);
  const closers: Array<() => Promise<void>> = [];
  const close = async () => {
    for (const closeOne of closers.splice(0).reverse()) await closeOne().catch(() => undefined);
  };
  const backend: Backend = { close };
  try {
    if (usePostgres) {
      const url = databaseUrl as string;
      const failed = (error: unknown) =>
        new FailedError(`${DATABASE_URL_VARIABLE}: PostgreSQL at ${redactUrl(url)} failed: ${describeError(error)}`, { cause: error });
      const [{ default: pg }, postgres] = await Promise.all([import('pg'), import('@petstore/storage-postgres')]);
      // A connection attempt gives up after 10 s, as the example servers'.
      const pool = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: 10_000 });
      pool.on('error', () => undefined); // a dropped idle connection: the next query reports it
      closers.push(() => pool.end());
      if (needs.migrate === true) {
        backend.migration = await postgres.migratePostgres({ pool }).catch((error: unknown) => {
          throw failed(error);
        });
      } else {
        // Commands only read and write rows (a role with SELECT and the rights it writes with is enough): the
        // schema is `petstore migrate`'s.
        const versions = `"${postgres.DEFAULT_SCHEMA}"."${postgres.MIGRATIONS_TABLE}"`;
        await assertMigrated(pool, versions, postgres.postgresMigrations(), failed, url);
      }
      if (needs.keys) backend.keys = postgres.postgresApiKeyRecordStore({ pool, callTimeoutMs: CALL_TIMEOUT_MS });
      if (needs.rateLimits && redisUrl === undefined) backend.rateLimits = postgres.postgresRateLimitStore({ pool, callTimeoutMs: CALL_TIMEOUT_MS });
    }
    if (useRedis) {
      const url = redisUrl as string;
      const [{ Redis }, redis] = await Promise.all([import('ioredis'), import('@petstore/storage-redis')]);
      // One attempt, no reconnection and no queue: a command fails at once when Redis is away.
      const client = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, retryStrategy: () => null });
      let lastError: unknown;
      client.on('error', (error: unknown) => {
        lastError = error;
      });
      closers.push(async () => {
        await client.quit().catch(() => client.disconnect());
      });
      await client.connect().catch((error: unknown) => {
        throw new FailedError(`${REDIS_URL_VARIABLE}: Redis at ${redactUrl(url)} failed: ${describeError(lastError ?? error)}`, { cause: error });
      });
      if (needs.keys && databaseUrl === undefined) backend.keys = redis.redisApiKeyRecordStore({ client, callTimeoutMs: CALL_TIMEOUT_MS });
      if (needs.rateLimits) backend.rateLimits = redis.redisRateLimitStore({ client, callTimeoutMs: CALL_TIMEOUT_MS });
    }
  } catch (error) {
    await close();
    throw error;
  }
  return backend;
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

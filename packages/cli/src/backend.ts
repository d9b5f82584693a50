/**
 * The stores a command works on, from the environment the example servers read: the managed keys in PostgreSQL
 * (`PETSTORE_DATABASE_URL`) or else Redis (`PETSTORE_REDIS_URL`); the rate limits in Redis when it is set, else
 * PostgreSQL. The clients (pg, ioredis) and the storage packages are imported only for the backend in use.
 */
import type { ApiKeyRecordStore, RateLimitStore } from '@petstore/core';
import { FailedError, UsageError } from './errors.js';

/** What a command asks for. */
export interface BackendNeeds {
  keys: boolean;
  rateLimits: boolean;
}

/** The open stores, and how to release their connections. */
export interface Backend {
  /** Present when asked for. */
  keys?: ApiKeyRecordStore;
  /** Present when asked for. */
  rateLimits?: RateLimitStore;
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

/** A Redis or PostgreSQL URL without its password, for printing. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'an unparseable URL';
  }
}

/** What an error says in one line: its message, else its code, else an AggregateError's messages. */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  let text = error.message;
  if (text === '' && error instanceof AggregateError) text = error.errors.map(describeError).join('; ');
  if (text === '' && typeof code === 'string') text = code;
  return (text || error.name).replace(/\s*\n\s*/g, ' ');
}

/**
 * Opens what `needs` asks for.
 * @throws UsageError when neither variable is set
 * @throws FailedError naming the variable and the URL without its password when the server cannot be reached
 *   (or the PostgreSQL tables cannot be brought up to date); nothing is left open then
 */
export async function openBackend(env: Record<string, string | undefined>, needs: BackendNeeds): Promise<Backend> {
  const databaseUrl = env[DATABASE_URL_VARIABLE]?.trim() || undefined;
  const redisUrl = env[REDIS_URL_VARIABLE]?.trim() || undefined;
  if (databaseUrl === undefined && redisUrl === undefined) {
    throw new UsageError(
      `set ${DATABASE_URL_VARIABLE} (PostgreSQL, e.g. postgres://user:pass@127.0.0.1:5432/petstore) or ${REDIS_URL_VARIABLE} (Redis, e.g. redis://127.0.0.1:6379), as for the API servers`,
    );
  }
  const usePostgres = (needs.keys && databaseUrl !== undefined) || (needs.rateLimits && redisUrl === undefined);
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
      await postgres.migratePostgres({ pool }).catch((error: unknown) => {
        throw failed(error);
      });
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

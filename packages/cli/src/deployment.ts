/**
 * The deployment record: where the servers keep each kind of data (API keys, rate limits, categories), written
 * by the servers beside the data at start-up and read by `petstore` before it opens a store, so that a command
 * given only some of the servers' variables refuses rather than read an empty store.
 *
 * - PostgreSQL: the table `petstore_deployment` of the `public` schema, one row per kind of data
 *   (`data text PRIMARY KEY`, `kept_in text`, `recorded_at timestamptz`), created by the first write or by
 *   `petstore migrate`; any role that may SELECT it can read it.
 * - Redis: the string key `petstore:deployment`, one JSON object
 *   `{ "apiKeys": …, "categories": …, "rateLimits": …, "recordedAtMs": … }`.
 */
import { inTransaction } from '@petstore/internal';
import type { Cluster, Redis } from 'ioredis';
import type { Pool, PoolClient } from 'pg';

/** A store the servers keep data in. */
export type DeploymentStore = 'postgresql' | 'redis';

/** Where the servers keep each kind of data. */
export interface PetstoreDeployment {
  /** The managed API keys' records (`managedApiKeys`' record store). */
  apiKeys: DeploymentStore;
  /** The rate-limit windows and bans. */
  rateLimits: DeploymentStore;
  /** The categories. */
  categories: DeploymentStore;
}

/** What a store holds: the deployment and when it was recorded (ms since the epoch, the writing server's clock). */
export interface RecordedDeployment {
  deployment: PetstoreDeployment;
  recordedAtMs: number;
}

/** The stores {@link recordDeployment} writes the record to; each optional. */
export interface DeploymentStores {
  /** A node-postgres pool on the servers' database (`PETSTORE_DATABASE_URL`). */
  pool?: Pool | undefined;
  /** An ioredis client on the servers' Redis (`PETSTORE_REDIS_URL`). */
  redis?: Redis | Cluster | undefined;
}

/** The table of the record in PostgreSQL, in the stores' default schema (`public`). */
export const DEPLOYMENT_TABLE = 'petstore_deployment';
/** The key of the record in Redis (the stores' default key prefix, `petstore:`). */
export const DEPLOYMENT_REDIS_KEY = 'petstore:deployment';

const QUALIFIED_TABLE = `"public"."${DEPLOYMENT_TABLE}"`;
const KINDS = ['apiKeys', 'categories', 'rateLimits'] as const satisfies ReadonlyArray<keyof PetstoreDeployment>;
const STORES: readonly string[] = ['postgresql', 'redis'] satisfies DeploymentStore[];
/** The migrations' advisory lock: instances starting at once create the table once, after any migration. */
const ADVISORY_LOCK_NAME = 'petstore_migrations';
/** SQLSTATE undefined_table. */
const UNDEFINED_TABLE = '42P01';

/**
 * Records where the servers keep each kind of data, in every store given (call it at start-up, once the stores
 * are open; running it again replaces the record). In PostgreSQL it creates the table when missing, under the
 * migrations' advisory lock, then writes its rows in one statement; in Redis it is one `SET`.
 * @param nowMs the time of the record, ms since the epoch (default `Date.now()`); `petstore` believes the newest
 *   record when PostgreSQL and Redis disagree
 * @throws TypeError when a field of `deployment` is not `'postgresql'` or `'redis'` (nothing is written then); the
 *   driver's error when a write fails (e.g. no INSERT or CREATE right)
 */
export async function recordDeployment(deployment: PetstoreDeployment, stores: DeploymentStores, nowMs: number = Date.now()): Promise<void> {
  for (const kind of KINDS) {
    const store: unknown = deployment?.[kind];
    if (typeof store !== 'string' || !STORES.includes(store)) throw new TypeError(`recordDeployment: deployment.${kind} must be 'postgresql' or 'redis'`);
  }
  if (stores.pool !== undefined) {
    const pool = stores.pool;
    await inTransaction(() => pool.connect(), async (client) => {
      await createTable(client);
      const recordedAt = new Date(nowMs);
      await client.query(
        `INSERT INTO ${QUALIFIED_TABLE} (data, kept_in, recorded_at) VALUES ${KINDS.map((_, index) => `($${2 * index + 1}, $${2 * index + 2}, $${2 * KINDS.length + 1})`).join(', ')}
ON CONFLICT (data) DO UPDATE SET kept_in = EXCLUDED.kept_in, recorded_at = EXCLUDED.recorded_at`,
        [...KINDS.flatMap((kind) => [kind, deployment[kind]]), recordedAt],
      );
    });
  }
  if (stores.redis !== undefined) {
    const record = { ...Object.fromEntries(KINDS.map((kind) => [kind, deployment[kind]])), recordedAtMs: nowMs };
    await stores.redis.set(DEPLOYMENT_REDIS_KEY, JSON.stringify(record));
  }
}

/**
 * Creates the record's table when missing (`petstore migrate` does, so that a read-only role granted SELECT on
 * every table afterwards can read the record the servers write later). Checked first, so a role without the
 * CREATE right writes rows into a table that exists. Inside the caller's transaction.
 */
async function createTable(client: PoolClient): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [ADVISORY_LOCK_NAME]);
  const { rows } = await client.query('SELECT to_regclass($1) IS NOT NULL AS present', [QUALIFIED_TABLE]);
  if (rows[0]?.['present'] === true) return;
  await client.query(`CREATE TABLE ${QUALIFIED_TABLE} (
  data text PRIMARY KEY,
  kept_in text NOT NULL,
  recorded_at timestamptz NOT NULL
)`);
}

/** Creates the record's table when missing, in a transaction of its own. Internal: `petstore migrate`. */
export async function createDeploymentTable(pool: Pool): Promise<void> {
  await inTransaction(() => pool.connect(), createTable);
}

/** A record that this release cannot read (written by a newer one, or changed by hand). */
export class UnreadableDeploymentError extends Error {
  override name = 'UnreadableDeploymentError';
}

/**
 * The record in PostgreSQL, read with one SELECT; `undefined` when the table is missing or empty (servers of an
 * earlier release, or none started yet).
 * @throws UnreadableDeploymentError when a kind of data is missing or names a store this release does not know;
 *   the driver's error when the SELECT fails (e.g. permission denied)
 */
export async function readPostgresDeployment(pool: Pool): Promise<RecordedDeployment | undefined> {
  let rows: Array<{ data: string; kept_in: string; recorded_at: Date }>;
  try {
    rows = (await pool.query<{ data: string; kept_in: string; recorded_at: Date }>(`SELECT data, kept_in, recorded_at FROM ${QUALIFIED_TABLE}`)).rows;
  } catch (error) {
    if ((error as { code?: unknown }).code === UNDEFINED_TABLE) return undefined;
    throw error;
  }
  if (rows.length === 0) return undefined;
  const fields = Object.fromEntries(rows.map((row) => [row.data, row.kept_in]));
  const recordedAtMs = Math.max(...rows.filter((row) => (KINDS as readonly string[]).includes(row.data)).map((row) => row.recorded_at.getTime()));
  return { deployment: deploymentOf(fields, `table ${DEPLOYMENT_TABLE}`), recordedAtMs };
}

/**
 * The record in Redis, read with one GET; `undefined` when the key is missing.
 * @throws UnreadableDeploymentError when it is not the JSON object of {@link recordDeployment}; the client's error
 *   when the GET fails
 */
export async function readRedisDeployment(redis: Redis | Cluster): Promise<RecordedDeployment | undefined> {
  const text = await redis.get(DEPLOYMENT_REDIS_KEY);
  if (text === null) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const where = `key ${DEPLOYMENT_REDIS_KEY}`;
  if (typeof value !== 'object' || value === null) throw new UnreadableDeploymentError(`${where} is not a JSON object`);
  const { recordedAtMs } = value as { recordedAtMs?: unknown };
  if (typeof recordedAtMs !== 'number' || !Number.isFinite(recordedAtMs)) throw new UnreadableDeploymentError(`${where} has no recordedAtMs`);
  return { deployment: deploymentOf(value as Record<string, unknown>, where), recordedAtMs };
}

/** The deployment of a record's fields (more fields, from a newer release, are ignored). */
function deploymentOf(fields: Record<string, unknown>, where: string): PetstoreDeployment {
  const deployment: Partial<PetstoreDeployment> = {};
  for (const kind of KINDS) {
    const store = fields[kind];
    if (typeof store !== 'string' || !STORES.includes(store)) {
      throw new UnreadableDeploymentError(`${where}: ${kind} is ${store === undefined ? 'missing' : JSON.stringify(store)}, not postgresql or redis`);
    }
    deployment[kind] = store as DeploymentStore;
  }
  return deployment as PetstoreDeployment;
}

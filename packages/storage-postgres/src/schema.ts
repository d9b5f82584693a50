/**
 * Where the stores keep their data: validated names, and the migrations that create the tables.
 */
import type { Pool } from 'pg';
import { assertPool } from './postgres-call.js';

/** Default schema of both stores. */
export const DEFAULT_SCHEMA = 'public';
/** Default table of {@link postgresCategoryStore}. */
export const DEFAULT_CATEGORIES_TABLE = 'petstore_categories';
/** Default table of {@link postgresRateLimitStore}. */
export const DEFAULT_RATE_LIMITS_TABLE = 'petstore_rate_limits';
/** The table that records which migrations ran, in the same schema. */
export const MIGRATIONS_TABLE = 'petstore_migrations';

/** Suffix of the consume function's name: `<rateLimitsTable>_consume`. */
const CONSUME_FUNCTION_SUFFIX = '_consume';

/** Names the stores use: letters, digits and `_`, not starting with a digit, short enough for PostgreSQL. */
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** PostgreSQL truncates identifiers past 63 bytes; the consume function's name adds 8 to the table's. */
const MAX_NAME_LENGTH = 63 - CONSUME_FUNCTION_SUFFIX.length;

/**
 * Checks a schema or table name and answers it double-quoted for SQL (case is kept: `Pets` is `"Pets"`).
 * @throws TypeError when it is not 1–55 letters, digits or `_` starting with a letter or `_`.
 */
export function quotedName(name: string, what: string): string {
  if (typeof name !== 'string' || !NAME.test(name) || name.length > MAX_NAME_LENGTH) {
    throw new TypeError(`${what} must be 1-${MAX_NAME_LENGTH} letters, digits or _ (not starting with a digit), got ${JSON.stringify(name)}`);
  }
  return `"${name}"`;
}

/** The qualified, quoted names of one store set. */
export interface StoreNames {
  categories: string;
  rateLimits: string;
  consumeFunction: string;
  migrations: string;
  schema: string;
}

/** Options naming the schema and tables; every name is checked by {@link quotedName}. */
export interface PostgresSchemaOptions {
  /** The schema holding the tables (and the migrations table). Default `public`. */
  schema?: string;
  /** The categories table. Default `petstore_categories`. */
  categoriesTable?: string;
  /** The rate-limit table; its consume function is `<rateLimitsTable>_consume`. Default `petstore_rate_limits`. */
  rateLimitsTable?: string;
}

/** The quoted, schema-qualified names for `options`. @throws TypeError on a bad name. */
export function storeNames(options: PostgresSchemaOptions): StoreNames {
  const schema = quotedName(options.schema ?? DEFAULT_SCHEMA, 'schema');
  const rateLimitsTable = options.rateLimitsTable ?? DEFAULT_RATE_LIMITS_TABLE;
  return {
    schema,
    categories: `${schema}.${quotedName(options.categoriesTable ?? DEFAULT_CATEGORIES_TABLE, 'categoriesTable')}`,
    rateLimits: `${schema}.${quotedName(rateLimitsTable, 'rateLimitsTable')}`,
    consumeFunction: `${schema}."${rateLimitsTable}${CONSUME_FUNCTION_SUFFIX}"`,
    migrations: `${schema}.${quotedName(MIGRATIONS_TABLE, 'migrations table')}`,
  };
}

/** One step of the schema, recorded in the migrations table as (`table`, `version`) once applied. */
export interface PostgresMigration {
  /** The table the step is for (unquoted). */
  table: string;
  /** Its version, counting from 1 per table. */
  version: number;
  description: string;
  /** The statements, separated by `;`, safe to run again (`IF NOT EXISTS`, `CREATE OR REPLACE`). */
  sql: string;
}

/**
 * The migrations of both stores for these names, in order. {@link migratePostgres} runs them; teams with their
 * own migration tool can run `sql` of each instead (each is idempotent), and record them their own way.
 *
 * Version 1 of the categories table: `id bigint GENERATED ALWAYS AS IDENTITY (MAXVALUE 2^53 − 1) PRIMARY KEY,
 * name text NOT NULL, description text, created_at timestamptz NOT NULL DEFAULT now()`.
 *
 * Version 1 of the rate-limit table: one row per store key (`key text PRIMARY KEY`) with its windows as three
 * parallel arrays (`window_names text[]`, `window_starts_ms bigint[]`, `window_counts bigint[]`), the rejections
 * counted toward a ban (`rejected_start_ms`, `rejected_count`, 0 for none), the ban's end (`banned_until_ms`, 0
 * for none) and `expires_at_ms` (after it the row is worthless; indexed, for the clean-up), all times in Unix
 * epoch ms; and the PL/pgSQL function `<table>_consume(key, names, limits, window_ms, ban_threshold,
 * ban_interval_ms, ban_duration_ms, now_ms)` that decides one consume (see {@link postgresRateLimitStore}).
 *
 * @throws TypeError on a bad schema or table name.
 */
export function postgresMigrations(options: PostgresSchemaOptions = {}): PostgresMigration[] {
  const names = storeNames(options);
  const table = (name: string) => name.slice(name.indexOf('.') + 1).replaceAll('"', '');
  const rateLimitIndex = `"${table(names.rateLimits)}_expires_at_ms"`;
  return [
    {
      table: table(names.categories),
      version: 1,
      description: 'categories table',
      sql: `CREATE TABLE IF NOT EXISTS ${names.categories} (
  id bigint GENERATED ALWAYS AS IDENTITY (MAXVALUE 9007199254740991) PRIMARY KEY,
  name text NOT NULL,
  description text,
  created_at timestamptz NOT NULL DEFAULT now()
)`,
    },
    {
      table: table(names.rateLimits),
      version: 1,
      description: 'rate-limit table and its consume function',
      sql: `CREATE TABLE IF NOT EXISTS ${names.rateLimits} (
  key text PRIMARY KEY,
  window_names text[] NOT NULL,
  window_starts_ms bigint[] NOT NULL,
  window_counts bigint[] NOT NULL,
  rejected_start_ms bigint NOT NULL,
  rejected_count integer NOT NULL,
  banned_until_ms bigint NOT NULL,
  expires_at_ms bigint
) WITH (fillfactor = 70);
CREATE INDEX IF NOT EXISTS ${rateLimitIndex} ON ${names.rateLimits} (expires_at_ms);
${consumeFunctionSql(names)}`,
    },
  ];
}

/**
 * The consume function: a mirror of `decideConsume` from `@petstore/core`, run under the row's lock.
 *
 * An existing key: `SELECT … FOR UPDATE` waits for any other consume of the key, then the clock is read (so
 * decisions of one key never go back in time) and the row is updated: one row version. A new key: decided on
 * an empty state and inserted (`ON CONFLICT DO NOTHING`); when another consume inserted it first, it is read
 * under its lock and decided again. A new key also deletes up to two expired rows (`FOR UPDATE SKIP LOCKED`, by
 * the `expires_at_ms` index), so the table holds about as many rows as keys that are live, without a timer.
 * A banned key writes nothing. Reply: the decision's time, the outcome (0 admitted, 1 rate limited, 2 banned),
 * the ban's end (0 for none) and each window's count, as text (a host's `pg.types` parsers cannot change them).
 */
function consumeFunctionSql(names: StoreNames): string {
  return `CREATE OR REPLACE FUNCTION ${names.consumeFunction}(
  p_key text, p_names text[], p_limits bigint[], p_window_ms bigint[],
  p_ban_threshold integer, p_ban_interval_ms bigint, p_ban_duration_ms bigint, p_now_ms bigint)
RETURNS TABLE (now_ms text, outcome integer, banned_until_ms text, used text)
LANGUAGE plpgsql VOLATILE AS $consume$
DECLARE
  r ${names.rateLimits}%ROWTYPE;
  found_row boolean;
  n integer := coalesce(array_length(p_names, 1), 0);
  t bigint; i integer; j integer; w bigint; st bigint;
  starts bigint[]; counts bigint[]; has_room boolean; expires bigint;
  rejected_start bigint; rejected integer; ban_end bigint; result integer; interval_start bigint;
BEGIN
  SELECT * INTO r FROM ${names.rateLimits} AS x WHERE x.key = p_key FOR UPDATE;
  found_row := FOUND;
  LOOP
    t := coalesce(p_now_ms, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
    starts := '{}'; counts := '{}'; has_room := true; expires := t;
    FOR i IN 1..n LOOP
      w := p_window_ms[i];
      st := t - mod(mod(t, w) + w, w);
      j := CASE WHEN found_row THEN array_position(r.window_names, p_names[i]) END;
      starts[i] := st;
      counts[i] := CASE WHEN j IS NOT NULL AND r.window_starts_ms[j] = st THEN r.window_counts[j] ELSE 0 END;
      IF counts[i] + 1 > p_limits[i] THEN has_room := false; END IF;
      expires := greatest(expires, st + w);
    END LOOP;
    IF found_row AND r.banned_until_ms > t THEN
      -- Banned: nothing charged, the ban not extended; only a row that lost its expiry gets one back.
      IF r.expires_at_ms IS NULL THEN
        UPDATE ${names.rateLimits} AS x SET expires_at_ms = greatest(expires, r.banned_until_ms) WHERE x.key = p_key;
      END IF;
      RETURN QUERY SELECT t::text, 2, r.banned_until_ms::text, array_to_string(counts, ',');
      RETURN;
    END IF;
    rejected_start := CASE WHEN found_row THEN r.rejected_start_ms ELSE 0 END;
    rejected := CASE WHEN found_row THEN r.rejected_count ELSE 0 END;
    ban_end := 0;
    IF has_room THEN
      FOR i IN 1..n LOOP counts[i] := counts[i] + 1; END LOOP;
      result := 0;
      IF rejected > 0 AND p_ban_threshold > 0 THEN expires := greatest(expires, rejected_start + p_ban_interval_ms); END IF;
    ELSIF p_ban_threshold = 0 THEN
      result := 1; rejected_start := 0; rejected := 0;
    ELSE
      interval_start := t - mod(mod(t, p_ban_interval_ms) + p_ban_interval_ms, p_ban_interval_ms);
      rejected := CASE WHEN rejected > 0 AND rejected_start = interval_start THEN rejected ELSE 0 END + 1;
      IF rejected >= p_ban_threshold THEN
        result := 2; ban_end := t + p_ban_duration_ms; rejected_start := 0; rejected := 0;
        expires := greatest(expires, ban_end);
      ELSE
        result := 1; rejected_start := interval_start;
        expires := greatest(expires, interval_start + p_ban_interval_ms);
      END IF;
    END IF;
    IF found_row THEN
      UPDATE ${names.rateLimits} AS x
        SET window_names = p_names, window_starts_ms = starts, window_counts = counts, rejected_start_ms = rejected_start,
            rejected_count = rejected, banned_until_ms = ban_end, expires_at_ms = expires
        WHERE x.key = p_key;
      EXIT;
    END IF;
    INSERT INTO ${names.rateLimits} AS x VALUES (p_key, p_names, starts, counts, rejected_start, rejected, ban_end, expires)
      ON CONFLICT (key) DO NOTHING;
    IF FOUND THEN
      DELETE FROM ${names.rateLimits} AS x WHERE x.key IN (
        SELECT y.key FROM ${names.rateLimits} AS y WHERE y.expires_at_ms < t ORDER BY y.expires_at_ms LIMIT 2 FOR UPDATE SKIP LOCKED);
      EXIT;
    END IF;
    -- Another consume inserted the key meanwhile: decide again under its lock.
    SELECT * INTO r FROM ${names.rateLimits} AS x WHERE x.key = p_key FOR UPDATE;
    found_row := FOUND;
  END LOOP;
  RETURN QUERY SELECT t::text, result, ban_end::text, array_to_string(counts, ',');
END
$consume$`;
}

/** Options of {@link migratePostgres}. */
export interface MigratePostgresOptions extends PostgresSchemaOptions {
  /** A node-postgres `Pool` (or `Client`); one connection is used for the whole run. */
  pool: Pool;
}

/** What {@link migratePostgres} did. */
export interface MigrationReport {
  /** The migrations applied by this run, in order (none when the schema was up to date). */
  applied: Array<Pick<PostgresMigration, 'table' | 'version' | 'description'>>;
}

/**
 * Brings the schema up to date: creates the schema when missing, the migrations table
 * (`<schema>.petstore_migrations (table_name text, version integer, description text, applied_at timestamptz,
 * PRIMARY KEY (table_name, version))`), and applies every migration of {@link postgresMigrations} not yet
 * recorded there, recording each. Runs in one transaction under a transaction-level advisory lock, so several
 * instances starting at once apply each migration once; running it again is harmless (it applies nothing).
 * Call it at start-up, before serving (the host decides when; the stores never change the schema).
 *
 * @throws TypeError on a bad name or pool; the database's error (nothing applied) when a statement fails,
 *   e.g. for lack of the CREATE privilege.
 */
export async function migratePostgres(options: MigratePostgresOptions): Promise<MigrationReport> {
  assertPool(options.pool);
  const names = storeNames(options);
  const migrations = postgresMigrations(options);
  const client = await options.pool.connect();
  let failure: Error | undefined;
  try {
    await client.query('BEGIN');
    // One lock for every petstore migration in this database: hashtext of a fixed name.
    await client.query("SELECT pg_advisory_xact_lock(hashtext('petstore_migrations'))");
    const schema = options.schema ?? DEFAULT_SCHEMA;
    const exists = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    if (exists.rowCount === 0) await client.query(`CREATE SCHEMA ${names.schema}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${names.migrations} (
  table_name text NOT NULL,
  version integer NOT NULL,
  description text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (table_name, version)
)`);
    const done = await client.query<{ table_name: string; version: number }>(`SELECT table_name, version FROM ${names.migrations}`);
    const applied: MigrationReport['applied'] = [];
    for (const migration of migrations) {
      if (done.rows.some((row) => row.table_name === migration.table && row.version === migration.version)) continue;
      await client.query(migration.sql);
      await client.query(`INSERT INTO ${names.migrations} (table_name, version, description) VALUES ($1, $2, $3)`, [
        migration.table,
        migration.version,
        migration.description,
      ]);
      applied.push({ table: migration.table, version: migration.version, description: migration.description });
    }
    await client.query('COMMIT');
    return { applied };
  } catch (error) {
    failure = error instanceof Error ? error : new Error(String(error));
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    // A connection that failed is closed rather than returned to the pool.
    client.release(failure);
  }
}

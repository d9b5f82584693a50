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
/** Suffix of the rate-limit table's index on `expires_at_ms`: `<rateLimitsTable>_expires_at_ms`. */
const RATE_LIMIT_INDEX_SUFFIX = '_expires_at_ms';
/** Suffix of the table of idempotency records: `<categoriesTable>_idempotency`. */
const IDEMPOTENCY_TABLE_SUFFIX = '_idempotency';
/** Suffix of that table's index on `expires_at_ms`: `<categoriesTable>_idempotency_exp`. */
const IDEMPOTENCY_INDEX_SUFFIX = '_idempotency_exp';
/** Suffix of the idempotent create function's name: `<categoriesTable>_create_idempotent`. */
const CREATE_IDEMPOTENT_FUNCTION_SUFFIX = '_create_idempotent';

/** Names the stores use: letters, digits and `_`, not starting with a digit. */
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** PostgreSQL's longest identifier, in bytes; it truncates longer ones (names here are ASCII: a byte each). */
const MAX_IDENTIFIER_BYTES = 63;
/** The longest schema name: nothing is derived from it. */
const MAX_SCHEMA_NAME_LENGTH = MAX_IDENTIFIER_BYTES;
/** The longest categories table name: 45, so that `<table>_create_idempotent` (18 more) stays within 63. */
export const MAX_CATEGORIES_TABLE_NAME_LENGTH =
  MAX_IDENTIFIER_BYTES - Math.max(IDEMPOTENCY_TABLE_SUFFIX.length, IDEMPOTENCY_INDEX_SUFFIX.length, CREATE_IDEMPOTENT_FUNCTION_SUFFIX.length);
/** The longest rate-limit table name: 49, so that `<table>_expires_at_ms` (14 more) stays within 63. */
export const MAX_RATE_LIMITS_TABLE_NAME_LENGTH = MAX_IDENTIFIER_BYTES - Math.max(CONSUME_FUNCTION_SUFFIX.length, RATE_LIMIT_INDEX_SUFFIX.length);

/**
 * Checks a schema or table name and answers it double-quoted for SQL (case is kept: `Pets` is `"Pets"`).
 * @param maxLength the longest name allowed, in characters: 63 less the longest suffix of a name derived from it
 *   (so that no identifier is truncated by PostgreSQL)
 * @throws TypeError when it is not 1–`maxLength` letters, digits or `_` starting with a letter or `_`.
 */
export function quotedName(name: string, what: string, maxLength: number = MAX_IDENTIFIER_BYTES): string {
  if (typeof name !== 'string' || !NAME.test(name) || name.length > maxLength) {
    throw new TypeError(`${what} must be 1-${maxLength} letters, digits or _ (not starting with a digit), got ${JSON.stringify(name)}`);
  }
  return `"${name}"`;
}

/** The qualified, quoted names of one store set. */
export interface StoreNames {
  categories: string;
  /** The idempotency records of the categories table: `<categoriesTable>_idempotency`. */
  categoriesIdempotency: string;
  /** Its index on `expires_at_ms` (unqualified: an index lives in its table's schema). */
  categoriesIdempotencyIndex: string;
  /** The idempotent create function: `<categoriesTable>_create_idempotent`. */
  createIdempotentFunction: string;
  rateLimits: string;
  /** The rate-limit table's index on `expires_at_ms` (unqualified). */
  rateLimitsIndex: string;
  consumeFunction: string;
  migrations: string;
  schema: string;
}

/**
 * Options naming the schema and tables; every name is checked by {@link quotedName}: letters, digits and `_`,
 * not starting with a digit, a schema up to 63 characters, a categories table up to 45 and a rate-limit table up
 * to 49 (the names derived from a table add up to 18 and 14 characters, and PostgreSQL truncates past 63).
 */
export interface PostgresSchemaOptions {
  /** The schema holding the tables (and the migrations table). Default `public`. */
  schema?: string;
  /**
   * The categories table; its idempotency records are in `<categoriesTable>_idempotency`, created with the function
   * `<categoriesTable>_create_idempotent`. Default `petstore_categories`.
   */
  categoriesTable?: string;
  /** The rate-limit table; its consume function is `<rateLimitsTable>_consume`. Default `petstore_rate_limits`. */
  rateLimitsTable?: string;
}

/** The quoted, schema-qualified names for `options`. @throws TypeError on a bad name. */
export function storeNames(options: PostgresSchemaOptions): StoreNames {
  const schema = quotedName(options.schema ?? DEFAULT_SCHEMA, 'schema', MAX_SCHEMA_NAME_LENGTH);
  const categoriesTable = options.categoriesTable ?? DEFAULT_CATEGORIES_TABLE;
  const rateLimitsTable = options.rateLimitsTable ?? DEFAULT_RATE_LIMITS_TABLE;
  return {
    schema,
    categories: `${schema}.${quotedName(categoriesTable, 'categoriesTable', MAX_CATEGORIES_TABLE_NAME_LENGTH)}`,
    categoriesIdempotency: `${schema}."${categoriesTable}${IDEMPOTENCY_TABLE_SUFFIX}"`,
    categoriesIdempotencyIndex: `"${categoriesTable}${IDEMPOTENCY_INDEX_SUFFIX}"`,
    createIdempotentFunction: `${schema}."${categoriesTable}${CREATE_IDEMPOTENT_FUNCTION_SUFFIX}"`,
    rateLimits: `${schema}.${quotedName(rateLimitsTable, 'rateLimitsTable', MAX_RATE_LIMITS_TABLE_NAME_LENGTH)}`,
    rateLimitsIndex: `"${rateLimitsTable}${RATE_LIMIT_INDEX_SUFFIX}"`,
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
 * Version 2 of the categories table (after both versions 1): the idempotency records of creates,
 * `<table>_idempotency (key text PRIMARY KEY, fingerprint text NOT NULL, category_id bigint NOT NULL REFERENCES
 * <table> (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED, expires_at_ms bigint NOT NULL)` (Unix epoch ms;
 * indexed as `<table>_idempotency_exp`, for the clean-up), and the PL/pgSQL function
 * `<table>_create_idempotent(key, fingerprint, retention_ms, name, description)` that creates a category with its
 * record, or answers the key's record, in one step (see {@link postgresCategoryStore}).
 *
 * @throws TypeError on a bad schema or table name.
 */
export function postgresMigrations(options: PostgresSchemaOptions = {}): PostgresMigration[] {
  const names = storeNames(options);
  const table = (name: string) => name.slice(name.indexOf('.') + 1).replaceAll('"', '');
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
CREATE INDEX IF NOT EXISTS ${names.rateLimitsIndex} ON ${names.rateLimits} (expires_at_ms);
${consumeFunctionSql(names)}`,
    },
    {
      table: table(names.categories),
      version: 2,
      description: 'idempotency records of creates and the idempotent create function',
      sql: `CREATE TABLE IF NOT EXISTS ${names.categoriesIdempotency} (
  key text PRIMARY KEY,
  fingerprint text NOT NULL,
  category_id bigint NOT NULL REFERENCES ${names.categories} (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS ${names.categoriesIdempotencyIndex} ON ${names.categoriesIdempotency} (expires_at_ms);
${createIdempotentFunctionSql(names)}`,
    },
  ];
}

/**
 * The idempotent create function: one call, one transaction (the statement's), READ COMMITTED.
 *
 * 1. The clock is read once (`clock_timestamp()`, Unix epoch ms). A live record of the key (`expires_at_ms` later
 *    than now) that is committed is answered at once — `replayed` with its category (a join) when its fingerprint
 *    is the request's, else `mismatch` — and nothing is locked or written.
 * 2. Else the key is claimed: `INSERT … ON CONFLICT (key) DO UPDATE … WHERE <record>.expires_at_ms <= now`, a new
 *    record or an expired one taken over, with the placeholder category id 0 (the foreign key is checked at
 *    commit). While another call's claim of the key is uncommitted, the insert waits for that transaction; then
 *    the record is live, the claim fails, and the record (locked by the failed claim) is answered as in 1.
 * 3. A claimed key: the category is inserted exactly as `create` does (identity id, `MAXVALUE` → SQLSTATE 2200H,
 *    which rolls the claim back too), the record gets its id, and up to two expired records are deleted
 *    (`FOR UPDATE SKIP LOCKED`, through the `expires_at_ms` index), so the table stays about as large as the set
 *    of live records without a timer.
 *
 * Reply: one row `(outcome, id, name, description)`, `outcome` one of `created`, `replayed`, `mismatch`, the
 * category's columns as text (NULL for a mismatch; `description` NULL when it has none), so a host's `pg.types`
 * parsers cannot change them.
 */
function createIdempotentFunctionSql(names: StoreNames): string {
  return `CREATE OR REPLACE FUNCTION ${names.createIdempotentFunction}(
  p_key text, p_fingerprint text, p_retention_ms bigint, p_name text, p_description text)
RETURNS TABLE (outcome text, id text, name text, description text)
LANGUAGE plpgsql VOLATILE AS $create_idempotent$
DECLARE
  t bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  new_id bigint;
  found_fingerprint text; found_id bigint; found_name text; found_description text;
BEGIN
  SELECT r.fingerprint, c.id, c.name, c.description INTO found_fingerprint, found_id, found_name, found_description
    FROM ${names.categoriesIdempotency} AS r JOIN ${names.categories} AS c ON c.id = r.category_id
    WHERE r.key = p_key AND r.expires_at_ms > t;
  IF NOT FOUND THEN
    INSERT INTO ${names.categoriesIdempotency} AS r (key, fingerprint, category_id, expires_at_ms)
      VALUES (p_key, p_fingerprint, 0, t + p_retention_ms)
      ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, category_id = 0, expires_at_ms = excluded.expires_at_ms
      WHERE r.expires_at_ms <= t;
    IF FOUND THEN
      INSERT INTO ${names.categories} AS c (name, description) VALUES (p_name, p_description) RETURNING c.id INTO new_id;
      UPDATE ${names.categoriesIdempotency} AS r SET category_id = new_id WHERE r.key = p_key;
      DELETE FROM ${names.categoriesIdempotency} AS r WHERE r.key IN (
        SELECT y.key FROM ${names.categoriesIdempotency} AS y WHERE y.expires_at_ms <= t
        ORDER BY y.expires_at_ms LIMIT 2 FOR UPDATE SKIP LOCKED);
      RETURN QUERY SELECT 'created'::text, new_id::text, p_name, p_description;
      RETURN;
    END IF;
    -- A live record claimed by another call, committed meanwhile; the failed claim locked it.
    SELECT r.fingerprint, c.id, c.name, c.description INTO STRICT found_fingerprint, found_id, found_name, found_description
      FROM ${names.categoriesIdempotency} AS r JOIN ${names.categories} AS c ON c.id = r.category_id
      WHERE r.key = p_key;
  END IF;
  IF found_fingerprint = p_fingerprint THEN
    RETURN QUERY SELECT 'replayed'::text, found_id::text, found_name, found_description;
  ELSE
    RETURN QUERY SELECT 'mismatch'::text, NULL::text, NULL::text, NULL::text;
  END IF;
END
$create_idempotent$`;
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

/**
 * The SQL the migrations run: each store's tables and PL/pgSQL functions, as versioned, idempotent steps for the
 * names of {@link PostgresSchemaOptions}. `migratePostgres` (migrate.ts) runs them; teams with their own migration
 * tool take them from {@link postgresMigrations}.
 */
import { categoriesNames, rateLimitsNames, type CategoriesNames, type PostgresSchemaOptions, type RateLimitsNames } from './names.js';

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
 * @throws TypeError naming the option (`schema`, `categoriesTable` or `rateLimitsTable`) that holds a bad name.
 */
export function postgresMigrations(options: PostgresSchemaOptions = {}): PostgresMigration[] {
  const categories = categoriesNames(options);
  const rateLimits = rateLimitsNames(options);
  return [
    {
      table: categories.table,
      version: 1,
      description: 'categories table',
      sql: `CREATE TABLE IF NOT EXISTS ${categories.categories} (
  id bigint GENERATED ALWAYS AS IDENTITY (MAXVALUE 9007199254740991) PRIMARY KEY,
  name text NOT NULL,
  description text,
  created_at timestamptz NOT NULL DEFAULT now()
)`,
    },
    {
      table: rateLimits.table,
      version: 1,
      description: 'rate-limit table and its consume function',
      sql: `CREATE TABLE IF NOT EXISTS ${rateLimits.rateLimits} (
  key text PRIMARY KEY,
  window_names text[] NOT NULL,
  window_starts_ms bigint[] NOT NULL,
  window_counts bigint[] NOT NULL,
  rejected_start_ms bigint NOT NULL,
  rejected_count integer NOT NULL,
  banned_until_ms bigint NOT NULL,
  expires_at_ms bigint
) WITH (fillfactor = 70);
CREATE INDEX IF NOT EXISTS ${rateLimits.index} ON ${rateLimits.rateLimits} (expires_at_ms);
${consumeFunctionSql(rateLimits)}`,
    },
    {
      table: categories.table,
      version: 2,
      description: 'idempotency records of creates and the idempotent create function',
      sql: `CREATE TABLE IF NOT EXISTS ${categories.idempotency} (
  key text PRIMARY KEY,
  fingerprint text NOT NULL,
  category_id bigint NOT NULL REFERENCES ${categories.categories} (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS ${categories.idempotencyIndex} ON ${categories.idempotency} (expires_at_ms);
${createIdempotentFunctionSql(categories)}`,
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
function createIdempotentFunctionSql(names: CategoriesNames): string {
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
    FROM ${names.idempotency} AS r JOIN ${names.categories} AS c ON c.id = r.category_id
    WHERE r.key = p_key AND r.expires_at_ms > t;
  IF NOT FOUND THEN
    INSERT INTO ${names.idempotency} AS r (key, fingerprint, category_id, expires_at_ms)
      VALUES (p_key, p_fingerprint, 0, t + p_retention_ms)
      ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, category_id = 0, expires_at_ms = excluded.expires_at_ms
      WHERE r.expires_at_ms <= t;
    IF FOUND THEN
      INSERT INTO ${names.categories} AS c (name, description) VALUES (p_name, p_description) RETURNING c.id INTO new_id;
      UPDATE ${names.idempotency} AS r SET category_id = new_id WHERE r.key = p_key;
      DELETE FROM ${names.idempotency} AS r WHERE r.key IN (
        SELECT y.key FROM ${names.idempotency} AS y WHERE y.expires_at_ms <= t
        ORDER BY y.expires_at_ms LIMIT 2 FOR UPDATE SKIP LOCKED);
      RETURN QUERY SELECT 'created'::text, new_id::text, p_name, p_description;
      RETURN;
    END IF;
    -- A live record claimed by another call, committed meanwhile; the failed claim locked it.
    SELECT r.fingerprint, c.id, c.name, c.description INTO STRICT found_fingerprint, found_id, found_name, found_description
      FROM ${names.idempotency} AS r JOIN ${names.categories} AS c ON c.id = r.category_id
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
function consumeFunctionSql(names: RateLimitsNames): string {
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

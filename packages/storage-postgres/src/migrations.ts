/**
 * The SQL the migrations run: each store's tables and PL/pgSQL functions, as versioned, idempotent steps for the
 * names of {@link PostgresSchemaOptions}. `migratePostgres` (migrate.ts) runs them; teams with their own migration
 * tool take them from {@link postgresMigrations}.
 */
import {
  apiKeysNames,
  categoriesNames,
  rateLimitsNames,
  type ApiKeysNames,
  type CategoriesNames,
  type PostgresSchemaOptions,
  type RateLimitsNames,
} from './names.js';
import {
  addAlgorithmColumnsSql,
  consumeManyAlgorithmsSql,
  consumeManyBatchLockedSql,
  consumeManyCountersSql,
  consumeManyV4CallsAlgorithmsSql,
  consumeManyV6CallsCountersSql,
} from './consume-algorithms-sql.js';

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
 * The migrations of the stores for these names, in order. {@link migratePostgres} runs them; teams with their
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
 * Version 2 of the rate-limit table (after all the above), in place: one row per record (`account:<accountId>`,
 * `anon:<address>`) with its windows as five parallel arrays (`window_names`, `window_starts_ms`, `window_counts`,
 * and the limit and length each was last charged with, `window_limits`, `window_lengths_ms`) and its ban subjects as
 * four (`ban_subjects text[]`; `rejected_starts_ms bigint[]` and `rejected_counts integer[]`, the rejections counted
 * toward the subject's ban in its current ban interval, 0 for none; `banned_until_ms bigint[]`, 0 for none);
 * `rejected_start_ms` and `rejected_count` are dropped. The version 1 function is dropped and
 * `<table>_consume(key, names, limits, window_ms, cost, ban_subject, ban_threshold, ban_interval_ms,
 * ban_duration_ms, now_ms)` created (see {@link postgresRateLimitStore}), which decides one consume by calling
 * version 3's batch function, created here too. A row of version 1 keeps its ban and its
 * rejections as the entry of the ban subject `''`; its window counts are dropped (their limit and length were not
 * kept).
 *
 * Version 1 of the API-key table (after all the above): one row per managed key's record (see
 * {@link postgresApiKeyRecordStore}), `key_id text COLLATE "C" PRIMARY KEY`, `account_id text COLLATE "C" NOT NULL`,
 * `plan text NOT NULL`, the key's own limits `requests_per_minute bigint` and `requests_per_day bigint` (both NULL
 * or both set), `name text`, `created_at_ms bigint NOT NULL`, `updated_at_ms bigint NOT NULL`, `expires_at_ms
 * bigint`, `revoked_at_ms bigint`, `digest bytea NOT NULL` (unique: constraint `<table>_digest`), `previous_digest
 * bytea` (unique where set: index `<table>_previous_digest`) and `previous_valid_until_ms bigint` (both NULL or
 * both set); times in Unix epoch ms; and the index `<table>_account` on `(account_id, key_id)` for the listing of
 * an account's keys.
 *
 * Version 3 of the categories table (after all the above): the list version, a one-row table
 * `<table>_list_version (id boolean PRIMARY KEY DEFAULT true CHECK (id), version bigint NOT NULL)` whose `version`
 * starts at the number of categories already stored and counts up by one per statement that writes the categories
 * table (`INSERT`, `UPDATE`, `DELETE`, `TRUNCATE`): the PL/pgSQL function `<table>_list_changed()` run by the
 * statement trigger `<table>_list_changed`, in the writing statement's transaction, so a new category and its version
 * commit together (see {@link postgresCategoryStore}).
 *
 * Version 3 of the rate-limit table (after all the above): the rows stay as version 2 left them; the PL/pgSQL
 * function `<table>_consume_many(keys, policies, costs, ban_subjects, now_ms, window_first, window_count,
 * window_names, window_limits, window_lengths_ms, ban_thresholds, ban_intervals_ms, ban_durations_ms)` is created:
 * a batch of consumes in one call, each decided as version 2's function decides it alone, the records locked in the
 * order of their keys, a failing consume failing alone, one reply row per consume (see
 * {@link postgresRateLimitStore}). Version 2's function stays, for instances of the previous release during a
 * rolling upgrade.
 *
 * Version 4 of the rate-limit table (after all the above): the rows stay as they are; `<table>_consume_many` gains an
 * overload with a 14th argument, `p_deadline_ms bigint`, the instant (Unix epoch ms on the database's clock) its
 * caller gives up on the call, and a reply column `clock_ms` (the database's clock when the call started, as text).
 * A call that starts at or past its deadline charges nothing and answers each consume with `error_code` 57014; one
 * whose deadline passes while it runs (a lock wait, say) raises 57014 at its end, which undoes it all. Version 3's
 * function stays, for instances of the previous release during a rolling upgrade.
 *
 * Version 5 of the rate-limit table (after all the above): the rows stay as they are; version 3's
 * `<table>_consume_many` becomes a call of version 4's without a deadline, and `<table>_consume` (version 2's
 * signature) a call of version 3's for one consume, so every signature an earlier release calls gets the same
 * decisions from the one function that holds them.
 *
 * Version 6 of the rate-limit table (after all the above): the `sliding` and `gcra` windows beside `fixed`. The rows
 * gain `window_algorithms text[]` (per window `'sliding'`, `'gcra'`, or NULL for fixed) and `window_previous_counts
 * bigint[]` (a sliding counter's units in the window before its `window_starts_ms`, 0 for the others), parallel to
 * `window_names`, both NULL in a row whose counters are all fixed (so a fixed record's row is what it was). A sliding
 * counter keeps the window's start and count as a fixed one does; a gcra counter keeps in `window_starts_ms` when it
 * was last charged and in `window_counts` the unit-milliseconds outstanding then. `<table>_consume_many` gains an
 * overload with a 15th argument, `p_window_algorithms text[]` (parallel to `p_window_names`; NULL when every window
 * is fixed), and the reply columns `reset_at_ms` and `retry_at_ms`: it decides each window by its algorithm, a
 * counter written by another algorithm converted to the units it holds (see {@link postgresRateLimitStore}).
 * Version 4's signature becomes a call of it with every window fixed, so the previous release's instances keep
 * deciding in the one function (their fixed windows read the units another algorithm's counter holds).
 *
 * Version 7 of the rate-limit table: the rows stay as they are; `<table>_consume_many` gains an overload with a 16th
 * argument, `p_counters boolean`, and the reply columns `starts_ms` and `previous_counts`: with `true` a sliding or
 * gcra window answers its counter as the decision leaves it and the caller computes its usage. Version 6's signature
 * becomes a call of it answering usage as before. A gcra row's `expires_at_ms` is rounded up to its window's end.
 *
 * Version 8 of the rate-limit table: the rows stay as they are; version 7's function is replaced, with the same
 * signature, decisions and answers: a call of two records or more locks its records with one `INSERT … ON CONFLICT
 * DO UPDATE … WHERE false` in key order (inserting a record not stored yet empty and expired), reads them with one
 * `SELECT` and writes them with one `UPDATE`, in one block; when the block fails it is undone and the records are
 * decided one by one, each in a block of its own, as before.
 *
 * @throws TypeError naming the option (`schema`, `categoriesTable`, `rateLimitsTable` or `apiKeysTable`) that holds
 *   a bad name.
 */
export function postgresMigrations(options: PostgresSchemaOptions = {}): PostgresMigration[] {
  const categories = categoriesNames(options);
  const rateLimits = rateLimitsNames(options);
  const apiKeys = apiKeysNames(options);
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
${consumeFunctionV1Sql(rateLimits)}`,
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
    {
      table: rateLimits.table,
      version: 2,
      description: 'rate-limit records v2: costs, window limits and lengths, bans per ban subject',
      sql: `${upgradeRateLimitsSql(rateLimits)};
DROP FUNCTION IF EXISTS ${rateLimits.consumeFunction}(text, text[], bigint[], bigint[], integer, bigint, bigint, bigint);
${consumeManyFunctionSql(rateLimits, false)};
${consumeFunctionSql(rateLimits)}`,
    },
    {
      table: apiKeys.table,
      version: 1,
      description: 'API-key records: digests, account, plan, rotation and revocation',
      sql: apiKeysTableSql(apiKeys),
    },
    {
      table: categories.table,
      version: 3,
      description: 'list version: a one-row table counted up by a statement trigger on every write to the categories',
      sql: listVersionSql(categories),
    },
    {
      table: rateLimits.table,
      version: 3,
      description: 'the batch consume function: the consumes of one call, each decided as if alone',
      sql: consumeManyFunctionSql(rateLimits, false),
    },
    {
      table: rateLimits.table,
      version: 4,
      description: "the batch consume function with the caller's deadline: a call past it charges nothing",
      sql: consumeManyFunctionSql(rateLimits, true),
    },
    {
      table: rateLimits.table,
      version: 5,
      description: "the earlier consume functions call version 4's: one decision in the database",
      sql: `${consumeManyWithoutDeadlineSql(rateLimits)};
${consumeFunctionSql(rateLimits)}`,
    },
    {
      table: rateLimits.table,
      version: 6,
      description: 'sliding and gcra windows beside fixed: the algorithm and previous count of each window, decided by one function',
      sql: `${addAlgorithmColumnsSql(rateLimits)};
${consumeManyAlgorithmsSql(rateLimits)};
${consumeManyV4CallsAlgorithmsSql(rateLimits)}`,
    },
    {
      table: rateLimits.table,
      version: 7,
      description: "the batch consume function answers a sliding or gcra window's counter, and the client computes its usage: less work per decision in the database",
      sql: `${consumeManyCountersSql(rateLimits)};
${consumeManyV6CallsCountersSql(rateLimits)}`,
    },
    {
      table: rateLimits.table,
      version: 8,
      description: 'the batch consume function locks, reads and writes the records of a call of two records or more with one statement each, and keeps generic plans',
      sql: consumeManyBatchLockedSql(rateLimits),
    },
  ];
}

/**
 * The list version of version 3 of the categories table. The row is updated by the writing statement's trigger, so
 * creates queue on it until the creating transaction ends (each create is one short statement).
 */
function listVersionSql(names: CategoriesNames): string {
  return `CREATE TABLE IF NOT EXISTS ${names.listVersion} (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  version bigint NOT NULL
);
INSERT INTO ${names.listVersion} (id, version) SELECT true, count(*) FROM ${names.categories} ON CONFLICT (id) DO NOTHING;
CREATE OR REPLACE FUNCTION ${names.listChangedFunction}() RETURNS trigger
LANGUAGE plpgsql AS $list_changed$
BEGIN
  UPDATE ${names.listVersion} SET version = version + 1;
  RETURN NULL;
END
$list_changed$;
DROP TRIGGER IF EXISTS ${names.listChangedTrigger} ON ${names.categories};
CREATE TRIGGER ${names.listChangedTrigger} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${names.categories}
  FOR EACH STATEMENT EXECUTE FUNCTION ${names.listChangedFunction}()`;
}

/**
 * The API-key table of version 1. `key_id` and `account_id` compare byte by byte (`COLLATE "C"`): listings come in
 * the order JavaScript compares key ids (ASCII), whatever the database's collation, and equality is exact.
 */
function apiKeysTableSql(names: ApiKeysNames): string {
  return `CREATE TABLE IF NOT EXISTS ${names.apiKeys} (
  key_id text COLLATE "C" PRIMARY KEY,
  account_id text COLLATE "C" NOT NULL,
  plan text NOT NULL,
  requests_per_minute bigint,
  requests_per_day bigint,
  name text,
  created_at_ms bigint NOT NULL,
  updated_at_ms bigint NOT NULL,
  expires_at_ms bigint,
  revoked_at_ms bigint,
  digest bytea NOT NULL,
  previous_digest bytea,
  previous_valid_until_ms bigint,
  CONSTRAINT ${names.digestConstraint} UNIQUE (digest),
  CHECK ((requests_per_minute IS NULL) = (requests_per_day IS NULL)),
  CHECK ((previous_digest IS NULL) = (previous_valid_until_ms IS NULL))
);
CREATE UNIQUE INDEX IF NOT EXISTS ${names.previousDigestIndex} ON ${names.apiKeys} (previous_digest) WHERE previous_digest IS NOT NULL;
CREATE INDEX IF NOT EXISTS ${names.accountIndex} ON ${names.apiKeys} (account_id, key_id)`;
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
 * The consume function of version 1 (rows of one API key or address, cost 1, one ban per row), as that version
 * created it: version 2 drops it. Kept verbatim so that the versions, run in order, build the same schema on
 * every database.
 */
function consumeFunctionV1Sql(names: RateLimitsNames): string {
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

/**
 * Version 2 of the rate-limit table, in place (a table at version 1 keeps its rows; a table already at version 2 is
 * left alone, so the step can run twice). Each row becomes one record: its windows gain the `limit` and `windowMs`
 * each was last charged with (`window_limits`, `window_lengths_ms`), and its ban state becomes one entry per ban
 * subject, in arrays parallel to `ban_subjects`: `rejected_starts_ms`, `rejected_counts` (0 for none) and
 * `banned_until_ms` (0 for none; the column of version 1, now an array).
 *
 * A row of version 1 keeps its ban and its rejections as the entry of the ban subject `''` (an anonymous record's:
 * the addresses keep their keys). Its window counts are dropped, since version 1 did not keep the limit and length
 * they were counted with: each caller's current windows count again from 0 (at most one more window's quota, once).
 * The rows of API keys (`key:<keyId>`) are no longer read, since the engine now counts per account
 * (`account:<accountId>`); they expire and are deleted like any other row.
 */
function upgradeRateLimitsSql(names: RateLimitsNames): string {
  const table = names.rateLimits;
  return `DO $upgrade$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_attribute AS a
             WHERE a.attrelid = '${table}'::regclass AND a.attname = 'rejected_count' AND NOT a.attisdropped) THEN
    ALTER TABLE ${table}
      ADD COLUMN window_limits bigint[] NOT NULL DEFAULT '{}',
      ADD COLUMN window_lengths_ms bigint[] NOT NULL DEFAULT '{}',
      ADD COLUMN ban_subjects text[] NOT NULL DEFAULT '{}',
      ADD COLUMN rejected_starts_ms bigint[] NOT NULL DEFAULT '{}',
      ADD COLUMN rejected_counts integer[] NOT NULL DEFAULT '{}';
    UPDATE ${table} AS x SET
      window_names = '{}', window_starts_ms = '{}', window_counts = '{}',
      ban_subjects = CASE WHEN x.banned_until_ms > 0 OR x.rejected_count > 0 THEN ARRAY[''] ELSE '{}' END,
      rejected_starts_ms = CASE WHEN x.banned_until_ms > 0 OR x.rejected_count > 0
        THEN ARRAY[CASE WHEN x.rejected_count > 0 THEN x.rejected_start_ms ELSE 0 END] ELSE '{}' END,
      rejected_counts = CASE WHEN x.banned_until_ms > 0 OR x.rejected_count > 0 THEN ARRAY[x.rejected_count] ELSE '{}' END;
    ALTER TABLE ${table} ALTER COLUMN banned_until_ms TYPE bigint[]
      USING CASE WHEN banned_until_ms > 0 OR rejected_count > 0 THEN ARRAY[banned_until_ms] ELSE '{}' END;
    ALTER TABLE ${table}
      DROP COLUMN rejected_start_ms,
      DROP COLUMN rejected_count,
      ALTER COLUMN window_limits DROP DEFAULT,
      ALTER COLUMN window_lengths_ms DROP DEFAULT,
      ALTER COLUMN ban_subjects DROP DEFAULT,
      ALTER COLUMN rejected_starts_ms DROP DEFAULT,
      ALTER COLUMN rejected_counts DROP DEFAULT;
  END IF;
END
$upgrade$`;
}

/**
 * The consume function of version 2's signature: one consume, decided by version 3's batch function (see
 * {@link consumeManyFunctionSql}) as a batch of one. A consume that fails raises its error (SQLSTATE and message).
 *
 * Reply: the decision's time, the outcome (0 admitted, 1 rate limited, 2 banned), the subject's ban end (0 for
 * none) and each window's count (after the charge when admitted), as text (a host's `pg.types` parsers cannot
 * change them).
 */
function consumeFunctionSql(names: RateLimitsNames): string {
  return `CREATE OR REPLACE FUNCTION ${names.consumeFunction}(
  p_key text, p_names text[], p_limits bigint[], p_window_ms bigint[], p_cost bigint, p_ban_subject text,
  p_ban_threshold integer, p_ban_interval_ms bigint, p_ban_duration_ms bigint, p_now_ms bigint)
RETURNS TABLE (now_ms text, outcome integer, banned_until_ms text, used text)
LANGUAGE plpgsql VOLATILE AS $consume$
DECLARE
  m record;
BEGIN
  SELECT * INTO STRICT m FROM ${names.consumeManyFunction}(ARRAY[p_key], ARRAY[1], ARRAY[p_cost], ARRAY[p_ban_subject],
    ARRAY[p_now_ms], ARRAY[1], ARRAY[coalesce(array_length(p_names, 1), 0)], p_names, p_limits, p_window_ms,
    ARRAY[p_ban_threshold::bigint], ARRAY[p_ban_interval_ms], ARRAY[p_ban_duration_ms]) AS x;
  IF m.error_code IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = m.error_code, MESSAGE = m.error_message;
  END IF;
  RETURN QUERY SELECT m.now_ms, m.outcome, m.banned_until_ms, m.used;
END
$consume$`;
}

/** Version 3's batch consume function as version 5 leaves it: version 4's, without a deadline. */
function consumeManyWithoutDeadlineSql(names: RateLimitsNames): string {
  return `${consumeManyHeaderSql(names, false)}
LANGUAGE plpgsql VOLATILE AS $consume_many$
BEGIN
  RETURN QUERY SELECT m.ordinal, m.now_ms, m.outcome, m.banned_until_ms, m.used, m.error_code, m.error_message
    FROM ${names.consumeManyFunction}(p_keys, p_policies, p_costs, p_ban_subjects, p_now_ms, p_window_first, p_window_count,
      p_window_names, p_window_limits, p_window_lengths_ms, p_ban_thresholds, p_ban_intervals_ms, p_ban_durations_ms, NULL::bigint) AS m;
END
$consume_many$`;
}

/** `CREATE OR REPLACE FUNCTION <table>_consume_many(…) RETURNS TABLE (…)` of version 3, or of version 4 (`withDeadline`). */
function consumeManyHeaderSql(names: RateLimitsNames, withDeadline: boolean): string {
  const deadlineArgument = withDeadline ? ', p_deadline_ms bigint' : '';
  const clockColumn = withDeadline ? ', clock_ms text' : '';
  return `CREATE OR REPLACE FUNCTION ${names.consumeManyFunction}(
  p_keys text[], p_policies integer[], p_costs bigint[], p_ban_subjects text[], p_now_ms bigint[],
  p_window_first integer[], p_window_count integer[], p_window_names text[], p_window_limits bigint[], p_window_lengths_ms bigint[],
  p_ban_thresholds bigint[], p_ban_intervals_ms bigint[], p_ban_durations_ms bigint[]${deadlineArgument})
RETURNS TABLE (ordinal integer, now_ms text, outcome integer, banned_until_ms text, used text, error_code text, error_message text${clockColumn})`;
}

/**
 * The consume function of version 3 (and, with the deadline, of version 4): a batch of consumes in one call (one
 * statement, one transaction), each a mirror of `decideConsume` from `@petstore/core` (contract v2), in the order of
 * the arguments for the consumes of one record. The one place the database decides a consume: version 5 makes the
 * other signatures call it.
 *
 * The decision, as `decideConsume`'s steps: (1) each window of the request counts the stored counter of its name
 * only when the counter's start and length are the current window's; (2) a banned ban subject is answered with
 * nothing written (only a row that lost its `expires_at_ms` gets one back); (3) when every window has room for the
 * cost every window is charged it, the subject's rejections kept; (4) else nothing is charged, and with a ban policy
 * (a threshold > 0) the rejection counts once toward the subject's ban in the current ban interval, reaching the
 * threshold starts the ban and clears the count; (5) every other subject's ended ban reads 0 and its ended
 * rejections are dropped, a subject with neither is removed; (6) `expires_at_ms` is the latest end of every window,
 * live ban and live rejection interval. A row whose `expires_at_ms` has passed holds nothing that counts.
 *
 * Arguments: per consume (the `p_keys` order is the consumes' arrival order), its record's key, its policy (a
 * number 1..P), its cost, its ban subject and its time (`p_now_ms`, Unix epoch ms; NULL, or a NULL array, for the
 * database's clock). Per policy, its windows as a slice of the three flat window arrays (`p_window_first`, 1-based,
 * and `p_window_count`) and its ban (`p_ban_thresholds`, 0 for no ban policy, `p_ban_intervals_ms`,
 * `p_ban_durations_ms`).
 *
 * Order and locks: the records are taken in the order of their keys (`COLLATE "C"`, byte order), whatever the order
 * the consumes came in, and each record's consumes in their arrival order. Row locks are held to the end of the
 * statement, so two statements that lock rows in different orders could each wait for the other (a deadlock);
 * locking in one order everywhere rules that out. Each record is read once under its lock (`FOR UPDATE`), its
 * consumes decided one after another on the record as the previous ones left it, at the database's clock read once
 * the lock is held (or at each consume's own time), and the row written once (an `UPDATE`, or an `INSERT … ON
 * CONFLICT DO NOTHING` for a new record; when another statement inserted it first, it is read under its lock and
 * decided again). A record whose consumes are all answered "banned" is not written (only a row that lost its
 * `expires_at_ms` gets one back).
 *
 * Failures: each record's consumes run in a block of their own (`BEGIN … EXCEPTION`, a subtransaction): when it
 * fails, its changes are undone and the record's consumes are decided again one at a time, each in a block of its
 * own, so that a failing consume fails alone (its row stays as it was) and the others are answered. A cancelled
 * statement (`statement_timeout`, a cancel request) is not caught: it fails the whole call and undoes it all.
 *
 * Clean-up: after every record is decided, up to two expired rows per row the call created are deleted (`FOR UPDATE
 * SKIP LOCKED`, by the `expires_at_ms` index; last, so that it never holds a lock while waiting for one; a failure
 * of the clean-up is ignored).
 *
 * Reply: one row per consume, in argument order: its ordinal (1-based), and as version 2 answers — the decision's
 * time, the outcome (0 admitted, 1 rate limited, 2 banned), the ban subject's ban end (0 for none) and each window's
 * count — or, for a consume that failed, NULL there and the error's SQLSTATE (`error_code`) and message
 * (`error_message`); numbers as text (a host's `pg.types` parsers cannot change them).
 */
function consumeManyFunctionSql(names: RateLimitsNames, withDeadline: boolean): string {
  // Version 3's text stays as it was (the versions, run in order, build the same schema everywhere); version 4 adds
  // the deadline and the clock column.
  const clockDeclaration = withDeadline ? `
  start_clock bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;` : '';
  const deadlineAtStart = withDeadline ? `
  -- The caller has given up on this call (answered it 503): charge nothing.
  IF start_clock >= p_deadline_ms THEN
    RETURN QUERY SELECT u.o, NULL::text, NULL::integer, NULL::text, NULL::text, '57014'::text,
      'the caller''s deadline had passed when the call started: nothing charged'::text, start_clock::text
      FROM generate_series(1, total) AS u(o);
    RETURN;
  END IF;` : '';
  const deadlineAtEnd = withDeadline ? `
  -- The caller gave up while this call ran (a lock wait, say): undo it all.
  IF floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint >= p_deadline_ms THEN
    RAISE EXCEPTION 'the caller''s deadline passed during the call: nothing charged' USING ERRCODE = '57014';
  END IF;` : '';
  const clockValue = withDeadline ? ', start_clock::text' : '';
  return `${consumeManyHeaderSql(names, withDeadline)}
LANGUAGE plpgsql VOLATILE AS $consume_many$
DECLARE${clockDeclaration}
  total integer := coalesce(array_length(p_keys, 1), 0);
  ord integer[];
  res_t bigint[]; res_outcome integer[]; res_ban bigint[]; res_used text[]; res_code text[]; res_message text[];
  pos integer := 1; last integer; q integer; c integer; alone boolean := false; done boolean; inserted boolean;
  rec_key text; created integer := 0; clean_t bigint;
  r ${names.rateLimits}%ROWTYPE;
  in_table boolean; present boolean; live boolean; dirty boolean; clock bigint; t bigint;
  p integer; n integer; first integer;
  p_names text[]; p_limits bigint[]; p_window_ms bigint[]; p_cost bigint; p_ban_subject text;
  with_ban boolean; p_ban_threshold bigint; p_ban_interval_ms bigint; p_ban_duration_ms bigint;
  i integer; j integer; k integer; w bigint; st bigint;
  starts bigint[]; counts bigint[]; has_room boolean; expires bigint;
  new_subjects text[]; new_rejected_starts bigint[]; new_rejected_counts integer[]; new_ban_ends bigint[];
  entry_end bigint; entry_start bigint; entry_count integer;
  result integer; ban_end bigint; interval_start bigint; rejected integer;
  failed_code text; failed_message text;
BEGIN${deadlineAtStart}
  -- The records in key order (byte order), each record's consumes in arrival order.
  SELECT array_agg(u.o::integer ORDER BY u.k COLLATE "C", u.o) INTO ord FROM unnest(p_keys) WITH ORDINALITY AS u(k, o);
  WHILE pos <= total LOOP
    rec_key := p_keys[ord[pos]];
    -- The consumes decided in one block: all of the record's, or (after its block failed) one at a time.
    last := pos;
    IF NOT alone THEN
      WHILE last < total AND p_keys[ord[last + 1]] = rec_key LOOP last := last + 1; END LOOP;
    END IF;
    done := false; inserted := false;
    BEGIN
      SELECT * INTO r FROM ${names.rateLimits} AS x WHERE x.key = rec_key FOR UPDATE;
      in_table := FOUND;
      LOOP
        present := in_table; dirty := false;
        clock := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
        FOR q IN pos..last LOOP
          c := ord[q];
          t := coalesce(p_now_ms[c], clock);
          p := p_policies[c]; n := p_window_count[p]; first := p_window_first[p];
          p_names := p_window_names[first:first + n - 1]; p_limits := p_window_limits[first:first + n - 1];
          p_window_ms := p_window_lengths_ms[first:first + n - 1];
          p_cost := p_costs[c]; p_ban_subject := p_ban_subjects[c];
          p_ban_threshold := p_ban_thresholds[p]; p_ban_interval_ms := p_ban_intervals_ms[p]; p_ban_duration_ms := p_ban_durations_ms[p];
          with_ban := p_ban_threshold > 0;
          -- A record past its expiry holds nothing that counts (a NULL expiry, lost, still counts).
          live := present AND (r.expires_at_ms IS NULL OR r.expires_at_ms > t);
          starts := '{}'; counts := '{}'; has_room := true; expires := t;
          FOR i IN 1..n LOOP
            w := p_window_ms[i];
            st := t - mod(mod(t, w) + w, w);
            j := CASE WHEN live THEN array_position(r.window_names, p_names[i]) END;
            starts[i] := st;
            counts[i] := CASE WHEN j IS NOT NULL AND r.window_starts_ms[j] = st AND r.window_lengths_ms[j] = w
              THEN r.window_counts[j] ELSE 0 END;
            IF counts[i] + p_cost > p_limits[i] THEN has_room := false; END IF;
            expires := greatest(expires, st + w);
          END LOOP;
          k := CASE WHEN live THEN array_position(r.ban_subjects, p_ban_subject) END;
          IF k IS NOT NULL AND r.banned_until_ms[k] > t THEN
            -- Banned: nothing charged, the ban not extended, the record kept as it is; only a record that lost its
            -- expiry gets back the latest end of what it holds.
            IF r.expires_at_ms IS NULL THEN
              r.expires_at_ms := greatest(t,
                (SELECT max(u.s + u.l) FROM unnest(r.window_starts_ms, r.window_lengths_ms) AS u(s, l)),
                (SELECT max(u.b) FROM unnest(r.banned_until_ms) AS u(b)),
                CASE WHEN with_ban THEN (SELECT max(u.s) + p_ban_interval_ms FROM unnest(r.rejected_starts_ms, r.rejected_counts) AS u(s, c) WHERE u.c > 0) END);
              dirty := true;
            END IF;
            res_t[c] := t; res_outcome[c] := 2; res_ban[c] := r.banned_until_ms[k]; res_used[c] := array_to_string(counts, ',');
            CONTINUE;
          END IF;
          -- The other subjects' bans as they stand now: ended bans read 0, ended (or, without a ban policy, any)
          -- rejections are dropped, a subject with neither is removed.
          new_subjects := '{}'; new_rejected_starts := '{}'; new_rejected_counts := '{}'; new_ban_ends := '{}';
          IF live THEN
            FOR i IN 1..coalesce(array_length(r.ban_subjects, 1), 0) LOOP
              CONTINUE WHEN i = k;
              entry_end := CASE WHEN r.banned_until_ms[i] > t THEN r.banned_until_ms[i] ELSE 0 END;
              IF with_ban AND r.rejected_counts[i] > 0 AND r.rejected_starts_ms[i] + p_ban_interval_ms > t THEN
                entry_start := r.rejected_starts_ms[i]; entry_count := r.rejected_counts[i];
                expires := greatest(expires, entry_start + p_ban_interval_ms);
              ELSE
                entry_start := 0; entry_count := 0;
              END IF;
              IF entry_end > 0 OR entry_count > 0 THEN
                new_subjects := new_subjects || r.ban_subjects[i]; new_rejected_starts := new_rejected_starts || entry_start;
                new_rejected_counts := new_rejected_counts || entry_count; new_ban_ends := new_ban_ends || entry_end;
                expires := greatest(expires, entry_end);
              END IF;
            END LOOP;
          END IF;
          ban_end := 0;
          IF has_room THEN
            FOR i IN 1..n LOOP counts[i] := counts[i] + p_cost; END LOOP;
            result := 0;
            -- The subject's rejections are kept while their interval lasts.
            IF k IS NOT NULL AND with_ban AND r.rejected_counts[k] > 0 AND r.rejected_starts_ms[k] + p_ban_interval_ms > t THEN
              new_subjects := new_subjects || p_ban_subject; new_rejected_starts := new_rejected_starts || r.rejected_starts_ms[k];
              new_rejected_counts := new_rejected_counts || r.rejected_counts[k]; new_ban_ends := new_ban_ends || 0::bigint;
              expires := greatest(expires, r.rejected_starts_ms[k] + p_ban_interval_ms);
            END IF;
          ELSIF NOT with_ban THEN
            result := 1;
          ELSE
            interval_start := t - mod(mod(t, p_ban_interval_ms) + p_ban_interval_ms, p_ban_interval_ms);
            rejected := CASE WHEN k IS NOT NULL AND r.rejected_counts[k] > 0 AND r.rejected_starts_ms[k] = interval_start
              THEN r.rejected_counts[k] ELSE 0 END + 1;
            new_subjects := new_subjects || p_ban_subject;
            IF rejected >= p_ban_threshold THEN
              result := 2; ban_end := t + p_ban_duration_ms;
              new_rejected_starts := new_rejected_starts || 0::bigint; new_rejected_counts := new_rejected_counts || 0; new_ban_ends := new_ban_ends || ban_end;
              expires := greatest(expires, ban_end);
            ELSE
              result := 1;
              new_rejected_starts := new_rejected_starts || interval_start; new_rejected_counts := new_rejected_counts || rejected;
              new_ban_ends := new_ban_ends || 0::bigint;
              expires := greatest(expires, interval_start + p_ban_interval_ms);
            END IF;
          END IF;
          -- The record as this consume leaves it, for the record's next consume and the row.
          r.window_names := p_names; r.window_starts_ms := starts; r.window_counts := counts; r.window_limits := p_limits;
          r.window_lengths_ms := p_window_ms; r.ban_subjects := new_subjects; r.rejected_starts_ms := new_rejected_starts;
          r.rejected_counts := new_rejected_counts; r.banned_until_ms := new_ban_ends; r.expires_at_ms := expires;
          present := true; dirty := true;
          res_t[c] := t; res_outcome[c] := result; res_ban[c] := ban_end; res_used[c] := array_to_string(counts, ',');
        END LOOP;
        EXIT WHEN NOT dirty;
        IF in_table THEN
          UPDATE ${names.rateLimits} AS x
            SET window_names = r.window_names, window_starts_ms = r.window_starts_ms, window_counts = r.window_counts,
                window_limits = r.window_limits, window_lengths_ms = r.window_lengths_ms, ban_subjects = r.ban_subjects,
                rejected_starts_ms = r.rejected_starts_ms, rejected_counts = r.rejected_counts, banned_until_ms = r.banned_until_ms,
                expires_at_ms = r.expires_at_ms
            WHERE x.key = rec_key;
          EXIT;
        END IF;
        INSERT INTO ${names.rateLimits} AS x (key, window_names, window_starts_ms, window_counts, window_limits, window_lengths_ms,
            ban_subjects, rejected_starts_ms, rejected_counts, banned_until_ms, expires_at_ms)
          VALUES (rec_key, r.window_names, r.window_starts_ms, r.window_counts, r.window_limits, r.window_lengths_ms,
            r.ban_subjects, r.rejected_starts_ms, r.rejected_counts, r.banned_until_ms, r.expires_at_ms)
          ON CONFLICT (key) DO NOTHING;
        IF FOUND THEN inserted := true; EXIT; END IF;
        -- Another statement inserted the record meanwhile: decide again under its lock.
        SELECT * INTO r FROM ${names.rateLimits} AS x WHERE x.key = rec_key FOR UPDATE;
        in_table := FOUND;
      END LOOP;
      done := true;
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS failed_code = RETURNED_SQLSTATE, failed_message = MESSAGE_TEXT;
    END;
    IF done THEN
      IF inserted THEN created := created + 1; clean_t := greatest(clean_t, t); END IF;
      pos := last + 1;
    ELSIF last > pos THEN
      alone := true;
      CONTINUE;
    ELSE
      c := ord[pos];
      res_t[c] := NULL; res_code[c] := failed_code; res_message[c] := failed_message;
      pos := pos + 1;
    END IF;
    IF pos <= total AND p_keys[ord[pos]] <> rec_key THEN alone := false; END IF;
  END LOOP;
  IF created > 0 THEN
    BEGIN
      DELETE FROM ${names.rateLimits} AS x WHERE x.key IN (
        SELECT y.key FROM ${names.rateLimits} AS y WHERE y.expires_at_ms < clean_t
        ORDER BY y.expires_at_ms LIMIT 2 * created FOR UPDATE SKIP LOCKED);
    EXCEPTION WHEN OTHERS THEN
      NULL;
    END;
  END IF;${deadlineAtEnd}
  RETURN QUERY SELECT u.o, res_t[u.o]::text, res_outcome[u.o], res_ban[u.o]::text, res_used[u.o], res_code[u.o], res_message[u.o]${clockValue}
    FROM generate_series(1, total) AS u(o);
END
$consume_many$`;
}

/**
 * The PostgreSQL category store as the core's conformance suite takes it (`CategoryStoreHarness`), on a schema of
 * its own, with the hooks that make the idempotent burst deterministic (`holdWrites` and `whenBlocked`) and another
instance on a pool of its own (`other`).
 */
import type { CategoryStoreHarness } from '@petstore/core/testing';
import { postgresCategoryStore } from '../src/category-store.js';
import { holdCategoryWrites, whenCallsBlocked } from './hold-writes.js';
import { emptyMigratedSchema, filePool, GUARD_CALL_TIMEOUT_MS, uniqueSchema } from './postgres.js';

/** Connections of the store's pool: the idempotent burst needs all its 50 calls inside PostgreSQL at once. */
const STORE_CONNECTIONS = 55;

/**
 * A category store on an empty migrated schema (emptyMigratedSchema). `migrationSql` answers the SQL of each
 * migration step for a schema, so a mutation check can install a changed copy instead (on a new schema).
 *
 * `holdWrites` holds the categories table at a SHARE lock on a connection of its own; `whenBlocked(count)` polls
 * `pg_stat_activity` (on that second, small pool) until `count` of the store's calls wait on a lock. The store's
 * `callTimeoutMs` is the case's timeout (20 s), not the default 1 s: held calls wait until all 50 have opened their
 * connections and arrived, which a busy machine may take longer than a second to do.
 */
export async function postgresCategoryHarness(
  options: { migrationSql?: (schema: string) => string[] } = {},
): Promise<CategoryStoreHarness> {
  // The file's pools (see filePool): the store's, a small one for the hooks, and another instance's.
  const pool = filePool('category store', { max: STORE_CONNECTIONS });
  const control = filePool('category control', { max: 2 });
  let schema: string;
  if (options.migrationSql === undefined) {
    schema = await emptyMigratedSchema(pool, 'cat');
  } else {
    // A changed copy of the migrations: a schema of its own, never handed to another case.
    schema = uniqueSchema('cat');
    await pool.query(`CREATE SCHEMA "${schema}"`);
    for (const sql of options.migrationSql(schema)) await pool.query(sql);
  }
  return {
    store: postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }),
    holdWrites: () => holdCategoryWrites(control, schema),
    whenBlocked: (count) => whenCallsBlocked(control, schema, count),
    // Another app instance: a pool of its own on the same schema.
    other: () => postgresCategoryStore({ pool: filePool('other category store', { max: 2 }), schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }),
    // The pools are the file's, ended after it.
    close: async () => undefined,
  };
}

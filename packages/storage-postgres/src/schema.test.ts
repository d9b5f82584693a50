/**
 * The migrations: a version table, idempotent runs, concurrent instances, custom names, and the SQL for teams
 * with their own migration tool.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { postgresCategoryStore } from './category-store.js';
import { postgresRateLimitStore } from './rate-limit-store.js';
import { migratePostgres, postgresMigrations } from './schema.js';
import { connectPool, skipPostgres, uniqueSchema } from './test-support/postgres.js';

describe.skipIf(skipPostgres)('migratePostgres', () => {
  it('creates the schema, the tables and the version table; a second run applies nothing', async () => {
    const pool = connectPool();
    const schema = uniqueSchema('mig');
    const first = await migratePostgres({ pool, schema });
    expect(first.applied.map(({ table, version }) => `${table}@${version}`)).toEqual(['petstore_categories@1', 'petstore_rate_limits@1']);
    expect((await migratePostgres({ pool, schema })).applied).toEqual([]);
    const { rows } = await pool.query<{ table_name: string; version: number }>(
      `SELECT table_name, version FROM "${schema}".petstore_migrations ORDER BY table_name`,
    );
    expect(rows).toEqual([
      { table_name: 'petstore_categories', version: 1 },
      { table_name: 'petstore_rate_limits', version: 1 },
    ]);
    const store = postgresCategoryStore({ pool, schema });
    await store.create({ name: 'Dogs' });
    await migratePostgres({ pool, schema });
    expect(await store.list()).toEqual([{ id: 1, name: 'Dogs' }]);
  });

  it('applies each migration once when several instances start at the same moment', async () => {
    const schema = uniqueSchema('race');
    const reports = await Promise.all([connectPool(), connectPool(), connectPool()].map((pool) => migratePostgres({ pool, schema })));
    expect(reports.flatMap((report) => report.applied)).toHaveLength(2);
  });

  it('keeps stores with their own table names apart in one schema, each with its own versions', async () => {
    const pool = connectPool();
    const schema = uniqueSchema('names');
    await migratePostgres({ pool, schema, categoriesTable: 'Shop_A_categories', rateLimitsTable: 'shop_a_limits' });
    await migratePostgres({ pool, schema, categoriesTable: 'shop_b_categories', rateLimitsTable: 'shop_b_limits' });
    const a = postgresCategoryStore({ pool, schema, table: 'Shop_A_categories' });
    const b = postgresCategoryStore({ pool, schema, table: 'shop_b_categories' });
    await a.create({ name: 'only in A' });
    expect(await b.list()).toEqual([]);
    const limits = postgresRateLimitStore({ pool, schema, table: 'shop_b_limits', time: 'request' });
    const result = await limits.consume('key:k', { windows: [{ name: 'minute', limit: 1, windowMs: 60_000 }], nowMs: 0, ban: undefined });
    expect(result.allowed).toBe(true);
    const { rows } = await pool.query(`SELECT table_name FROM "${schema}".petstore_migrations ORDER BY table_name`);
    expect(rows.map((row: { table_name: string }) => row.table_name)).toEqual(['Shop_A_categories', 'shop_a_limits', 'shop_b_categories', 'shop_b_limits']);
  });

  it('gives SQL that a migration tool can run by hand, twice', async () => {
    const pool = connectPool();
    const schema = uniqueSchema('sql');
    await pool.query(`CREATE SCHEMA "${schema}"`);
    for (let run = 0; run < 2; run++) for (const migration of postgresMigrations({ schema })) await pool.query(migration.sql);
    const store = postgresCategoryStore({ pool, schema });
    expect((await store.create({ name: 'by hand' })).id).toBe(1);
  });

  it('refuses a bad name before sending anything, and leaves nothing behind when a migration fails', async () => {
    const pool = connectPool();
    await expect(migratePostgres({ pool, schema: 'a"b' })).rejects.toThrow(TypeError);
    await expect(migratePostgres({ pool: {} as pg.Pool })).rejects.toThrow(/Pool/);
    const schema = uniqueSchema('fail');
    // A table of that name with other columns makes the index statement fail after the schema was created.
    await pool.query(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".petstore_rate_limits (other integer)`);
    await expect(migratePostgres({ pool, schema })).rejects.toThrow(/expires_at_ms/);
    const { rows } = await pool.query(`SELECT to_regclass($1) AS found`, [`"${schema}".petstore_migrations`]);
    expect(rows[0]).toEqual({ found: null });
  });
});

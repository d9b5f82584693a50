/**
 * What the PostgreSQL category store adds to the conformance suite: ids at the end of the safe-integer range,
 * one statement per call, clear errors for a missing table and a database that is away or slow, and options
 * refused when the store is created.
 */
import { isPetstoreError, PetstoreError } from '@petstore/core';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { postgresCategoryStore } from './category-store.js';
import { PostgresTimeoutError } from './postgres-call.js';
import { countStatements } from './test-support/count-statements.js';
import { connectPool, migratedSchema, skipPostgres, uniqueSchema } from './test-support/postgres.js';

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail('expected the call to fail'),
    (error: unknown) => error,
  );
}

describe.skipIf(skipPostgres)('postgresCategoryStore', () => {
  it('hands out 2^53 - 1 as the last id, then refuses creates with storage_full and writes nothing', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema });
    await pool.query(`ALTER TABLE "${schema}".petstore_categories ALTER COLUMN id RESTART WITH ${MAX_SAFE - 1}`);
    expect((await store.create({ name: 'second to last' })).id).toBe(MAX_SAFE - 1);
    expect(await store.create({ name: 'last', description: 'd' })).toEqual({ id: MAX_SAFE, name: 'last', description: 'd' });
    const refused = await rejection(store.create({ name: 'one too many' }));
    expect(isPetstoreError(refused) && refused.code).toBe('storage_full');
    expect((await store.list()).map((category) => category.id)).toEqual([MAX_SAFE - 1, MAX_SAFE]);
  });

  it('refuses to list an id above 2^53 - 1 written by hand, rather than rounding it', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema });
    await store.create({ name: 'fine' });
    await pool.query(`INSERT INTO "${schema}".petstore_categories (id, name) OVERRIDING SYSTEM VALUE VALUES ($1, 'too big')`, [
      '9007199254740993',
    ]);
    const refused = await rejection(store.list());
    expect(isPetstoreError(refused)).toBe(false);
    expect((refused as Error).message).toMatch(/9007199254740993 .*above 2\^53 - 1/);
  });

  it('sends one statement per create and per list', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema });
    const statements = countStatements(pool);
    await store.create({ name: 'Dogs', description: 'Canine' });
    expect(statements.count).toBe(1);
    expect(statements.texts[0]).toMatch(/^INSERT INTO .* RETURNING/);
    await store.list();
    expect(statements.count).toBe(2);
  });

  it('keeps the created_at of every row, set by the database', async () => {
    const { pool, schema } = await migratedSchema();
    await postgresCategoryStore({ pool, schema }).create({ name: 'Dogs' });
    const { rows } = await pool.query<{ age: number }>(
      `SELECT extract(epoch FROM now() - created_at)::float8 AS age FROM "${schema}".petstore_categories`,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]?.age).toBeGreaterThanOrEqual(0);
    expect(rows[0]?.age).toBeLessThan(60);
  });

  it('says to run the migrations when the table is missing (a 500, not a 503)', async () => {
    const store = postgresCategoryStore({ pool: connectPool(), schema: uniqueSchema('missing') });
    const refused = await rejection(store.list());
    expect(isPetstoreError(refused)).toBe(false);
    expect((refused as Error).message).toMatch(/run migratePostgres/);
  });

  it('answers 503 service_unavailable with Retry-After when the database is unreachable', async () => {
    const pool = connectPool({ connectionString: 'postgres://postgres@127.0.0.1:1/postgres' });
    const refused = await rejection(postgresCategoryStore({ pool }).create({ name: 'x' }));
    expect(refused).toBeInstanceOf(PetstoreError);
    expect(refused).toMatchObject({ code: 'service_unavailable', status: 503, retryAfterSeconds: 5 });
  });

  it('answers 503 when a statement outlasts timeoutMs or the server cancels it (statement_timeout)', async () => {
    const { pool, schema } = await migratedSchema();
    const locker = await pool.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(`LOCK TABLE "${schema}".petstore_categories IN ACCESS EXCLUSIVE MODE`);
      const slow = await rejection(postgresCategoryStore({ pool, schema, timeoutMs: 150 }).list());
      expect(slow).toMatchObject({ code: 'service_unavailable' });
      expect((slow as Error).cause).toBeInstanceOf(PostgresTimeoutError);
      const cancelling = connectPool({ statement_timeout: 100 });
      const cancelled = await rejection(postgresCategoryStore({ pool: cancelling, schema, timeoutMs: 5000 }).create({ name: 'x' }));
      expect(cancelled).toMatchObject({ code: 'service_unavailable' });
      expect(((cancelled as Error).cause as { code?: string }).code).toBe('57014');
    } finally {
      await locker.query('ROLLBACK');
      locker.release();
    }
    expect(await postgresCategoryStore({ pool, schema }).list()).toEqual([]);
  });

  it('refuses wrong options when it is created', () => {
    const pool = new pg.Pool();
    expect(() => postgresCategoryStore({ pool, table: 'categories; DROP TABLE x' })).toThrow(TypeError);
    expect(() => postgresCategoryStore({ pool, schema: '1abc' })).toThrow(/schema must be/);
    expect(() => postgresCategoryStore({ pool, table: 'x'.repeat(56) })).toThrow(TypeError);
    expect(() => postgresCategoryStore({ pool, timeoutMs: 0 })).toThrow(/timeoutMs/);
    expect(() => postgresCategoryStore({ pool: {} as pg.Pool })).toThrow(/Pool/);
    void pool.end();
  });
});

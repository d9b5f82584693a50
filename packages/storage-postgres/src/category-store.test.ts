/**
 * What the PostgreSQL category store adds to the conformance suite: ids at the end of the safe-integer range,
 * one statement per call, clear errors for a missing table and a database that is away or slow, and options
 * refused when the store is created.
 */
import { createHash } from 'node:crypto';
import { isPetstoreError, PetstoreError } from '@petstore/core';
import pg from 'pg';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { postgresCategoryStore } from './category-store.js';
import { PostgresTimeoutError } from './postgres-call.js';
import { countStatements } from '../test-support/count-statements.js';
import { connectPool, databaseNowMs, GUARD_CALL_TIMEOUT_MS, migratedSchema, skipPostgres, uniqueSchema } from '../test-support/postgres.js';

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** An idempotent create's request: key and fingerprint are 64 hex characters made of `label` and `body`. */
function idempotent(label: string, body = 'body', retentionMs = 60_000) {
  const hex = (text: string) => createHash('sha256').update(text).digest('hex');
  return { key: hex(label), fingerprint: hex(body), retentionMs };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail('expected the call to fail'),
    (error: unknown) => error,
  );
}

describe.skipIf(skipPostgres)('postgresCategoryStore', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('hands out 2^53 - 1 as the last id, then refuses creates with storage_full and writes nothing', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    await pool.query(`ALTER TABLE "${schema}".petstore_categories ALTER COLUMN id RESTART WITH ${MAX_SAFE - 1}`);
    expect((await store.create({ name: 'second to last' })).id).toBe(MAX_SAFE - 1);
    expect(await store.create({ name: 'last', description: 'd' })).toEqual({ id: MAX_SAFE, name: 'last', description: 'd' });
    const refused = await rejection(store.create({ name: 'one too many' }));
    expect(isPetstoreError(refused) && refused.code).toBe('storage_full');
    expect((await store.list()).map((category) => category.id)).toEqual([MAX_SAFE - 1, MAX_SAFE]);
  });

  it('refuses to list an id above 2^53 - 1 written by hand, rather than rounding it', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
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
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const statements = countStatements(pool);
    await store.create({ name: 'Dogs', description: 'Canine' });
    expect(statements.count).toBe(1);
    expect(statements.texts[0]).toMatch(/^INSERT INTO .* RETURNING/);
    await store.list();
    expect(statements.count).toBe(2);
  });

  it('answers the listVersion() calls of one turn with one statement, and a call made after that read was sent with a new one', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const other = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const statements = countStatements(pool);
    const versions = await Promise.all(Array.from({ length: 20 }, () => store.listVersion()));
    expect(statements.count).toBe(1);
    expect(statements.texts[0]).toMatch(/^SELECT .*_list_version/);
    expect(new Set(versions).size).toBe(1);
    // The read of `sent` goes at the end of its turn; a call after that waits for a read of its own.
    const sent = store.listVersion();
    await new Promise((resolve) => setImmediate(resolve));
    const later = store.listVersion();
    expect([await sent, await later]).toEqual([versions[0], versions[0]]);
    expect(statements.count).toBe(3);
    // A create through another store between two calls: the second call's read started after it.
    await other.create({ name: 'made elsewhere' });
    expect(await store.listVersion()).not.toBe(versions[0]);
  });

  it('sends one statement per idempotent create, whatever it answers', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const statements = countStatements(pool);
    expect(await store.createIdempotent({ name: 'Dogs', description: 'Canine' }, idempotent('k1'))).toMatchObject({ outcome: 'created' });
    expect(await store.createIdempotent({ name: 'Dogs', description: 'Canine' }, idempotent('k1'))).toMatchObject({ outcome: 'replayed' });
    expect(await store.createIdempotent({ name: 'Cats' }, idempotent('k1', 'other'))).toEqual({ outcome: 'mismatch' });
    expect(statements.count).toBe(3);
    for (const text of statements.texts) expect(text).toMatch(/^SELECT .* FROM "[^"]+"\."petstore_categories_create_idempotent"\(\$1, \$2, \$3, \$4, \$5\)/);
  });

  it('keeps each record for retentionMs by the database clock, with the category id; a replay or mismatch writes nothing', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const request = idempotent('k1', 'body', 30_000);
    const before = await databaseNowMs(pool);
    const created = await store.createIdempotent({ name: 'Dogs', description: '' }, request);
    const after = await databaseNowMs(pool);
    expect(created).toEqual({ outcome: 'created', category: { id: 1, name: 'Dogs', description: '' } });
    const records = `"${schema}".petstore_categories_idempotency`;
    const read = async () =>
      (
        await pool.query<{ key: string; fingerprint: string; category_id: string; expires_at_ms: string; xmin: string }>(
          `SELECT key, fingerprint, category_id::text, xmin::text, expires_at_ms::text FROM ${records}`,
        )
      ).rows;
    const [row] = await read();
    expect(row).toMatchObject({ key: request.key, fingerprint: request.fingerprint, category_id: '1' });
    // retentionMs after the database's clock at the create, which read it between `before` and `after`.
    expect(Number(row?.expires_at_ms)).toBeGreaterThanOrEqual(before + 30_000);
    expect(Number(row?.expires_at_ms)).toBeLessThanOrEqual(after + 30_000);
    expect(await store.createIdempotent({ name: 'Dogs', description: '' }, request)).toEqual({ outcome: 'replayed', category: { id: 1, name: 'Dogs', description: '' } });
    expect(await store.createIdempotent({ name: 'Cats' }, idempotent('k1', 'other'))).toEqual({ outcome: 'mismatch' });
    expect((await read())[0]?.xmin).toBe(row?.xmin); // the same row version: not rewritten
    expect(await store.list()).toEqual([{ id: 1, name: 'Dogs', description: '' }]);
  });

  it('takes over an expired record: the key creates again and its record points at the new category', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    await store.createIdempotent({ name: 'first' }, idempotent('k1'));
    await pool.query(`UPDATE "${schema}".petstore_categories_idempotency SET expires_at_ms = 0`);
    expect(await store.createIdempotent({ name: 'second' }, idempotent('k1', 'another body'))).toEqual({
      outcome: 'created',
      category: { id: 2, name: 'second' },
    });
    expect(await store.createIdempotent({ name: 'second' }, idempotent('k1', 'another body'))).toEqual({
      outcome: 'replayed',
      category: { id: 2, name: 'second' },
    });
    const { rows } = await pool.query(`SELECT category_id::text AS id FROM "${schema}".petstore_categories_idempotency`);
    expect(rows).toEqual([{ id: '2' }]);
  });

  it('deletes up to two expired records per new record, so expired ones go as new keys arrive', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const records = `"${schema}".petstore_categories_idempotency`;
    for (let i = 0; i < 5; i++) await store.createIdempotent({ name: `old ${i}` }, idempotent(`old ${i}`));
    await pool.query(`UPDATE ${records} SET expires_at_ms = 1000 + category_id`); // long expired
    const expiredLeft = async () => Number((await pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${records} WHERE expires_at_ms < 1e6`)).rows[0]?.n);
    await store.createIdempotent({ name: 'new 1' }, idempotent('new 1'));
    expect(await expiredLeft()).toBe(3);
    // A replay and a mismatch delete nothing.
    await store.createIdempotent({ name: 'new 1' }, idempotent('new 1'));
    await store.createIdempotent({ name: 'new 1' }, idempotent('new 1', 'other'));
    expect(await expiredLeft()).toBe(3);
    await store.createIdempotent({ name: 'new 2' }, idempotent('new 2'));
    await store.createIdempotent({ name: 'new 3' }, idempotent('new 3'));
    expect(await expiredLeft()).toBe(0);
    const { rows } = await pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${records}`);
    expect(rows[0]?.n).toBe('3');
    // The oldest went first; the categories stay (they are data).
    expect((await store.list()).map((category) => category.name)).toEqual(['old 0', 'old 1', 'old 2', 'old 3', 'old 4', 'new 1', 'new 2', 'new 3']);
  });

  it('makes a call with a key another transaction is claiming wait for it, then answer its record (or create, after a rollback)', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: 5000 });
    const claim = async (name: string, label: string) => {
      const { key, fingerprint, retentionMs } = idempotent(label);
      return holder.query(`SELECT * FROM "${schema}".petstore_categories_create_idempotent($1, $2, $3, $4, NULL)`, [key, fingerprint, retentionMs, name]);
    };
    /** Resolves once a statement on this schema waits for a lock (polled every 5 ms). */
    const waitingForLock = async () => {
      for (;;) {
        const { rows } = await pool.query(
          `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()`,
          [schema],
        );
        if (rows.length > 0) return;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await claim('first', 'k1');
      const waiting = store.createIdempotent({ name: 'first' }, idempotent('k1'));
      await waitingForLock();
      await holder.query('COMMIT');
      expect(await waiting).toEqual({ outcome: 'replayed', category: { id: 1, name: 'first' } });

      await holder.query('BEGIN');
      await claim('rolled back', 'k2');
      const next = store.createIdempotent({ name: 'kept' }, idempotent('k2'));
      await waitingForLock();
      await holder.query('ROLLBACK');
      expect(await next).toMatchObject({ outcome: 'created', category: { name: 'kept' } });
    } finally {
      holder.release();
    }
    expect((await store.list()).map((category) => category.name)).toEqual(['first', 'kept']);
  });

  it('answers storage_full past the last id and records nothing', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    await pool.query(`ALTER TABLE "${schema}".petstore_categories ALTER COLUMN id RESTART WITH ${MAX_SAFE}`);
    expect(await store.createIdempotent({ name: 'last' }, idempotent('last'))).toEqual({ outcome: 'created', category: { id: MAX_SAFE, name: 'last' } });
    expect(await store.createIdempotent({ name: 'last' }, idempotent('last'))).toEqual({ outcome: 'replayed', category: { id: MAX_SAFE, name: 'last' } });
    const refused = await rejection(store.createIdempotent({ name: 'one too many' }, idempotent('too many')));
    expect(isPetstoreError(refused) && [refused.code, refused.status]).toEqual(['storage_full', 507]);
    const { rows } = await pool.query(`SELECT category_id::text AS id FROM "${schema}".petstore_categories_idempotency`);
    expect(rows).toEqual([{ id: String(MAX_SAFE) }]);
  });

  it('refuses a retentionMs that is not a whole number >= 1 before sending anything', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const statements = countStatements(pool);
    for (const retentionMs of [0, 2.5, Number.NaN]) {
      await expect(store.createIdempotent({ name: 'x' }, idempotent('k', 'body', retentionMs))).rejects.toThrow(/retentionMs/);
    }
    expect(statements.count).toBe(0);
  });

  it('keeps the created_at of every row, set by the database', async () => {
    const { pool, schema } = await migratedSchema();
    const before = await databaseNowMs(pool);
    await postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }).create({ name: 'Dogs' });
    const after = await databaseNowMs(pool);
    const { rows } = await pool.query<{ ms: string }>(
      `SELECT floor(extract(epoch FROM created_at) * 1000)::bigint::text AS ms FROM "${schema}".petstore_categories`,
    );
    expect(rows).toHaveLength(1);
    expect(Number(rows[0]?.ms)).toBeGreaterThanOrEqual(before);
    expect(Number(rows[0]?.ms)).toBeLessThanOrEqual(after);
  });

  it('says to run the migrations when the table is missing (a 500, not a 503)', async () => {
    const store = postgresCategoryStore({ pool: connectPool(), schema: uniqueSchema('missing'), callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const refused = await rejection(store.list());
    expect(isPetstoreError(refused)).toBe(false);
    expect((refused as Error).message).toMatch(/run migratePostgres/);
  });

  it('answers 503 service_unavailable with Retry-After when the database is unreachable', async () => {
    const pool = connectPool({ connectionString: 'postgres://postgres@127.0.0.1:1/postgres' });
    const store = postgresCategoryStore({ pool, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    for (const call of [() => store.create({ name: 'x' }), () => store.createIdempotent({ name: 'x' }, idempotent('down'))]) {
      const refused = await rejection(call());
      expect(refused).toBeInstanceOf(PetstoreError);
      expect(refused).toMatchObject({ code: 'service_unavailable', status: 503, retryAfterSeconds: 5 });
    }
    // Every caller of a turn whose shared read failed gets the failure.
    for (const refused of await Promise.all([store.listVersion(), store.listVersion()].map(rejection))) {
      expect(refused).toMatchObject({ code: 'service_unavailable', status: 503, retryAfterSeconds: 5 });
    }
  });

  it('answers 503 when a statement outlasts callTimeoutMs or the server cancels it (statement_timeout)', async () => {
    const { pool, schema } = await migratedSchema();
    const locker = await pool.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(`LOCK TABLE "${schema}".petstore_categories IN ACCESS EXCLUSIVE MODE`);
      // The store's deadline runs on fake timers (the socket stays real): the locked table holds the statement, and
      // the deadline answers exactly when callTimeoutMs has passed.
      const store = postgresCategoryStore({ pool, schema, callTimeoutMs: 150 });
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const settled = vi.fn();
      const slow = rejection(store.list()).finally(settled);
      await vi.advanceTimersByTimeAsync(149);
      expect(settled).not.toHaveBeenCalled();
      await vi.advanceTimersByTimeAsync(1);
      expect(await slow).toMatchObject({ code: 'service_unavailable' });
      expect((await slow as Error).cause).toMatchObject({ name: 'PostgresTimeoutError', callTimeoutMs: 150 });
      expect((await slow as Error).cause).toBeInstanceOf(PostgresTimeoutError);
      vi.useRealTimers();
      const cancelling = connectPool({ statement_timeout: 100 });
      const cancelled = await rejection(postgresCategoryStore({ pool: cancelling, schema, callTimeoutMs: 30_000 }).create({ name: 'x' }));
      expect(cancelled).toMatchObject({ code: 'service_unavailable' });
      expect(((cancelled as Error).cause as { code?: string }).code).toBe('57014');
    } finally {
      await locker.query('ROLLBACK');
      locker.release();
    }
    expect(await postgresCategoryStore({ pool, schema }).list()).toEqual([]);
  });

  it('refuses wrong options when it is created, naming the option', () => {
    const pool = new pg.Pool();
    expect(() => postgresCategoryStore({ pool, categoriesTable: 'categories; DROP TABLE x' })).toThrow(TypeError);
    expect(() => postgresCategoryStore({ pool, schema: '1abc' })).toThrow(/^schema must be/);
    expect(() => postgresCategoryStore({ pool, categoriesTable: 'x'.repeat(46) })).toThrow(/^categoriesTable must be 1-45/);
    expect(() => postgresCategoryStore({ pool, categoriesTable: 'x'.repeat(45) })).not.toThrow();
    expect(() => postgresCategoryStore({ pool, callTimeoutMs: 0 })).toThrow(/^callTimeoutMs must be a whole number >= 1, got 0/);
    expect(() => postgresCategoryStore({ pool: {} as pg.Pool })).toThrow(/Pool/);
    void pool.end();
  });
});

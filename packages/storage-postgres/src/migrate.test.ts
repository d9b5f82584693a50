/**
 * The migrations: a version table, idempotent runs, concurrent instances, custom names, and the SQL for teams
 * with their own migration tool.
 */
import { createHash } from 'node:crypto';
import { hashApiKey, type ApiKeyRecord } from '@petstore/core';
import pg from 'pg';
import { describe, expect, it, vi } from 'vitest';
import { postgresCategoryStore } from './category-store.js';
import { postgresRateLimitStore } from './rate-limit-store.js';
import { migratePostgres } from './migrate.js';
import { postgresMigrations, type PostgresMigration } from './migrations.js';
import { postgresApiKeyRecordStore } from './api-key-record-store.js';
import { connectPool, GUARD_CALL_TIMEOUT_MS, skipPostgres, uniqueSchema } from '../test-support/postgres.js';

/** A minimal API-key record with the digest of `key-<keyId>`. */
const apiKeyRecord = (keyId: string): ApiKeyRecord => ({
  keyId,
  accountId: 'acct',
  plan: 'free',
  createdAtMs: 0,
  updatedAtMs: 0,
  digest: new Uint8Array(hashApiKey(`key-${keyId}`)),
});

/**
 * SHA-256 of each released migration's SQL for the default names, as the releases shipped it: a database that applied
 * a version never runs it again, so a change to a released step would split databases by when they were made.
 */
const RELEASED_MIGRATION_DIGESTS: Record<string, string> = {
    'petstore_categories@1': '515febe7774463bae58b95812fec8447e136655ec1badd7d9f7a65b70b6e6f4a',
    'petstore_rate_limits@1': 'c1b9ed35e0d42f453a02b6e515f4a532be0cca683fae7bc5446cc54804ae5f00',
    'petstore_categories@2': 'be47feaec4435b2c4180cb9ed1ee679e6048f904bdd921c5b40a446e6536708f',
    'petstore_rate_limits@2': '50820638a591a68d9a3bf15bebae69b79d8ba8a83430bf9583a197c595193080',
    'petstore_api_keys@1': 'be5eaeaa37146386383f803fa41912197c3324a0502fb1c853384692a37c64b4',
    'petstore_categories@3': '59e68ea2b470d1206aafdb32d0be43898e8b4cfb81f787216dfd90eca3b22ba4',
    'petstore_rate_limits@3': '16fc56e743ee30dada7592f071366d22df546a2ce63dde4e54185144deadfaf3',
    'petstore_rate_limits@4': '7879c8739cb11e5407d3abce074137b7e0ef8856451150f5e3d6ce1e0c702d1f',
    'petstore_rate_limits@5': '5bd4a0acbb0c8d9ce127520cd8a53b5e47932681e16b6ccab4a85d1f4e9d7731',
    'petstore_rate_limits@6': '60700beb664ccd591d709fd5fd2f7bb461ce3f61e7611a068bf28ce2d9484094',
    'petstore_rate_limits@7': '1cad2e04e74266ed0ef8181fca5db163cad3a92a1926d3829b64d9dc3c104308',
};

describe('postgresMigrations', () => {
  it('keeps the SQL of every released migration as it shipped (a change is a new version)', () => {
    const released = postgresMigrations().filter((migration) => `${migration.table}@${migration.version}` in RELEASED_MIGRATION_DIGESTS);
    expect(released).toHaveLength(Object.keys(RELEASED_MIGRATION_DIGESTS).length);
    for (const migration of released) {
      const name = `${migration.table}@${migration.version}`;
      expect(createHash('sha256').update(migration.sql).digest('hex'), name).toBe(RELEASED_MIGRATION_DIGESTS[name]);
    }
  });
});

describe.skipIf(skipPostgres)('migratePostgres', () => {
  it('creates the schema, the tables and the version table; a second run applies nothing', async () => {
    const pool = connectPool();
    const schema = uniqueSchema('mig');
    const first = await migratePostgres({ pool, schema });
    expect(first.applied.map(({ table, version }) => `${table}@${version}`)).toEqual([
      'petstore_categories@1',
      'petstore_rate_limits@1',
      'petstore_categories@2',
      'petstore_rate_limits@2',
      'petstore_api_keys@1',
      'petstore_categories@3',
      'petstore_rate_limits@3',
      'petstore_rate_limits@4',
      'petstore_rate_limits@5',
      'petstore_rate_limits@6',
      'petstore_rate_limits@7',
      'petstore_rate_limits@8',
    ]);
    expect((await migratePostgres({ pool, schema })).applied).toEqual([]);
    const { rows } = await pool.query<{ table_name: string; version: number }>(
      `SELECT table_name, version FROM "${schema}".petstore_migrations ORDER BY table_name, version`,
    );
    expect(rows).toEqual([
      { table_name: 'petstore_api_keys', version: 1 },
      { table_name: 'petstore_categories', version: 1 },
      { table_name: 'petstore_categories', version: 2 },
      { table_name: 'petstore_categories', version: 3 },
      { table_name: 'petstore_rate_limits', version: 1 },
      { table_name: 'petstore_rate_limits', version: 2 },
      { table_name: 'petstore_rate_limits', version: 3 },
      { table_name: 'petstore_rate_limits', version: 4 },
      { table_name: 'petstore_rate_limits', version: 5 },
      { table_name: 'petstore_rate_limits', version: 6 },
      { table_name: 'petstore_rate_limits', version: 7 },
      { table_name: 'petstore_rate_limits', version: 8 },
    ]);
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    await store.create({ name: 'Dogs' });
    await migratePostgres({ pool, schema });
    expect(await store.list()).toEqual([{ id: 1, name: 'Dogs' }]);
  });

  it('applies each migration once when several instances start at the same moment', async () => {
    const schema = uniqueSchema('race');
    const reports = await Promise.all([connectPool(), connectPool(), connectPool()].map((pool) => migratePostgres({ pool, schema })));
    expect(reports.flatMap((report) => report.applied)).toHaveLength(postgresMigrations().length);
  });

  it('keeps stores with their own table names apart in one schema, each with its own versions', async () => {
    const pool = connectPool();
    const schema = uniqueSchema('names');
    await migratePostgres({ pool, schema, categoriesTable: 'Shop_A_categories', rateLimitsTable: 'shop_a_limits', apiKeysTable: 'Shop_A_keys' });
    await migratePostgres({ pool, schema, categoriesTable: 'shop_b_categories', rateLimitsTable: 'shop_b_limits', apiKeysTable: 'shop_b_keys' });
    const a = postgresCategoryStore({ pool, schema, categoriesTable: 'Shop_A_categories', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const b = postgresCategoryStore({ pool, schema, categoriesTable: 'shop_b_categories', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    await a.create({ name: 'only in A' });
    expect(await b.list()).toEqual([]);
    const limits = postgresRateLimitStore({ pool, schema, rateLimitsTable: 'shop_b_limits', time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const result = await limits.consume('key:k', { windows: [{ name: 'minute', limit: 1, windowMs: 60_000 }], nowMs: 0, ban: undefined, cost: 1, banSubject: '' });
    expect(result.allowed).toBe(true);
    const { rows } = await pool.query(`SELECT table_name, version FROM "${schema}".petstore_migrations ORDER BY table_name, version`);
    expect(rows.map((row: { table_name: string; version: number }) => `${row.table_name}@${row.version}`)).toEqual([
      'Shop_A_categories@1',
      'Shop_A_categories@2',
      'Shop_A_categories@3',
      'Shop_A_keys@1',
      'shop_a_limits@1',
      'shop_a_limits@2',
      'shop_a_limits@3',
      'shop_a_limits@4',
      'shop_a_limits@5',
      'shop_a_limits@6',
      'shop_a_limits@7',
      'shop_a_limits@8',
      'shop_b_categories@1',
      'shop_b_categories@2',
      'shop_b_categories@3',
      'shop_b_keys@1',
      'shop_b_limits@1',
      'shop_b_limits@2',
      'shop_b_limits@3',
      'shop_b_limits@4',
      'shop_b_limits@5',
      'shop_b_limits@6',
      'shop_b_limits@7',
      'shop_b_limits@8',
    ]);
    const request = { key: 'ab'.repeat(32), fingerprint: 'cd'.repeat(32), retentionMs: 60_000 };
    expect(await a.createIdempotent({ name: 'keyed in A' }, request)).toMatchObject({ outcome: 'created' });
    expect(await b.createIdempotent({ name: 'keyed in B' }, request)).toMatchObject({ outcome: 'created' }); // its own records
    const keysA = postgresApiKeyRecordStore({ pool, schema, apiKeysTable: 'Shop_A_keys', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const keysB = postgresApiKeyRecordStore({ pool, schema, apiKeysTable: 'shop_b_keys', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    await keysA.create(apiKeyRecord('key_a'));
    expect(await keysB.findByKeyId('key_a')).toBeUndefined();
    await keysB.create(apiKeyRecord('key_a')); // the same key id and digest: another table
  });

  it('applies both versions 2 to a schema at version 1, keeping its categories and ids', async () => {
    const pool = connectPool();
    const schema = uniqueSchema('v1');
    // A schema as an earlier release left it: version 1 of both tables, recorded.
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await pool.query(`CREATE TABLE "${schema}".petstore_migrations (
  table_name text NOT NULL, version integer NOT NULL, description text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (table_name, version))`);
    for (const migration of postgresMigrations({ schema }).filter((step) => step.version === 1 && step.table !== 'petstore_api_keys')) {
      await pool.query(migration.sql);
      await pool.query(`INSERT INTO "${schema}".petstore_migrations (table_name, version, description) VALUES ($1, $2, $3)`, [
        migration.table,
        migration.version,
        migration.description,
      ]);
    }
    const store = postgresCategoryStore({ pool, schema });
    await store.create({ name: 'Dogs' });
    const request = { key: 'ab'.repeat(32), fingerprint: 'cd'.repeat(32), retentionMs: 60_000 };
    // Before version 2 an idempotent create says what to do (a 500, not a 503).
    const refused = await store.createIdempotent({ name: 'Cats' }, request).catch((error: unknown) => error);
    expect((refused as Error).message).toMatch(/run migratePostgres/);

    const report = await migratePostgres({ pool, schema });
    expect(report.applied).toEqual([
      { table: 'petstore_categories', version: 2, description: 'idempotency records of creates and the idempotent create function' },
      { table: 'petstore_rate_limits', version: 2, description: 'rate-limit records v2: costs, window limits and lengths, bans per ban subject' },
      { table: 'petstore_api_keys', version: 1, description: 'API-key records: digests, account, plan, rotation and revocation' },
      {
        table: 'petstore_categories',
        version: 3,
        description: 'list version: a one-row table counted up by a statement trigger on every write to the categories',
      },
      { table: 'petstore_rate_limits', version: 3, description: 'the batch consume function: the consumes of one call, each decided as if alone' },
      { table: 'petstore_rate_limits', version: 4, description: "the batch consume function with the caller's deadline: a call past it charges nothing" },
      { table: 'petstore_rate_limits', version: 5, description: "the earlier consume functions call version 4's: one decision in the database" },
      {
        table: 'petstore_rate_limits',
        version: 6,
        description: 'sliding and gcra windows beside fixed: the algorithm and previous count of each window, decided by one function',
      },
      {
        table: 'petstore_rate_limits',
        version: 7,
        description: "the batch consume function answers a sliding or gcra window's counter, and the client computes its usage: less work per decision in the database",
      },
      {
        table: 'petstore_rate_limits',
        version: 8,
        description: 'the batch consume function locks, reads and writes the records of a call of two records or more with one statement each, and keeps generic plans',
      },
    ]);
    expect(await store.createIdempotent({ name: 'Cats' }, request)).toEqual({ outcome: 'created', category: { id: 2, name: 'Cats' } });
    expect(await store.createIdempotent({ name: 'Cats' }, request)).toEqual({ outcome: 'replayed', category: { id: 2, name: 'Cats' } });
    expect(await store.list()).toEqual([
      { id: 1, name: 'Dogs' },
      { id: 2, name: 'Cats' },
    ]);
    expect((await migratePostgres({ pool, schema })).applied).toEqual([]);
  });

  it('adds the list version to a schema at categories version 2: it starts at the stored count and counts every create', async () => {
    const pool = connectPool();
    const schema = uniqueSchema('lv');
    await pool.query(`CREATE SCHEMA "${schema}"`);
    for (const migration of postgresMigrations({ schema }).filter((step) => !(step.table === 'petstore_categories' && step.version === 3))) {
      await pool.query(migration.sql);
    }
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    await store.create({ name: 'Dogs' });
    await store.create({ name: 'Cats' });
    await expect(store.listVersion()).rejects.toThrow(/run migratePostgres/);
    const v3 = postgresMigrations({ schema }).find((step) => step.table === 'petstore_categories' && step.version === 3);
    await pool.query((v3 as PostgresMigration).sql);
    await pool.query((v3 as PostgresMigration).sql); // idempotent: the count is kept, one trigger
    expect(await store.listVersion()).toMatch(/^2@\d+$/);
    await store.create({ name: 'Birds' });
    expect(await store.listVersion()).toMatch(/^3@\d+$/);
    // Every write to the table, by hand too, moves it: a cached list can never outlive a change.
    await pool.query(`UPDATE "${schema}".petstore_categories SET name = 'Hounds' WHERE name = 'Dogs'`);
    expect(await store.listVersion()).toMatch(/^4@\d+$/);
    expect(await store.list()).toEqual([
      { id: 1, name: 'Hounds' },
      { id: 2, name: 'Cats' },
      { id: 3, name: 'Birds' },
    ]);
    // Tables made anew (dropped and migrated again) count from the start again: their versions are their own.
    const before = await store.listVersion();
    await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await migratePostgres({ pool, schema });
    for (const name of ['Lizards', 'Snakes', 'Frogs', 'Toads']) await store.create({ name });
    expect((await store.list()).length).toBe(4);
    expect(await store.listVersion()).not.toBe(before);
  });

  it('upgrades the rate-limit table of the previous release in place: its bans and rejections kept, the v1 function gone', async () => {
    const pool = connectPool();
    const schema = uniqueSchema('rl1');
    const table = `"${schema}".petstore_rate_limits`;
    // The schema as an earlier release left it: every migration but rate-limit versions 2 and 3, recorded.
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await pool.query(`CREATE TABLE "${schema}".petstore_migrations (
  table_name text NOT NULL, version integer NOT NULL, description text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (table_name, version))`);
    const previousRelease = (step: PostgresMigration) =>
      step.table !== 'petstore_api_keys' && !(step.table === 'petstore_rate_limits' && step.version >= 2) && !(step.table === 'petstore_categories' && step.version === 3);
    for (const migration of postgresMigrations({ schema }).filter(previousRelease)) {
      await pool.query(migration.sql);
      await pool.query(`INSERT INTO "${schema}".petstore_migrations (table_name, version, description) VALUES ($1, $2, $3)`, [
        migration.table,
        migration.version,
        migration.description,
      ]);
    }
    // Rows written by the previous release's function (its signature: key, names, limits, window_ms, ban threshold,
    // interval and duration, now): an address banned, an address with one rejection counted, an API key counting.
    const T = Date.UTC(2026, 0, 1, 12);
    const v1 = (key: string, nowMs: number, limit: number, threshold: number) =>
      pool.query(`SELECT outcome FROM "${schema}".petstore_rate_limits_consume($1, '{minute,day}', $2, '{60000,86400000}', $3, 60000, 600000, $4)`, [
        key,
        [limit, 1000],
        threshold,
        nowMs,
      ]);
    for (let i = 0; i < 3; i++) await v1('anon:203.0.113.9', T + i, 1, 2); // admitted, rejected, banned until T + 2 + 10 min
    for (let i = 0; i < 2; i++) await v1('anon:198.51.100.1', T + i, 1, 3); // admitted, one rejection counted
    for (let i = 0; i < 5; i++) await v1('key:k1', T + i, 100, 3);

    const report = await migratePostgres({ pool, schema });
    expect(report.applied.map(({ table, version }) => `${table}@${version}`)).toEqual([
      'petstore_rate_limits@2',
      'petstore_api_keys@1',
      'petstore_categories@3',
      'petstore_rate_limits@3',
      'petstore_rate_limits@4',
      'petstore_rate_limits@5',
      'petstore_rate_limits@6',
      'petstore_rate_limits@7',
      'petstore_rate_limits@8',
    ]);
    const columns = await pool.query<{ column_name: string; data_type: string }>(
      `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'petstore_rate_limits' ORDER BY column_name`,
      [schema],
    );
    expect(Object.fromEntries(columns.rows.map((row) => [row.column_name, row.data_type]))).toEqual({
      key: 'text',
      window_names: 'ARRAY',
      window_starts_ms: 'ARRAY',
      window_counts: 'ARRAY',
      window_limits: 'ARRAY',
      window_lengths_ms: 'ARRAY',
      ban_subjects: 'ARRAY',
      rejected_starts_ms: 'ARRAY',
      rejected_counts: 'ARRAY',
      banned_until_ms: 'ARRAY',
      expires_at_ms: 'bigint',
      window_algorithms: 'ARRAY',
      window_previous_counts: 'ARRAY',
    });
    const functions = await pool.query(
      `SELECT p.oid FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = 'petstore_rate_limits_consume'`,
      [schema],
    );
    expect(functions.rowCount).toBe(1);

    const store = postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const ban = { rejectedThreshold: 2, intervalMs: 60_000, durationMs: 600_000 };
    const windows = [
      { name: 'minute', limit: 1, windowMs: 60_000 },
      { name: 'day', limit: 1000, windowMs: 86_400_000 },
    ];
    // The banned address is still banned, until the same end; peek shows it as the record's own ban ('').
    expect(await store.peek('anon:203.0.113.9', T + 10)).toEqual({ nowMs: T + 10, windows: [], bans: [{ subject: '', bannedUntilMs: T + 2 + 600_000 }] });
    expect(await store.consume('anon:203.0.113.9', { windows, nowMs: T + 11, cost: 1, ban, banSubject: '' })).toMatchObject({
      allowed: false,
      reason: 'banned',
      bannedUntilMs: T + 2 + 600_000,
    });
    // The other address's rejection still counts: its window counts restart (version 1 kept no limits), so it is
    // admitted once, and then banned at its second rejection of the interval, not its third.
    const three = { ...ban, rejectedThreshold: 3 };
    const outcomes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const result = await store.consume('anon:198.51.100.1', { windows, nowMs: T + 20 + i, cost: 1, ban: three, banSubject: '' });
      outcomes.push(result.allowed ? 'allowed' : result.reason);
    }
    expect(outcomes).toEqual(['allowed', 'rate_limited', 'banned']);
    // Every row is a readable record of version 2; the API key's (no longer read by the engine) just expires.
    expect((await store.peek('key:k1', T + 30)).bans).toEqual([]);
    const { rows } = await pool.query<{ key: string; subjects: string[] }>(`SELECT key, ban_subjects AS subjects FROM ${table} ORDER BY key`);
    expect(rows).toEqual([
      { key: 'anon:198.51.100.1', subjects: [''] },
      { key: 'anon:203.0.113.9', subjects: [''] },
      { key: 'key:k1', subjects: [] },
    ]);
    expect((await migratePostgres({ pool, schema })).applied).toEqual([]);
  });

  it('applies rate-limit versions 3 and 4 to a schema of an earlier release: the records its consumes wrote keep counting', async () => {
    const pool = connectPool();
    const schema = uniqueSchema('rl2');
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await pool.query(`CREATE TABLE "${schema}".petstore_migrations (
  table_name text NOT NULL, version integer NOT NULL, description text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (table_name, version))`);
    for (const migration of postgresMigrations({ schema }).filter((step) => !(step.table === 'petstore_rate_limits' && step.version >= 3))) {
      await pool.query(migration.sql);
      await pool.query(`INSERT INTO "${schema}".petstore_migrations (table_name, version, description) VALUES ($1, $2, $3)`, [
        migration.table,
        migration.version,
        migration.description,
      ]);
    }
    // Two consumes by the previous release's function (version 2's signature), one unit each, the second a ban subject's.
    const v2 = (nowMs: number, subject: string) =>
      pool.query(`SELECT outcome FROM "${schema}".petstore_rate_limits_consume('account:a', '{minute}', '{3}', '{60000}', 1, $1, 0, 0, 0, $2)`, [subject, nowMs]);
    await v2(0, '');
    await v2(1, 'key_1');
    const report = await migratePostgres({ pool, schema });
    expect(report.applied.map(({ table, version }) => `${table}@${version}`)).toEqual([
      'petstore_rate_limits@3',
      'petstore_rate_limits@4',
      'petstore_rate_limits@5',
      'petstore_rate_limits@6',
      'petstore_rate_limits@7',
      'petstore_rate_limits@8',
    ]);
    // Version 3's, 4's and 6's batch functions stay beside version 7's (its arguments, a deadline, the algorithms, counters
    // answered), for the earlier releases.
    const overloads = await pool.query<{ args: number }>(
      `SELECT p.pronargs AS args FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
       WHERE n.nspname = $1 AND p.proname = 'petstore_rate_limits_consume_many' ORDER BY p.pronargs`,
      [schema],
    );
    expect(overloads.rows.map((row) => row.args)).toEqual([13, 14, 15, 16]);
    const store = postgresRateLimitStore({ pool, schema, time: 'request' });
    const windows = [{ name: 'minute', limit: 3, windowMs: 60_000 }];
    const third = await store.consume('account:a', { windows, nowMs: 2, ban: undefined, cost: 1, banSubject: 'key_1' });
    const fourth = await store.consume('account:a', { windows, nowMs: 3, ban: undefined, cost: 1, banSubject: 'key_1' });
    expect([third.allowed, third.windows[0]?.used, fourth.allowed, fourth.windows[0]?.used]).toEqual([true, 3, false, 3]);
  });

  it("makes the earlier consume functions call version 4's from version 5 on: one decision for every signature", async () => {
    const pool = connectPool();
    const schema = uniqueSchema('rl5');
    await pool.query(`CREATE SCHEMA "${schema}"`);
    // Version 4's decision changed so that every window has room: a function that decides on its own still refuses.
    const roomCheck = 'IF counts[i] + p_cost > p_limits[i] THEN has_room := false; END IF;';
    const steps = postgresMigrations({ schema });
    const isRateLimits = (step: { table: string; version: number }, version: number) => step.table === 'petstore_rate_limits' && step.version === version;
    // The schema as version 4 left it (version 6, after 5, makes version 4's signature a call of its own).
    for (const step of steps.filter((step) => !(step.table === 'petstore_rate_limits' && step.version >= 5))) {
      if (isRateLimits(step, 4)) expect(step.sql.split(roomCheck)).toHaveLength(2);
      await pool.query(isRateLimits(step, 4) ? step.sql.replace(roomCheck, '') : step.sql);
    }
    // A limit of 0: refused by the decision, admitted by the changed one.
    const v2 = (key: string) =>
      pool.query(`SELECT outcome FROM "${schema}".petstore_rate_limits_consume($1, '{minute}', '{0}', '{60000}', 1, '', 0, 0, 0, 0)`, [key]);
    const v3 = (key: string) =>
      pool.query(
        `SELECT outcome FROM "${schema}".petstore_rate_limits_consume_many(ARRAY[$1], '{1}', '{1}', '{""}', '{0}', '{1}', '{1}', '{minute}', '{0}', '{60000}', '{0}', '{0}', '{0}')`,
        [key],
      );
    expect([(await v2('account:a')).rows, (await v3('account:b')).rows]).toEqual([[{ outcome: 1 }], [{ outcome: 1 }]]);
    await pool.query(steps.find((step) => isRateLimits(step, 5))!.sql);
    expect([(await v2('account:c')).rows, (await v3('account:d')).rows]).toEqual([[{ outcome: 0 }], [{ outcome: 0 }]]);
    // A consume that fails still raises its error through version 2's signature (here: windows without names).
    await expect(
      pool.query(`SELECT outcome FROM "${schema}".petstore_rate_limits_consume('account:e', NULL, NULL, NULL, 1, '', 0, 0, 0, 0)`),
    ).rejects.toMatchObject({ code: '23502' });
  });

  it('adds the API-key table to a schema of the previous release: digests unique, previous digests unique where set', async () => {
    const pool = connectPool();
    const schema = uniqueSchema('keys1');
    await pool.query(`CREATE SCHEMA "${schema}"`);
    await pool.query(`CREATE TABLE "${schema}".petstore_migrations (
  table_name text NOT NULL, version integer NOT NULL, description text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (table_name, version))`);
    for (const migration of postgresMigrations({ schema }).filter((step) => step.table !== 'petstore_api_keys' && step.version < 3)) {
      await pool.query(migration.sql);
      await pool.query(`INSERT INTO "${schema}".petstore_migrations (table_name, version, description) VALUES ($1, $2, $3)`, [
        migration.table,
        migration.version,
        migration.description,
      ]);
    }
    const report = await migratePostgres({ pool, schema });
    expect(report.applied.map(({ table, version }) => `${table}@${version}`)).toEqual(['petstore_api_keys@1', 'petstore_categories@3', 'petstore_rate_limits@3', 'petstore_rate_limits@4', 'petstore_rate_limits@5', 'petstore_rate_limits@6', 'petstore_rate_limits@7', 'petstore_rate_limits@8']);
    const indexes = await pool.query<{ indexname: string; indexdef: string }>(
      `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'petstore_api_keys' ORDER BY indexname`,
      [schema],
    );
    expect(indexes.rows.map((row) => row.indexdef.replace(`"${schema}".`, '').replace(`${schema}.`, ''))).toEqual([
      'CREATE INDEX petstore_api_keys_account ON petstore_api_keys USING btree (account_id, key_id)',
      'CREATE UNIQUE INDEX petstore_api_keys_digest ON petstore_api_keys USING btree (digest)',
      'CREATE UNIQUE INDEX petstore_api_keys_pkey ON petstore_api_keys USING btree (key_id)',
      'CREATE UNIQUE INDEX petstore_api_keys_previous_digest ON petstore_api_keys USING btree (previous_digest) WHERE (previous_digest IS NOT NULL)',
    ]);
    // Two records may both have no previous digest; two may not share one (the store refuses it as a duplicate).
    const store = postgresApiKeyRecordStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    await store.create(apiKeyRecord('key_1'));
    await store.create(apiKeyRecord('key_2'));
    const previous = { previousDigest: new Uint8Array(32), previousValidUntilMs: 1 };
    await store.create({ ...apiKeyRecord('key_3'), ...previous });
    await expect(store.create({ ...apiKeyRecord('key_4'), ...previous })).rejects.toMatchObject({ code: 'internal_error' });
    expect((await store.list()).records.map((record) => record.keyId)).toEqual(['key_1', 'key_2', 'key_3']);
    expect((await migratePostgres({ pool, schema })).applied).toEqual([]);
  });

  it('takes the longest names whose derived identifiers fit in 63 bytes, untruncated, and refuses one character more', async () => {
    const pool = connectPool();
    const schema = `s${uniqueSchema('long')}`.padEnd(63, 'x');
    const categoriesTable = 'c'.repeat(45);
    const rateLimitsTable = 'r'.repeat(49);
    const apiKeysTable = 'k'.repeat(47);
    expect(() => postgresMigrations({ schema: `${schema}x` })).toThrow(/schema must be 1-63/);
    expect(() => postgresMigrations({ categoriesTable: `${categoriesTable}c` })).toThrow(/categoriesTable must be 1-45/);
    expect(() => postgresMigrations({ rateLimitsTable: `${rateLimitsTable}r` })).toThrow(/rateLimitsTable must be 1-49/);
    expect(() => postgresMigrations({ apiKeysTable: `${apiKeysTable}k` })).toThrow(/apiKeysTable must be 1-47/);
    await migratePostgres({ pool, schema, categoriesTable, rateLimitsTable, apiKeysTable });
    const { rows } = await pool.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = $1
       UNION ALL SELECT p.proname FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = $1`,
      [schema],
    );
    expect(rows.map((row) => row.name)).toEqual(
      expect.arrayContaining([
        categoriesTable,
        `${categoriesTable}_idempotency`,
        `${categoriesTable}_idempotency_exp`,
        `${categoriesTable}_create_idempotent`,
        rateLimitsTable,
        `${rateLimitsTable}_expires_at_ms`,
        `${rateLimitsTable}_consume`,
        `${rateLimitsTable}_consume_many`,
        apiKeysTable,
        `${apiKeysTable}_digest`,
        `${apiKeysTable}_previous_digest`,
        `${apiKeysTable}_account`,
      ]),
    );
    const store = postgresCategoryStore({ pool, schema, categoriesTable, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const request = { key: 'ab'.repeat(32), fingerprint: 'cd'.repeat(32), retentionMs: 60_000 };
    expect(await store.createIdempotent({ name: 'long' }, request)).toEqual({ outcome: 'created', category: { id: 1, name: 'long' } });
    // The longest names give a notification channel of 63 bytes, which LISTEN and pg_notify take untruncated.
    const keys = postgresApiKeyRecordStore({ pool, schema, apiKeysTable, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    let told: (digests: Uint8Array[]) => void = () => undefined;
    const delivered = new Promise<Uint8Array[]>((resolve) => (told = resolve));
    await keys.watch({ onChange: (digests) => told(digests), onDisconnect: () => undefined, onReconnect: () => undefined });
    await keys.create(apiKeyRecord('key_long'));
    expect(await delivered).toEqual([apiKeyRecord('key_long').digest]);
    await keys.close();
  });

  it('gives SQL that a migration tool can run by hand, twice', async () => {
    const pool = connectPool();
    const schema = uniqueSchema('sql');
    await pool.query(`CREATE SCHEMA "${schema}"`);
    for (let run = 0; run < 2; run++) for (const migration of postgresMigrations({ schema })) await pool.query(migration.sql);
    const store = postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    expect((await store.create({ name: 'by hand' })).id).toBe(1);
    const request = { key: 'ab'.repeat(32), fingerprint: 'cd'.repeat(32), retentionMs: 60_000 };
    expect(await store.createIdempotent({ name: 'keyed' }, request)).toEqual({ outcome: 'created', category: { id: 2, name: 'keyed' } });
    await postgresApiKeyRecordStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }).create(apiKeyRecord('key_hand'));
    const limits = postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const windows = [{ name: 'minute', limit: 5, windowMs: 60_000 }];
    expect(await limits.consume('account:a', { windows, nowMs: 0, cost: 3, ban: undefined, banSubject: 'k1' })).toMatchObject({ allowed: true });
    expect(await limits.consume('account:a', { windows, nowMs: 1, cost: 3, ban: undefined, banSubject: 'k2' })).toMatchObject({
      allowed: false,
      reason: 'rate_limited',
      windows: [{ used: 3, remaining: 2 }],
    });
  });

  it('takes one names object for the runner and both stores', async () => {
    const pool = connectPool();
    const names = { schema: uniqueSchema('shared'), categoriesTable: 'shop_categories', rateLimitsTable: 'shop_limits', apiKeysTable: 'shop_keys' };
    await migratePostgres({ pool, ...names });
    const categories = postgresCategoryStore({ pool, ...names });
    const limits = postgresRateLimitStore({ pool, ...names, time: 'request' });
    await postgresApiKeyRecordStore({ pool, ...names }).create(apiKeyRecord('key_shared'));
    await categories.create({ name: 'Dogs' });
    await limits.consume('key:k', { windows: [{ name: 'minute', limit: 1, windowMs: 60_000 }], nowMs: 0, ban: undefined, cost: 1, banSubject: '' });
    const count = async (table: string) => (await pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM "${names.schema}".${table}`)).rows[0]?.n;
    expect([await count('shop_categories'), await count('shop_limits'), await count('shop_keys')]).toEqual(['1', '1', '1']);
  });

  it('names the option that holds a bad name, before sending anything', async () => {
    const pool = connectPool();
    const connect = vi.spyOn(pool, 'connect');
    await expect(migratePostgres({ pool, schema: 'a"b' })).rejects.toThrow(/^schema must be 1-63 /);
    await expect(migratePostgres({ pool, categoriesTable: 'shop-categories' })).rejects.toThrow(/^categoriesTable must be 1-45 .*"shop-categories"/);
    await expect(migratePostgres({ pool, rateLimitsTable: 'r'.repeat(50) })).rejects.toThrow(/^rateLimitsTable must be 1-49 /);
    await expect(migratePostgres({ pool, apiKeysTable: 'api keys' })).rejects.toThrow(/^apiKeysTable must be 1-47 /);
    expect(connect).not.toHaveBeenCalled();
  });

  it('refuses a bad pool, and leaves nothing behind when a migration fails', async () => {
    const pool = connectPool();
    await expect(migratePostgres({ pool: {} as pg.Pool })).rejects.toThrow(/Pool/);
    const schema = uniqueSchema('fail');
    // A table of that name with other columns makes the index statement fail after the schema was created.
    await pool.query(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".petstore_rate_limits (other integer)`);
    await expect(migratePostgres({ pool, schema })).rejects.toThrow(/expires_at_ms/);
    const { rows } = await pool.query(`SELECT to_regclass($1) AS found`, [`"${schema}".petstore_migrations`]);
    expect(rows[0]).toEqual({ found: null });
  });
});

/**
 * What the PostgreSQL rate-limit store adds to the conformance suite: the database's clock, one statement per
 * consume, exact quotas across pools (instances), expired rows cleaned by the consumes themselves, and failures.
 */
import { isPetstoreError, MINUTE_MS, DAY_MS, windowStartMs, type BanPolicy, type ConsumeRequest, type RateLimitWindow } from '@petstore/core';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { postgresRateLimitStore } from './rate-limit-store.js';
import { countStatements } from '../test-support/count-statements.js';
import { connectPool, databaseNowMs, migratedSchema, skipPostgres, uniqueSchema } from '../test-support/postgres.js';

const T0 = Date.UTC(2026, 0, 1);
const minuteAndDay = (perMinute: number, perDay: number): RateLimitWindow[] => [
  { name: 'minute', limit: perMinute, windowMs: MINUTE_MS },
  { name: 'day', limit: perDay, windowMs: DAY_MS },
];
/** A consume request: cost 1, no ban policy, the anonymous ban subject, unless told. */
const req = (windows: RateLimitWindow[], nowMs: number, options: { ban?: BanPolicy; cost?: number; subject?: string } = {}): ConsumeRequest => ({
  windows,
  nowMs,
  cost: options.cost ?? 1,
  ban: options.ban,
  banSubject: options.subject ?? '',
});

describe.skipIf(skipPostgres)('postgresRateLimitStore', () => {
  it("decides at the database's clock by default, ignoring the request's", async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema });
    const before = await databaseNowMs(pool);
    const result = await store.consume('key:clock', req(minuteAndDay(5, 10), T0));
    const after = await databaseNowMs(pool);
    expect(result.nowMs).toBeGreaterThanOrEqual(before);
    expect(result.nowMs).toBeLessThanOrEqual(after);
    expect(result.windows[1]?.resetAtMs).toBe(Math.floor(result.nowMs / DAY_MS) * DAY_MS + DAY_MS);
  });

  it('sends one statement per lone consume (a new record and a known one), per peek and per reset', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, time: 'request' });
    const statements = countStatements(pool);
    await store.consume('account:one', req(minuteAndDay(5, 10), T0));
    await store.consume('account:one', req(minuteAndDay(5, 10), T0 + 1, { cost: 2, subject: 'k2' }));
    expect(statements.count).toBe(2);
    expect((await store.peek('account:one', T0 + 2)).windows.map((window) => window.used)).toEqual([3, 3]);
    expect(statements.count).toBe(3);
    await store.reset('account:one');
    expect(statements.count).toBe(4);
    expect(await store.peek('account:one', T0 + 3)).toEqual({ nowMs: T0 + 3, windows: [], bans: [] });
  });

  it("peeks at the database's clock by default, without locking or writing the row", async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema });
    const consumed = await store.consume('account:peek', req(minuteAndDay(5, 10), T0, { cost: 4, subject: 'k1' }));
    const version = async () =>
      (await pool.query<{ xmin: string }>(`SELECT xmin::text FROM "${schema}".petstore_rate_limits WHERE key = 'account:peek'`)).rows[0]?.xmin;
    const before = await version();
    // Another transaction holds the row's lock (as a consume in flight would): peek reads past it.
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM "${schema}".petstore_rate_limits WHERE key = 'account:peek' FOR UPDATE`);
      const start = await databaseNowMs(pool);
      const snapshot = await store.peek('account:peek', T0);
      const end = await databaseNowMs(pool);
      expect(snapshot.nowMs).toBeGreaterThanOrEqual(start);
      expect(snapshot.nowMs).toBeLessThanOrEqual(end);
      // The 4 units count while the peek falls in the consume's window (a peek past its end reads 0).
      const used = (windowMs: number) => (windowStartMs(snapshot.nowMs, windowMs) === windowStartMs(consumed.nowMs, windowMs) ? 4 : 0);
      expect(snapshot.windows).toEqual([
        { name: 'minute', limit: 5, windowMs: MINUTE_MS, used: used(MINUTE_MS), remaining: 5 - used(MINUTE_MS), resetAtMs: windowStartMs(snapshot.nowMs, MINUTE_MS) + MINUTE_MS },
        { name: 'day', limit: 10, windowMs: DAY_MS, used: used(DAY_MS), remaining: 10 - used(DAY_MS), resetAtMs: windowStartMs(snapshot.nowMs, DAY_MS) + DAY_MS },
      ]);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    expect(await version()).toBe(before);
  });

  it('admits exactly the quota of a burst spread over three pools (instances) sharing the table', async () => {
    const { schema } = await migratedSchema();
    const stores = [connectPool(), connectPool(), connectPool()].map((pool) => postgresRateLimitStore({ pool, schema }));
    const results = await Promise.all(
      Array.from({ length: 150 }, (_, i) => stores[i % 3]?.consume('key:shared', req(minuteAndDay(1000, 40), 0))),
    );
    expect(results.filter((result) => result?.allowed)).toHaveLength(40);
  });

  it('deletes expired rows as new keys arrive, without a timer', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, time: 'request' });
    const minute: RateLimitWindow[] = [{ name: 'minute', limit: 5, windowMs: MINUTE_MS }];
    for (let i = 0; i < 40; i++) await store.consume(`key:old-${i}`, req(minute, T0));
    // An hour later every old row has expired; each new key deletes up to two of them.
    for (let i = 0; i < 30; i++) await store.consume(`key:new-${i}`, req(minute, T0 + 60 * MINUTE_MS));
    const { rows } = await pool.query<{ key: string }>(`SELECT key FROM "${schema}".petstore_rate_limits ORDER BY key`);
    expect(rows.filter((row) => row.key.startsWith('key:old-'))).toEqual([]);
    expect(rows).toHaveLength(30);
    // A live row is never deleted by the clean-up.
    for (let i = 0; i < 5; i++) await store.consume(`key:later-${i}`, req(minute, T0 + 60 * MINUTE_MS + 1));
    const after = await store.consume('key:new-0', req(minute, T0 + 60 * MINUTE_MS + 2));
    expect(after.windows[0]?.used).toBe(2);
  });

  it('answers a banned key without writing its row', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, time: 'request' });
    const ban = { rejectedThreshold: 2, intervalMs: MINUTE_MS, durationMs: 10 * MINUTE_MS };
    const windows = minuteAndDay(1, 100);
    for (let i = 0; i < 3; i++) await store.consume('key:banned', req(windows, T0 + i, { ban }));
    const version = async () =>
      (await pool.query<{ xmin: string }>(`SELECT xmin::text FROM "${schema}".petstore_rate_limits WHERE key = 'key:banned'`)).rows[0]?.xmin;
    const before = await version();
    const banned = await store.consume('key:banned', req(windows, T0 + 5 * MINUTE_MS, { ban }));
    expect(banned.allowed ? 'allowed' : banned.reason).toBe('banned');
    expect(await version()).toBe(before);
  });

  it('answers 503 service_unavailable when the database is unreachable, and a clear error when the function is missing', async () => {
    const away = postgresRateLimitStore({ pool: connectPool({ connectionString: 'postgres://postgres@127.0.0.1:1/postgres' }) });
    await expect(away.consume('key:x', req(minuteAndDay(1, 1), T0))).rejects.toMatchObject({
      code: 'service_unavailable',
      retryAfterSeconds: 5,
    });
    const unmigrated = postgresRateLimitStore({ pool: connectPool(), schema: uniqueSchema('missing') });
    const missing = await unmigrated.consume('key:x', req(minuteAndDay(1, 1), T0)).catch((error: unknown) => error);
    expect(isPetstoreError(missing)).toBe(false);
    expect((missing as Error).message).toMatch(/run migratePostgres/);
  });

  it('refuses wrong options when created, naming the option, and non-integer numbers per consume', async () => {
    const pool = new pg.Pool();
    expect(() => postgresRateLimitStore({ pool, time: 'client' as 'server' })).toThrow(/^time must be/);
    expect(() => postgresRateLimitStore({ pool, rateLimitsTable: 'rate-limits' })).toThrow(/^rateLimitsTable must be 1-49 .*"rate-limits"/);
    expect(() => postgresRateLimitStore({ pool, schema: 'a b' })).toThrow(/^schema must be/);
    expect(() => postgresRateLimitStore({ pool, callTimeoutMs: 1.5 })).toThrow(/^callTimeoutMs must be a whole number >= 1, got 1.5/);
    const store = postgresRateLimitStore({ pool, time: 'request' });
    await expect(store.consume('key:x', req(minuteAndDay(1.5, 2), T0))).rejects.toThrow(TypeError);
    await expect(store.consume('key:x', req(minuteAndDay(1, 2), T0 + 0.5))).rejects.toThrow(/nowMs/);
    await pool.end();
  });
});

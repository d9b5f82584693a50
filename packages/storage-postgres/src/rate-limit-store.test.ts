/**
 * What the PostgreSQL rate-limit store adds to the conformance suite: the database's clock, one statement per
 * consume, exact quotas across pools (instances), expired rows cleaned by the consumes themselves, and failures.
 */
import { isPetstoreError, MINUTE_MS, DAY_MS, type RateLimitWindow } from '@petstore/core';
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

describe.skipIf(skipPostgres)('postgresRateLimitStore', () => {
  it("decides at the database's clock by default, ignoring the request's", async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema });
    const before = await databaseNowMs(pool);
    const result = await store.consume('key:clock', { windows: minuteAndDay(5, 10), nowMs: T0, ban: undefined });
    const after = await databaseNowMs(pool);
    expect(result.nowMs).toBeGreaterThanOrEqual(before);
    expect(result.nowMs).toBeLessThanOrEqual(after);
    expect(result.windows[1]?.resetAtMs).toBe(Math.floor(result.nowMs / DAY_MS) * DAY_MS + DAY_MS);
  });

  it('sends one statement per consume, for a new key and a known one', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, time: 'request' });
    const statements = countStatements(pool);
    await store.consume('key:one', { windows: minuteAndDay(5, 10), nowMs: T0, ban: undefined });
    await store.consume('key:one', { windows: minuteAndDay(5, 10), nowMs: T0 + 1, ban: undefined });
    expect(statements.count).toBe(2);
  });

  it('admits exactly the quota of a burst spread over three pools (instances) sharing the table', async () => {
    const { schema } = await migratedSchema();
    const stores = [connectPool(), connectPool(), connectPool()].map((pool) => postgresRateLimitStore({ pool, schema }));
    const results = await Promise.all(
      Array.from({ length: 150 }, (_, i) => stores[i % 3]?.consume('key:shared', { windows: minuteAndDay(1000, 40), nowMs: 0, ban: undefined })),
    );
    expect(results.filter((result) => result?.allowed)).toHaveLength(40);
  });

  it('deletes expired rows as new keys arrive, without a timer', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, time: 'request' });
    const minute: RateLimitWindow[] = [{ name: 'minute', limit: 5, windowMs: MINUTE_MS }];
    for (let i = 0; i < 40; i++) await store.consume(`key:old-${i}`, { windows: minute, nowMs: T0, ban: undefined });
    // An hour later every old row has expired; each new key deletes up to two of them.
    for (let i = 0; i < 30; i++) await store.consume(`key:new-${i}`, { windows: minute, nowMs: T0 + 60 * MINUTE_MS, ban: undefined });
    const { rows } = await pool.query<{ key: string }>(`SELECT key FROM "${schema}".petstore_rate_limits ORDER BY key`);
    expect(rows.filter((row) => row.key.startsWith('key:old-'))).toEqual([]);
    expect(rows).toHaveLength(30);
    // A live row is never deleted by the clean-up.
    for (let i = 0; i < 5; i++) await store.consume(`key:later-${i}`, { windows: minute, nowMs: T0 + 60 * MINUTE_MS + 1, ban: undefined });
    const after = await store.consume('key:new-0', { windows: minute, nowMs: T0 + 60 * MINUTE_MS + 2, ban: undefined });
    expect(after.windows[0]?.used).toBe(2);
  });

  it('answers a banned key without writing its row', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, time: 'request' });
    const ban = { rejectedThreshold: 2, intervalMs: MINUTE_MS, durationMs: 10 * MINUTE_MS };
    const windows = minuteAndDay(1, 100);
    for (let i = 0; i < 3; i++) await store.consume('key:banned', { windows, nowMs: T0 + i, ban });
    const version = async () =>
      (await pool.query<{ xmin: string }>(`SELECT xmin::text FROM "${schema}".petstore_rate_limits WHERE key = 'key:banned'`)).rows[0]?.xmin;
    const before = await version();
    const banned = await store.consume('key:banned', { windows, nowMs: T0 + 5 * MINUTE_MS, ban });
    expect(banned.allowed ? 'allowed' : banned.reason).toBe('banned');
    expect(await version()).toBe(before);
  });

  it('answers 503 service_unavailable when the database is unreachable, and a clear error when the function is missing', async () => {
    const away = postgresRateLimitStore({ pool: connectPool({ connectionString: 'postgres://postgres@127.0.0.1:1/postgres' }) });
    await expect(away.consume('key:x', { windows: minuteAndDay(1, 1), nowMs: T0, ban: undefined })).rejects.toMatchObject({
      code: 'service_unavailable',
      retryAfterSeconds: 5,
    });
    const unmigrated = postgresRateLimitStore({ pool: connectPool(), schema: uniqueSchema('missing') });
    const missing = await unmigrated.consume('key:x', { windows: minuteAndDay(1, 1), nowMs: T0, ban: undefined }).catch((error: unknown) => error);
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
    await expect(store.consume('key:x', { windows: minuteAndDay(1.5, 2), nowMs: T0, ban: undefined })).rejects.toThrow(TypeError);
    await expect(store.consume('key:x', { windows: minuteAndDay(1, 2), nowMs: T0 + 0.5, ban: undefined })).rejects.toThrow(/nowMs/);
    await pool.end();
  });
});

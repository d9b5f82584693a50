/**
 * What the PostgreSQL rate-limit store adds to the conformance suite: the database's clock, one statement per
 * consume, exact quotas across pools (instances), expired rows cleaned by the consumes themselves, and failures.
 */
import { isPetstoreError, MINUTE_MS, DAY_MS, windowStartMs, type BanPolicy, type ConsumeRequest, type RateLimitWindow } from '@petstore/core';
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PostgresTimeoutError } from './postgres-call.js';
import { MAX_CONSUMES_PER_STATEMENT, postgresRateLimitStore } from './rate-limit-store.js';
import { countStatements } from '../test-support/count-statements.js';
import { connectPool, databaseNowMs, migratedSchema, skipPostgres, GUARD_CALL_TIMEOUT_MS, uniqueSchema } from '../test-support/postgres.js';

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
    const store = postgresRateLimitStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const before = await databaseNowMs(pool);
    const result = await store.consume('key:clock', req(minuteAndDay(5, 10), T0));
    const after = await databaseNowMs(pool);
    expect(result.nowMs).toBeGreaterThanOrEqual(before);
    expect(result.nowMs).toBeLessThanOrEqual(after);
    expect(result.windows[1]?.resetAtMs).toBe(Math.floor(result.nowMs / DAY_MS) * DAY_MS + DAY_MS);
  });

  it('sends one statement per lone consume (a new record and a known one), per peek and per reset', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const statements = countStatements(pool);
    await store.consume('account:one', req(minuteAndDay(5, 10), T0));
    await store.consume('account:one', req(minuteAndDay(5, 10), T0 + 1, { cost: 2, subject: 'k2' }));
    expect(statements.texts.filter((text) => text.includes('_consume_many')).length).toBe(2);
    expect((await store.peek('account:one', T0 + 2)).windows.map((window) => window.used)).toEqual([3, 3]);
    expect(statements.count).toBe(3);
    await store.reset('account:one');
    expect(statements.count).toBe(4);
    expect(await store.peek('account:one', T0 + 3)).toEqual({ nowMs: T0 + 3, windows: [], bans: [] });
  });

  it("peeks at the database's clock by default, without locking or writing the row", async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
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
    const stores = [connectPool(), connectPool(), connectPool()].map((pool) => postgresRateLimitStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }));
    const results = await Promise.all(
      Array.from({ length: 150 }, (_, i) => stores[i % 3]?.consume('key:shared', req(minuteAndDay(1000, 40), 0))),
    );
    expect(results.filter((result) => result?.allowed)).toHaveLength(40);
  });

  it('deletes expired rows as new keys arrive, without a timer', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
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
    const store = postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
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
    const away = postgresRateLimitStore({ pool: connectPool({ connectionString: 'postgres://postgres@127.0.0.1:1/postgres' }), callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    await expect(away.consume('key:x', req(minuteAndDay(1, 1), T0))).rejects.toMatchObject({
      code: 'service_unavailable',
      retryAfterSeconds: 5,
    });
    const unmigrated = postgresRateLimitStore({ pool: connectPool(), schema: uniqueSchema('missing'), callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
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

/** The consume statements of the store in `schema` running in the server: each one's server process, and whether it waits for a lock. */
async function consumesRunning(pool: pg.Pool, schema: string): Promise<Array<{ pid: number; waiting: boolean }>> {
  const { rows } = await pool.query<{ pid: number; waiting: boolean }>(
    `SELECT pid, wait_event_type IS NOT DISTINCT FROM 'Lock' AS waiting FROM pg_stat_activity
     WHERE state = 'active' AND pid <> pg_backend_pid() AND position($1 in query) > 0`,
    [`"${schema}"."petstore_rate_limits_consume_many"`],
  );
  return rows;
}

/** Resolves once `check` holds, asking again at each turn of the event loop (no timer: the tests may fake them). */
async function until(check: () => Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((resolve) => setImmediate(resolve));
}

describe.skipIf(skipPostgres)('postgresRateLimitStore: the consumes of one turn in one statement', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sends the consumes of one turn as one statement, at most MAX_CONSUMES_PER_STATEMENT each, decided in arrival order', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const statements = countStatements(pool);
    const minute: RateLimitWindow[] = [{ name: 'minute', limit: 50, windowMs: MINUTE_MS }];
    // 70 consumes started in one turn: three statements (32, 32, 6), the keys interleaved, the costs differing.
    const keys = Array.from({ length: 70 }, (_, i) => ['key:b', 'key:a', 'key:c'][i % 3] as string);
    const results = await Promise.all(keys.map((key, i) => store.consume(key, req(minute, T0, { cost: 1 + (i % 2) }))));
    expect(MAX_CONSUMES_PER_STATEMENT).toBe(32);
    expect(statements.count).toBe(3);
    // Each key's consumes were charged one after another, each seeing the ones before: its admitted consumes' counts
    // form one chain (each the one before plus its cost), a refused one did not fit, and within a statement they were
    // decided in the order they were made. (The two full statements run on two connections at once: which of them
    // takes a record first is up to PostgreSQL; the six after them wait for both.)
    for (const key of ['key:a', 'key:b', 'key:c']) {
      const seen = keys.flatMap((candidate, i) => (candidate === key ? [{ i, cost: 1 + (i % 2), result: results[i] }] : []));
      const admitted = seen.filter(({ result }) => result?.allowed === true).sort((x, y) => (x.result?.windows[0]?.used ?? 0) - (y.result?.windows[0]?.used ?? 0));
      let used = 0;
      for (const { cost, result } of admitted) {
        used += cost;
        expect(result?.windows[0]?.used).toBe(used);
      }
      expect(used).toBeLessThanOrEqual(50);
      for (const { cost, result } of seen.filter(({ result }) => result?.allowed === false)) {
        expect((result?.windows[0]?.used ?? 0) + cost).toBeGreaterThan(50);
      }
      for (let statement = 0; statement * MAX_CONSUMES_PER_STATEMENT < keys.length; statement++) {
        const inStatement = admitted
          .filter(({ i }) => Math.floor(i / MAX_CONSUMES_PER_STATEMENT) === statement)
          .sort((x, y) => x.i - y.i)
          .map(({ result }) => result?.windows[0]?.used ?? 0);
        expect(inStatement).toEqual([...inStatement].sort((x, y) => x - y));
      }
    }
  });

  it('holds the consumes of later turns while its statement runs, and sends them as one statement once it is answered', async () => {
    const { pool, schema } = await migratedSchema();
    const table = `"${schema}".petstore_rate_limits`;
    const windows = minuteAndDay(5, 10);
    // The store on a pool of its own, whose statements are counted; the lock holder on the other.
    const storePool = connectPool({ max: 2 });
    const store = postgresRateLimitStore({ pool: storePool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    await store.consume('key:locked', req(windows, T0));
    const statements = countStatements(storePool);
    const holder = await pool.connect();
    const answered: string[] = [];
    let first: Promise<unknown> = Promise.resolve();
    try {
      // Another transaction holds one record's row: the statement of the consume below waits for it in the server.
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${table} WHERE key = 'key:locked' FOR UPDATE`);
      first = store.consume('key:locked', req(windows, T0 + 1)).then((result) => answered.push(`locked ${result.windows[0]?.used}`));
      await until(async () => statements.count === 1);
      // Two more turns, each with a consume of another record: held while that statement runs (not sent beside it).
      const later = ['key:free', 'key:free'].map(async (key, i) => {
        await new Promise((resolve) => setImmediate(resolve));
        for (let turn = 0; turn < i; turn++) await new Promise((resolve) => setImmediate(resolve));
        const result = await store.consume(key, req(windows, T0 + 2 + i));
        answered.push(`free ${result.windows[0]?.used}`);
      });
      for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
      expect(statements.count).toBe(1);
      expect(answered).toEqual([]);
      await holder.query('ROLLBACK');
      await Promise.all([first, ...later]);
    } finally {
      holder.release();
    }
    // The held consumes went together, after the first was answered, in the order they were made.
    expect(statements.count).toBe(2);
    expect(answered).toEqual(['locked 2', 'free 1', 'free 2']);
  });

  it('fails a failing consume alone: the others of its statement, also of its record, are decided as if it had not come', async () => {
    const { pool, schema } = await migratedSchema();
    const table = `"${schema}".petstore_rate_limits`;
    // A host's trigger that refuses to write a minute count of 3 or more for key:shared, and anything for key:busy (a
    // transient SQLSTATE: lock_not_available).
    await pool.query(`CREATE FUNCTION "${schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.key = 'key:busy' THEN RAISE EXCEPTION 'busy' USING ERRCODE = '55P03'; END IF;
  IF NEW.key = 'key:shared' AND NEW.window_counts[1] >= 3 THEN RAISE EXCEPTION 'no 3 here'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON ${table} FOR EACH ROW EXECUTE FUNCTION "${schema}".refuse()`);
    const store = postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const statements = countStatements(pool);
    const minute: RateLimitWindow[] = [{ name: 'minute', limit: 10, windowMs: MINUTE_MS }];
    const outcomes = await Promise.allSettled([
      store.consume('key:shared', req(minute, T0, { cost: 1 })), // 1
      store.consume('key:busy', req(minute, T0)),
      store.consume('key:shared', req(minute, T0, { cost: 2 })), // 3: refused by the trigger
      store.consume('key:other', req(minute, T0)),
      store.consume('key:shared', req(minute, T0, { cost: 1 })), // 2, as if the one before had not come
    ]);
    expect(statements.count).toBe(1);
    const answer = (index: number) => {
      const outcome = outcomes[index] as PromiseSettledResult<{ allowed: boolean; windows: { used: number }[] }>;
      return outcome.status === 'fulfilled' ? [outcome.value.allowed, outcome.value.windows[0]?.used] : outcome.reason;
    };
    expect([answer(0), answer(3), answer(4)]).toEqual([[true, 1], [true, 1], [true, 2]]);
    expect(isPetstoreError(answer(2))).toBe(false);
    expect(answer(2)).toMatchObject({ message: "PostgreSQL refused the rate-limit store's statement", cause: { code: 'P0001', message: 'no 3 here' } });
    expect(answer(1)).toMatchObject({ code: 'service_unavailable', cause: { code: '55P03' } });
    const { rows } = await pool.query<{ key: string; counts: string }>(`SELECT key, window_counts::text AS counts FROM ${table} ORDER BY key`);
    expect(rows).toEqual([
      { key: 'key:other', counts: '{1}' },
      { key: 'key:shared', counts: '{2}' },
    ]);
  });

  it('locks, reads and writes the records of a statement of several records with one statement each; one record with its own', async () => {
    const { pool, schema } = await migratedSchema();
    const table = `"${schema}".petstore_rate_limits`;
    // A statement-level trigger logs every INSERT and UPDATE statement run on the table (not its rows).
    await pool.query(`CREATE TABLE "${schema}".statements (op text NOT NULL);
CREATE FUNCTION "${schema}".log_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO "${schema}".statements VALUES (TG_OP); RETURN NULL; END $$;
CREATE TRIGGER log_statement AFTER INSERT OR UPDATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION "${schema}".log_statement()`);
    const logged = async () => {
      const { rows } = await pool.query<{ op: string }>(`DELETE FROM "${schema}".statements RETURNING op`);
      return { inserts: rows.filter((row) => row.op === 'INSERT').length, updates: rows.filter((row) => row.op === 'UPDATE').length };
    };
    const store = postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const windows = minuteAndDay(10, 100);
    const keys = Array.from({ length: 6 }, (_, i) => `key:${i}`);
    // Six new records in one statement: one INSERT locks them all (inserting each empty; its ON CONFLICT DO UPDATE
    // counts as an UPDATE statement) and one UPDATE writes them.
    const first = await Promise.all(keys.map((key) => store.consume(key, req(windows, T0))));
    expect(first.map((result) => [result.allowed, result.windows[0]?.used])).toEqual(keys.map(() => [true, 1]));
    expect(await logged()).toEqual({ inserts: 1, updates: 2 });
    // The same records again, one of them twice, in reverse order: the same three statements; each record's
    // consumes decided in arrival order.
    const second = await Promise.all([...keys.reverse(), 'key:3'].map((key) => store.consume(key, req(windows, T0 + 1))));
    expect(second.map((result) => result.windows[0]?.used)).toEqual([2, 2, 2, 2, 2, 2, 3]);
    expect(await logged()).toEqual({ inserts: 1, updates: 2 });
    // A lone consume, and three of one record in one statement: the record locked, read and written by statements
    // of its own (one UPDATE, nothing inserted), as before version 8.
    expect((await store.consume('key:0', req(windows, T0 + 2))).windows[0]?.used).toBe(3);
    expect(await logged()).toEqual({ inserts: 0, updates: 1 });
    const three = await Promise.all([1, 2, 3].map(() => store.consume('key:0', req(windows, T0 + 3))));
    expect(three.map((result) => result.windows[0]?.used)).toEqual([4, 5, 6]);
    expect(await logged()).toEqual({ inserts: 0, updates: 1 });
    // No record is left as it was inserted (empty, expired).
    const { rows } = await pool.query<{ key: string; counts: string }>(`SELECT key, window_counts::text AS counts FROM ${table} ORDER BY key`);
    expect(rows).toEqual([
      { key: 'key:0', counts: '{6,6}' },
      { key: 'key:1', counts: '{2,2}' },
      { key: 'key:2', counts: '{2,2}' },
      { key: 'key:3', counts: '{3,3}' },
      { key: 'key:4', counts: '{2,2}' },
      { key: 'key:5', counts: '{2,2}' },
    ]);
  });

  it('never deadlocks: two instances sending the same records in opposite orders, at once, charge every consume exactly', async () => {
    const { schema } = await migratedSchema();
    const pools = [connectPool({ max: 4 }), connectPool({ max: 4 })];
    const [forward, backward] = pools.map((pool) => postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS }));
    const keys = Array.from({ length: 30 }, (_, i) => `key:${String(i).padStart(2, '0')}`);
    const minute: RateLimitWindow[] = [{ name: 'minute', limit: 1000, windowMs: MINUTE_MS }];
    const rounds = 4;
    const all: Promise<{ allowed: boolean }>[] = [];
    // Each round: both instances start a statement of all 30 records in the same turn, one in key order, one reversed,
    // so that each locks rows the other needs (several rounds in flight at once).
    for (let round = 0; round < rounds; round++) {
      for (const key of keys) all.push((forward as ReturnType<typeof postgresRateLimitStore>).consume(key, req(minute, T0)));
      for (const key of [...keys].reverse()) all.push((backward as ReturnType<typeof postgresRateLimitStore>).consume(key, req(minute, T0)));
      await new Promise((resolve) => setImmediate(resolve));
    }
    const results = await Promise.all(all);
    expect(results.every((result) => result.allowed)).toBe(true);
    const check = postgresRateLimitStore({ pool: pools[0] as pg.Pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const used = await Promise.all(keys.map(async (key) => (await check.peek(key, T0)).windows[0]?.used));
    expect(used).toEqual(keys.map(() => 2 * rounds));
  });

  it('cancels its statement in the server when callTimeoutMs passes: a consume held by a locked row stops, charging nothing', async () => {
    const { pool, schema } = await migratedSchema();
    const table = `"${schema}".petstore_rate_limits`;
    const windows = minuteAndDay(5, 10);
    await postgresRateLimitStore({ pool, schema, time: 'request' }).consume('key:locked', req(windows, T0));
    const storePool = connectPool({ max: 1 });
    // A deadline far off in real time: the statement carries it to the server, which would answer a statement that
    // starts past it at once, without waiting for the lock (a new connection on a busy machine can take 200 ms to
    // get there). The store's own timer is faked and advanced below.
    const store = postgresRateLimitStore({ pool: storePool, schema, time: 'request', callTimeoutMs: 30_000 });
    const running = () => consumesRunning(pool, schema);
    const holder = await pool.connect();
    try {
      // Another transaction holds the record's row, as a long transaction of the host's would.
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${table} WHERE key = 'key:locked' FOR UPDATE`);
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const answer = store.consume('key:locked', req(windows, T0 + 1)).then(
        () => 'answered',
        (error: unknown) => error,
      );
      await until(async () => (await running()).some((statement) => statement.waiting));
      await vi.advanceTimersByTimeAsync(30_000);
      // Real timers again before the store's cancel request has gone out: should the server not act on it (it may
      // come too early on a busy machine), the store asks again every callTimeoutMs, on a timer that has to run.
      vi.useRealTimers();
      const failure = await answer;
      expect(failure).toMatchObject({ code: 'service_unavailable' });
      expect((failure as Error).cause).toBeInstanceOf(PostgresTimeoutError);
      // The server stops the statement while the row is still locked: it no longer runs (it would wait for the lock).
      await until(async () => (await running()).length === 0);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    // The cancelled consume charged nothing, and its connection went back to the pool (of one) in working order.
    const next = await store.consume('key:locked', req(windows, T0 + 2));
    expect(next.windows.map((window) => window.used)).toEqual([2, 2]);
  });
});

describe.skipIf(skipPostgres)("postgresRateLimitStore: a consume's deadline", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('charges nothing for consumes answered 503 while the server process was stopped, when their statement runs later', async (context) => {
    // The store's one connection's server process stopped (SIGSTOP): the statement waits unread past callTimeoutMs,
    // and the cancel request finds nothing running. Continued once the consumes were answered 503, the statement runs
    // past the deadline it carries and must charge nothing (used units == admitted units).
    const { pool, schema } = await migratedSchema();
    const storePool = connectPool({ max: 1, idleTimeoutMillis: 0 });
    const store = postgresRateLimitStore({ pool: storePool, schema, callTimeoutMs: 100 });
    const windows = minuteAndDay(100, 1000);
    // Admitted, by a store with time to spare: the pool's one connection is open, the function compiled and the
    // statement prepared (on a busy machine that first statement alone can take longer than 100 ms).
    const patient = postgresRateLimitStore({ pool: storePool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    expect((await patient.consume('anon:stopped', req(windows, T0))).allowed).toBe(true);
    const pid = (await storePool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid as number;
    // Only a server process of this machine can be stopped (a DATABASE_URL may name another host).
    const local = await readFile(`/proc/${pid}/cmdline`, 'utf8').then((line) => line.startsWith('postgres'), () => false);
    if (!local) context.skip();
    process.kill(pid, 'SIGSTOP');
    try {
      const failures = await Promise.all(
        [1, 2, 3].map(() =>
          store.consume('anon:stopped', req(windows, T0)).then(() => expect.fail('expected the consume to fail'), (error: unknown) => error),
        ),
      );
      for (const failure of failures) {
        expect(isPetstoreError(failure) && failure.code).toBe('service_unavailable');
        expect((failure as Error).cause).toBeInstanceOf(PostgresTimeoutError);
      }
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    // The pool's one connection comes back once the stopped statement has ended: this peek runs after it.
    const snapshot = await patient.peek('anon:stopped', T0);
    expect(snapshot.windows.map((window) => [window.name, window.used])).toEqual([
      ['minute', 1],
      ['day', 1],
    ]);
  });

  it('gives a consume held behind a running statement its own callTimeoutMs, counted from when it was made', async () => {
    const { pool, schema } = await migratedSchema();
    const table = `"${schema}".petstore_rate_limits`;
    const windows = minuteAndDay(5, 10);
    await postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS }).consume('key:locked', req(windows, T0));
    // Deadlines far off in real time (the statements carry them to the server); the store's timers and clock are
    // faked and moved below.
    const store = postgresRateLimitStore({ pool: connectPool({ max: 2 }), schema, time: 'request', callTimeoutMs: 30_000 });
    const outcome = (promise: Promise<unknown>) => promise.then(() => 'answered', (error: unknown) => error);
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${table} WHERE key = 'key:locked' FOR UPDATE`);
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
      const first = outcome(store.consume('key:locked', req(windows, T0 + 1)));
      await until(async () => (await consumesRunning(pool, schema)).some((statement) => statement.waiting));
      const firstPid = (await consumesRunning(pool, schema))[0]?.pid;
      expect(firstPid).toEqual(expect.any(Number));
      // 10 s later, a second consume: held while the first's statement waits for the row.
      await vi.advanceTimersByTimeAsync(10_000);
      let second: unknown = 'waiting';
      const secondSettled = outcome(store.consume('key:locked', req(windows, T0 + 2))).then((result) => (second = result));
      // The first gives up 30 s after it was made; the second is sent then, with the 10 s it has left.
      await vi.advanceTimersByTimeAsync(20_000);
      expect(await first).toMatchObject({ code: 'service_unavailable' });
      await until(async () => (await consumesRunning(pool, schema)).some((statement) => statement.pid !== firstPid && statement.waiting));
      await vi.advanceTimersByTimeAsync(9_999);
      expect(second).toBe('waiting');
      await vi.advanceTimersByTimeAsync(1);
      await secondSettled;
      expect(second).toMatchObject({ code: 'service_unavailable' });
      expect((second as Error).cause).toBeInstanceOf(PostgresTimeoutError);
      vi.useRealTimers();
      await until(async () => (await consumesRunning(pool, schema)).length === 0);
    } finally {
      vi.useRealTimers();
      await holder.query('ROLLBACK');
      holder.release();
    }
    // Neither was charged.
    const next = await postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS }).consume('key:locked', req(windows, T0 + 3));
    expect(next.windows.map((window) => window.used)).toEqual([2, 2]);
  });

  it('sends a statement once more when the database answers that its deadline passed while the caller still waits (clocks that disagree)', async () => {
    // This process's clock an hour behind the database's: the first statement's deadline reads as long past there,
    // which charges nothing and shows its clock; the consumes go again with that offset and are decided once.
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema });
    const statements = countStatements(pool);
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime((await databaseNowMs(pool)) - 3_600_000);
    const results = await Promise.all([store.consume('key:skewed', req(minuteAndDay(5, 5), T0)), store.consume('key:skewed', req(minuteAndDay(5, 5), T0))]);
    expect(results.map((result) => [result.allowed, result.windows[0]?.used])).toEqual([
      [true, 1],
      [true, 2],
    ]);
    expect(statements.texts.filter((text) => text.includes('_consume_many')).length).toBe(2);
    vi.setSystemTime((await databaseNowMs(pool)) + 3_600_000); // an hour ahead: the deadline is late, never early
    expect((await store.consume('key:skewed', req(minuteAndDay(5, 5), T0))).windows[0]?.used).toBe(3);
  });
});

describe.skipIf(skipPostgres)('postgresRateLimitStore: keys that text cannot carry', () => {
  it('admits a good consume in the same statement as a key holding NUL, and keeps each key in a row of its own', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const windows = minuteAndDay(5, 10);
    // One turn: one statement for both.
    const [bad, good] = await Promise.all([store.consume('anon:bad\0caller', req(windows, T0)), store.consume('anon:good', req(windows, T0))]);
    expect([bad.allowed, good.allowed]).toEqual([true, true]);
    expect((await store.peek('anon:bad\0caller', T0)).windows[0]?.used).toBe(1);
    expect((await store.peek('anon:badcaller', T0)).windows).toEqual([]);
    // Rows keep the key readable: as it is, or with the unit it cannot hold escaped.
    const { rows } = await pool.query<{ key: string }>(`SELECT key FROM "${schema}".petstore_rate_limits ORDER BY key`);
    expect(rows.map((row) => row.key)).toEqual(['anon:bad\uFFFD0000caller', 'anon:good']);
  });

  it('keeps keys with lone surrogates, or U+FFFD, apart: they do not share a record', async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const windows = minuteAndDay(5, 10);
    const keys = ['anon:\uD800', 'anon:\uDC00', 'anon:\uFFFD', 'anon:\uFFFDD800', 'anon:\uD83D\uDE00'];
    await Promise.all(keys.map((key) => store.consume(key, req(windows, T0))));
    for (const key of keys) expect((await store.peek(key, T0)).windows[0]?.used).toBe(1);
    const { rows } = await pool.query<{ count: string }>(`SELECT count(*) AS count FROM "${schema}".petstore_rate_limits`);
    expect(Number(rows[0]?.count)).toBe(keys.length);
  });
});

describe.skipIf(skipPostgres)('postgresRateLimitStore: a batched record', () => {
  it("takes its expiry from its last consume: a minute window's consume, then an hour window's, in one statement", async () => {
    const { pool, schema } = await migratedSchema();
    const store = postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const minute = [{ name: 'minute', limit: 5, windowMs: MINUTE_MS }];
    const hour = [{ name: 'hour', limit: 5, windowMs: 60 * MINUTE_MS }];
    const results = await Promise.all([store.consume('key:expiry', req(minute, T0)), store.consume('key:expiry', req(hour, T0 + 1))]);
    expect(results.map((result) => result.allowed)).toEqual([true, true]);
    const { rows } = await pool.query<{ expires: string }>(`SELECT expires_at_ms::text AS expires FROM "${schema}".petstore_rate_limits WHERE key = 'key:expiry'`);
    expect(rows.map((row) => Number(row.expires))).toEqual([T0 + 60 * MINUTE_MS]);
  });
});

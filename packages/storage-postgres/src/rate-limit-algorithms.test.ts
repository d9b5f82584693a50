/**
 * The `sliding` and `gcra` windows of the PostgreSQL rate-limit store (rate-limit versions 6 and 7) beside `fixed`, step by
 * step against `decideConsume` / `peekState`: answers (with `retryAtMs`), the row kept (as a `RateLimitState`) and its
 * `expires_at_ms`, across window boundaries, with costs above 1, and from one algorithm to another. The seeded runs
 * over every algorithm are in model-comparison.test.ts.
 */
import {
  decideConsume,
  peekState,
  type ConsumeRequest,
  type ConsumeResult,
  type RateLimitAlgorithm,
  type RateLimitState,
  type RateLimitWindow,
} from '@petstore/core';
import { describe, expect, it } from 'vitest';
import { postgresRateLimitStore } from './rate-limit-store.js';
import { migratedSchema, skipPostgres } from '../test-support/postgres.js';
import { readRateLimitState } from '../test-support/rate-limit-state.js';

const T0 = Date.UTC(2026, 0, 1);
const ALGORITHMS: readonly RateLimitAlgorithm[] = ['fixed', 'sliding', 'gcra'];

/** A second of 6 units and a minute of 14, by `algorithm` (limits that do not divide the lengths: gcra rounds). */
const windowsOf = (algorithm: RateLimitAlgorithm): RateLimitWindow[] =>
  [
    { name: 'second', limit: 6, windowMs: 1000 },
    { name: 'minute', limit: 14, windowMs: 60_000 },
  ].map((window) => (algorithm === 'fixed' ? window : { ...window, algorithm }));

const request = (windows: RateLimitWindow[], nowMs: number, cost: number): ConsumeRequest => ({ windows, nowMs, cost, ban: undefined, banSubject: '' });

/** The model of one record: `decideConsume` on the state kept until its `expiresAtMs`, as a store keeps it. */
function model() {
  let record: { state: RateLimitState; expiresAtMs: number } | undefined;
  const stateAt = (nowMs: number) => (record !== undefined && record.expiresAtMs > nowMs ? record.state : undefined);
  return {
    consume(consume: ConsumeRequest) {
      const decision = decideConsume(stateAt(consume.nowMs), consume);
      record = { state: decision.state, expiresAtMs: decision.expiresAtMs };
      return decision;
    },
    peek: (nowMs: number) => peekState(stateAt(nowMs), nowMs),
  };
}

/** A store deciding at the requests' time, its pool, and what its row of `key` holds. */
async function setUp() {
  const { pool, schema } = await migratedSchema('algo');
  const table = `"${schema}".petstore_rate_limits`;
  const store = postgresRateLimitStore({ pool, schema, time: 'request' });
  const row = async (key: string) =>
    (
      await pool.query<{ expires_at_ms: string; fixed_only: boolean }>(
        `SELECT expires_at_ms::text, window_algorithms IS NULL AND window_previous_counts IS NULL AS fixed_only FROM ${table} WHERE key = $1`,
        [key],
      )
    ).rows[0];
  return { pool, schema, table, store, row, state: (key: string) => readRateLimitState(pool, table, key) };
}

/** Runs `steps` (time, cost, windows) on one record of the store and of the model, comparing after each. */
async function compareSteps(setup: Awaited<ReturnType<typeof setUp>>, key: string, steps: Array<[nowMs: number, cost: number, windows: RateLimitWindow[]]>) {
  const expected = model();
  const results: ConsumeResult[] = [];
  for (const [nowMs, cost, windows] of steps) {
    const decision = expected.consume(request(windows, nowMs, cost));
    const at = `at +${nowMs - T0} ms, cost ${cost}`;
    const result = await setup.store.consume(key, request(windows, nowMs, cost));
    expect(result, at).toEqual(decision.result);
    expect(await setup.state(key), at).toEqual(decision.state);
    const keptUntilMs = Number((await setup.row(key))?.expires_at_ms);
    // A gcra record is kept until the end of the window its theoretical arrival time falls in (its indexed expiry
    // then changes once a window, not at every consume): never before the model's end, at most a window after it.
    const gcraWindowMs = Math.max(0, ...Object.values(decision.state.counters).map((counter) => (counter.algorithm === 'gcra' ? counter.windowMs : 0)));
    if (gcraWindowMs === 0) expect(keptUntilMs, at).toBe(decision.expiresAtMs);
    else expect(keptUntilMs - decision.expiresAtMs, at).toSatisfy((late: number) => late >= 0 && late < gcraWindowMs);
    expect(await setup.store.peek(key, nowMs + 1), at).toEqual(expected.peek(nowMs + 1));
    results.push(result);
  }
  return results;
}

describe.skipIf(skipPostgres)('postgresRateLimitStore: sliding and gcra windows', () => {
  it('lists every algorithm', async () => {
    const { store } = await setUp();
    expect(store.algorithms).toEqual(['fixed', 'sliding', 'gcra']);
  });

  for (const algorithm of ALGORITHMS) {
    it(`decides ${algorithm} windows as decideConsume across a window boundary, with costs above 1: answers, rows, expiry, peeks`, async () => {
      const setup = await setUp();
      const windows = windowsOf(algorithm);
      const results = await compareSteps(setup, 'account:a', [
        [T0 + 100, 2, windows],
        [T0 + 400, 3, windows],
        [T0 + 700, 2, windows], // the second is full
        [T0 + 800, 1, windows],
        [T0 + 999, 1, windows],
        [T0 + 1000, 3, windows], // the next second: sliding still weighs the last one's 5 units
        [T0 + 1300, 2, windows],
        [T0 + 1800, 4, windows],
        [T0 + 2600, 5, windows],
        [T0 + 2601, 7, windows], // above the limit: never fits, no retryAtMs
        [T0 + 4200, 3, windows],
      ]);
      const rejected = results.filter((result) => !result.allowed);
      expect(rejected.length).toBeGreaterThanOrEqual(2);
      // Only sliding and gcra windows say when they admit the cost again.
      const retries = rejected.flatMap((result) => result.windows.filter((window) => window.retryAtMs !== undefined));
      expect(retries.length > 0).toBe(algorithm !== 'fixed');
      // A record of fixed windows keeps no algorithm columns: its row is what it was before version 6.
      expect((await setup.row('account:a'))?.fixed_only).toBe(algorithm === 'fixed');
    });
  }

  it('converts a counter one algorithm wrote to the units it holds when another reads it (every pair), as decideConsume', async () => {
    const setup = await setUp();
    for (const from of ALGORITHMS) {
      for (const to of ALGORITHMS) {
        if (from === to) continue;
        // Units charged late in one second, read early in the next (sliding and gcra still hold some), then charged.
        await compareSteps(setup, `account:${from}-${to}`, [
          [T0 + 200, 2, windowsOf(from)],
          [T0 + 900, 2, windowsOf(from)],
          [T0 + 1250, 2, windowsOf(to)],
          [T0 + 1260, 3, windowsOf(to)],
          [T0 + 1700, 1, windowsOf(from)],
        ]);
        // Back to the first algorithm: a row of fixed windows again keeps no algorithm columns.
        expect((await setup.row(`account:${from}-${to}`))?.fixed_only).toBe(from === 'fixed');
      }
    }
    // Another window length is another window: nothing carried over.
    await compareSteps(setup, 'account:length', [
      [T0 + 10, 4, windowsOf('gcra')],
      [T0 + 20, 4, windowsOf('sliding').map((window) => ({ ...window, windowMs: window.windowMs * 2 }))],
    ]);
  });

  for (const algorithm of ['sliding', 'gcra'] as const) {
    it(`answers a rejected ${algorithm} consume with the instant the same cost is admitted again, not a millisecond sooner`, async () => {
      const { store } = await setUp();
      const windows: RateLimitWindow[] = [{ name: 'second', limit: 6, windowMs: 1000, algorithm }];
      expect((await store.consume('account:r', request(windows, T0 + 600, 4))).allowed).toBe(true);
      expect((await store.consume('account:r', request(windows, T0 + 1100, 2))).allowed).toBe(true);
      const refused = await store.consume('account:r', request(windows, T0 + 1200, 5));
      expect(refused.allowed).toBe(false);
      const retryAtMs = refused.windows[0]?.retryAtMs as number;
      expect(retryAtMs).toBeGreaterThan(T0 + 1200);
      // A refusal charges nothing: refused a millisecond before, admitted at the instant.
      expect((await store.consume('account:r', request(windows, retryAtMs - 1, 5))).allowed).toBe(false);
      expect((await store.consume('account:r', request(windows, retryAtMs, 5))).allowed).toBe(true);
    });
  }

  it("decides the previous release's call (version 4's signature, fixed windows) on a sliding record as decideConsume does", async () => {
    const { pool, schema, store } = await setUp();
    const sliding = windowsOf('sliding');
    const decision = model();
    for (const [nowMs, cost] of [
      [T0 + 300, 3],
      [T0 + 1100, 2],
    ] as const) {
      decision.consume(request(sliding, nowMs, cost));
      await store.consume('account:old', request(sliding, nowMs, cost));
    }
    const fixed = windowsOf('fixed');
    const expected = decision.consume(request(fixed, T0 + 1400, 1));
    const { rows } = await pool.query<{ outcome: number; used: string }>(
      `SELECT outcome, used FROM "${schema}".petstore_rate_limits_consume_many(ARRAY['account:old'], '{1}', '{1}', '{""}', ARRAY[$1::bigint],
        '{1}', '{2}', '{second,minute}', '{6,14}', '{1000,60000}', '{0}', '{0}', '{0}', NULL::bigint)`,
      [T0 + 1400],
    );
    expect(rows).toEqual([{ outcome: expected.result.allowed ? 0 : 1, used: expected.result.windows.map((window) => window.used).join(',') }]);
  });

  for (const algorithm of ['sliding', 'gcra'] as const) {
    it(`answers the previous release's call (version 6's signature) on ${algorithm} windows with the usage decideConsume reports`, async () => {
      const { pool, schema } = await setUp();
      const windows = windowsOf(algorithm);
      const decision = model();
      let refused = 0;
      for (const [nowMs, cost] of [
        [T0 + 100, 2],
        [T0 + 400, 3],
        [T0 + 700, 2],
        [T0 + 999, 1],
        [T0 + 1000, 3],
        [T0 + 1300, 2],
        [T0 + 1301, 5],
        [T0 + 1302, 6],
        [T0 + 2601, 7],
      ] as const) {
        const { result } = decision.consume(request(windows, nowMs, cost));
        if (!result.allowed) refused++;
        const { rows } = await pool.query<{ outcome: number; used: string; reset_at_ms: string; retry_at_ms: string }>(
          `SELECT outcome, used, reset_at_ms, retry_at_ms FROM "${schema}".petstore_rate_limits_consume_many(ARRAY['account:v6'], '{1}',
            ARRAY[$2::bigint], '{""}', ARRAY[$1::bigint], '{1}', '{2}', '{second,minute}', '{6,14}', '{1000,60000}', '{0}', '{0}', '{0}',
            NULL::bigint, ARRAY[$3, $3])`,
          [nowMs, cost, algorithm],
        );
        expect(rows, `at +${nowMs - T0} ms`).toEqual([
          {
            outcome: result.allowed ? 0 : 1,
            used: result.windows.map((window) => window.used).join(','),
            reset_at_ms: result.windows.map((window) => window.resetAtMs).join(','),
            retry_at_ms: result.windows.map((window) => window.retryAtMs ?? '').join(','),
          },
        ]);
      }
      expect(refused).toBeGreaterThanOrEqual(2);
    });
  }

  it('refuses a window whose algorithm it does not know, before sending anything', async () => {
    const { store } = await setUp();
    const windows = [{ name: 'second', limit: 5, windowMs: 1000, algorithm: 'token-bucket' as RateLimitAlgorithm }];
    await expect(store.consume('account:x', request(windows, T0, 1))).rejects.toThrow(/algorithm must be one of fixed, sliding, gcra/);
  });
});

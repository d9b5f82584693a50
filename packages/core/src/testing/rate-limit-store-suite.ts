/**
 * The rate-limit store conformance suite: what every {@link RateLimitStore} must do, run against a store
 * author's implementation with their own test runner. Assertions use `node:assert/strict`, so any runner works.
 * It checks behaviour case by case; `runRateLimitModelComparison` (rate-limit-model-comparison.ts) compares a
 * store with the model step by step over random runs.
 *
 * ```ts
 * import { describe, it } from 'vitest';
 * import { runRateLimitStoreConformance } from '@petstore/core/testing';
 * runRateLimitStoreConformance({ describe, it }, { createStore: () => ({ store: myStore() }) });
 * ```
 */
import assert from 'node:assert/strict';
import { DAY_MS, MINUTE_MS } from '../rate-limit/plans.js';
import type { BanPolicy, ConsumeRequest, ConsumeResult, RateLimitStore, RateLimitWindow, WindowUsage } from '../rate-limit/types.js';
import { storeCases } from './store-cases.js';
import type { ConformanceTestApi } from './test-api.js';

/** A fresh store for one case, with optional hooks into its expiry. */
export interface RateLimitStoreHarness {
  /** The store under test. It must decide at `request.nowMs` (configure stores with their own clock so). */
  store: RateLimitStore;
  /**
   * Remaining lifetime of a key in ms: `undefined` when the store holds nothing for it, `Infinity` when it
   * never expires. Needed for the expiry cases (capability `expiry`).
   */
  remainingTtlMs?(key: string): Promise<number | undefined>;
  /** Removes a key's expiry, as a lost TTL would (capability `lostTtl`). */
  dropTtl?(key: string): Promise<void>;
  /** Releases the store's resources after the case. */
  close?(): Promise<void>;
}

/** Options of {@link runRateLimitStoreConformance}. */
export interface RateLimitStoreConformanceOptions {
  /** Name shown in the test report. Default `RateLimitStore conformance`. */
  name?: string;
  /** Creates a fresh, empty store for one case. */
  createStore(): RateLimitStoreHarness | Promise<RateLimitStoreHarness>;
  /**
   * Switches for what a backend cannot do. Both default to `true`; a case whose harness hook is missing then
   * fails and says which switch to turn off.
   * - `expiry`: the harness has `remainingTtlMs`;
   * - `lostTtl`: the harness has `remainingTtlMs` and `dropTtl`.
   */
  capabilities?: { expiry?: boolean; lostTtl?: boolean };
  /** Per-case timeout in ms, for networked stores. Default 20,000. */
  timeoutMs?: number;
}

// 2026-01-01T00:00:00Z: a minute, day and 30-day boundary (20454 days after the epoch is not a multiple of
// 30, so the 30-day window's start is computed, not assumed).
const T0 = Date.UTC(2026, 0, 1);
const BAN: BanPolicy = { rejectedThreshold: 3, intervalMs: MINUTE_MS, durationMs: 10 * MINUTE_MS };
const minuteAndDay = (perMinute: number, perDay: number): RateLimitWindow[] => [
  { name: 'minute', limit: perMinute, windowMs: MINUTE_MS },
  { name: 'day', limit: perDay, windowMs: DAY_MS },
];

/** A consume request: cost 1, no ban policy and the anonymous ban subject unless told. */
function req(
  windows: readonly RateLimitWindow[],
  nowMs: number,
  options: { ban?: BanPolicy; cost?: number; subject?: string } = {},
): ConsumeRequest {
  return { windows, cost: options.cost ?? 1, nowMs, ban: options.ban, banSubject: options.subject ?? '' };
}

function outcome(result: ConsumeResult): string {
  return result.allowed ? 'allowed' : result.reason;
}

function usage(result: ConsumeResult, name: string): WindowUsage {
  const found = result.windows.find((window) => window.name === name);
  assert.ok(found, `the result reports the window "${name}"`);
  return found;
}

/**
 * Registers the conformance cases. Each case gets a fresh store from `createStore` and uses its own keys.
 */
export function runRateLimitStoreConformance(test: ConformanceTestApi, options: RateLimitStoreConformanceOptions): void {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const cases = storeCases(test, () => options.createStore(), timeoutMs);
  const caseWith = (name: string, body: (harness: RateLimitStoreHarness) => Promise<void>, enabled = true) =>
    cases(name, (_store, harness) => body(harness), undefined, enabled);

  test.describe(options.name ?? 'RateLimitStore conformance', () => {
    caseWith('admits exactly the quota under a burst of parallel consumes, never one more', async ({ store }) => {
      const results = await Promise.all(
        Array.from({ length: 200 }, () => store.consume('key:burst', req(minuteAndDay(50, 1000), T0 + 1))),
      );
      assert.equal(results.filter((result) => result.allowed).length, 50, 'admitted of 200 parallel with quota 50');
      for (const result of results.filter((r) => !r.allowed)) {
        assert.equal(result.allowed ? -1 : result.reason, 'rate_limited');
        assert.equal(usage(result, 'minute').remaining, 0);
      }
      const after = await store.consume('key:burst', req(minuteAndDay(50, 1000), T0 + 2));
      assert.equal(usage(after, 'day').used, 50, 'the day counted only the 50 admitted');
    });

    caseWith('charges all windows or none: a full minute does not burn the day, a full day not the minute', async ({ store }) => {
      const windows = minuteAndDay(2, 3);
      for (let i = 0; i < 2; i++) assert.equal((await store.consume('key:aon', req(windows, T0))).allowed, true);
      const minuteFull = await store.consume('key:aon', req(windows, T0 + 10));
      assert.equal(minuteFull.allowed, false);
      assert.equal(usage(minuteFull, 'day').used, 2, 'day untouched by the minute rejection');
      const nextMinute = await store.consume('key:aon', req(windows, T0 + MINUTE_MS));
      assert.equal(nextMinute.allowed, true);
      assert.equal(usage(nextMinute, 'day').used, 3);
      const dayFull = await store.consume('key:aon', req(windows, T0 + 2 * MINUTE_MS));
      assert.equal(dayFull.allowed, false);
      assert.equal(usage(dayFull, 'minute').used, 0, 'minute untouched by the day rejection');
      assert.equal(usage(dayFull, 'minute').remaining, 2);
    });

    caseWith('does not charge rejected requests', async ({ store }) => {
      const windows = minuteAndDay(1, 100);
      await store.consume('key:rej', req(windows, T0));
      for (let i = 0; i < 10; i++) await store.consume('key:rej', req(windows, T0 + i));
      const next = await store.consume('key:rej', req(windows, T0 + MINUTE_MS));
      assert.equal(next.allowed, true);
      assert.equal(usage(next, 'day').used, 2, '1 admitted + this one; the 10 rejections are not counted');
    });

    caseWith('charges the cost to every window, all or nothing, also under a parallel burst', async ({ store }) => {
      const results = await Promise.all(
        Array.from({ length: 100 }, () => store.consume('account:cost-burst', req(minuteAndDay(50, 1000), T0 + 1, { cost: 3 }))),
      );
      assert.equal(results.filter((result) => result.allowed).length, 16, 'admitted of 100 parallel costing 3 with quota 50');
      for (const result of results.filter((r) => !r.allowed)) {
        assert.equal(outcome(result), 'rate_limited');
        assert.equal(usage(result, 'minute').remaining, 2, '2 units left, less than the cost');
      }
      const after = await store.consume('account:cost-burst', req(minuteAndDay(50, 1000), T0 + 2, { cost: 2 }));
      assert.equal(after.allowed, true, 'the 2 units left admit a request costing 2');
      assert.equal(usage(after, 'day').used, 50, 'the day counted the 16 admitted costing 3 and this one');
    });

    caseWith('refuses a cost above what is left without charging any window, and says what is left', async ({ store }) => {
      const windows = minuteAndDay(10, 12);
      assert.equal((await store.consume('account:dear', req(windows, T0, { cost: 8 }))).allowed, true);
      const tooDear = await store.consume('account:dear', req(windows, T0 + 1, { cost: 3 }));
      assert.equal(outcome(tooDear), 'rate_limited');
      assert.deepEqual(
        tooDear.windows.map(({ name, used, remaining }) => ({ name, used, remaining })),
        [
          { name: 'minute', used: 8, remaining: 2 },
          { name: 'day', used: 8, remaining: 4 },
        ],
      );
      // The next minute has room for 5, the day only for 4: refused again, the fresh minute untouched.
      const dayShort = await store.consume('account:dear', req(windows, T0 + MINUTE_MS, { cost: 5 }));
      assert.equal(outcome(dayShort), 'rate_limited');
      assert.equal(usage(dayShort, 'minute').used, 0, 'minute untouched by the day refusal');
      const fits = await store.consume('account:dear', req(windows, T0 + MINUTE_MS + 1, { cost: 4 }));
      assert.equal(fits.allowed, true);
      assert.deepEqual(fits.windows.map((window) => window.used), [4, 12]);
    });

    caseWith('keeps one ban per subject inside one record: the key that earned it, not the others', async ({ store }) => {
      const windows = minuteAndDay(2, 100);
      const account = 'account:shared';
      await store.consume(account, req(windows, T0, { ban: BAN, subject: 'k1' }));
      await store.consume(account, req(windows, T0 + 1, { ban: BAN, subject: 'k2', cost: 1 }));
      const k1: string[] = [];
      for (let i = 2; i <= 4; i++) k1.push(outcome(await store.consume(account, req(windows, T0 + i, { ban: BAN, subject: 'k1' }))));
      assert.deepEqual(k1, ['rate_limited', 'rate_limited', 'banned'], 'k1 refused, then banned at its third rejection');
      // k2 shares the account's windows but not k1's ban: refused for the full minute only, and its own
      // rejections count from 1.
      const k2: string[] = [];
      for (let i = 5; i <= 6; i++) k2.push(outcome(await store.consume(account, req(windows, T0 + i, { ban: BAN, subject: 'k2' }))));
      assert.deepEqual(k2, ['rate_limited', 'rate_limited']);
      const nextMinute = await store.consume(account, req(windows, T0 + MINUTE_MS, { ban: BAN, subject: 'k2' }));
      assert.equal(nextMinute.allowed, true, 'k2 is admitted in the next minute');
      assert.equal(usage(nextMinute, 'day').used, 3, 'one day window for the whole account');
      const stillBanned = await store.consume(account, req(windows, T0 + MINUTE_MS + 1, { ban: BAN, subject: 'k1' }));
      assert.equal(outcome(stillBanned), 'banned', 'k1 is still banned');
      assert.equal(stillBanned.allowed || stillBanned.reason !== 'banned' ? 0 : stillBanned.bannedUntilMs, T0 + 4 + BAN.durationMs);
    });

    caseWith('keeps the rejections counted toward a ban through an admitted request', async ({ store }) => {
      const windows: RateLimitWindow[] = [{ name: 'ten-seconds', limit: 1, windowMs: 10_000 }];
      await store.consume('anon:forget', req(windows, T0, { ban: BAN }));
      await store.consume('anon:forget', req(windows, T0 + 1, { ban: BAN }));
      await store.consume('anon:forget', req(windows, T0 + 2, { ban: BAN }));
      assert.equal((await store.consume('anon:forget', req(windows, T0 + 10_000, { ban: BAN }))).allowed, true);
      const third = await store.consume('anon:forget', req(windows, T0 + 10_001, { ban: BAN }));
      assert.equal(outcome(third), 'banned', 'the third rejection of the minute bans, an admitted request between them or not');
    });

    caseWith('peeks at a record without charging it: windows as of now, shortest first, and the live bans', async ({ store }) => {
      assert.deepEqual(await store.peek('account:peek', T0), { nowMs: T0, windows: [], bans: [] }, 'a record that does not exist');
      await store.consume('account:peek', req([{ name: 'day', limit: 100, windowMs: DAY_MS }, { name: 'minute', limit: 10, windowMs: MINUTE_MS }], T0, { cost: 3, ban: BAN, subject: 'k1' }));
      const windows = minuteAndDay(10, 100);
      for (let i = 0; i < 3; i++) await store.consume('account:peek', req(windows, T0 + 1 + i, { cost: 3, ban: BAN, subject: 'k2' }));
      for (let i = 0; i < 3; i++) await store.consume('account:peek', req(windows, T0 + 10 + i, { cost: 2, ban: BAN, subject: 'k2' }));
      const k2BanEnd = T0 + 11 + BAN.durationMs; // the third rejection: 12 > 10 at T0 + 3, then 11 > 10 twice
      const expected = {
        nowMs: T0 + 20_000,
        windows: [
          { name: 'minute', limit: 10, windowMs: MINUTE_MS, used: 9, remaining: 1, resetAtMs: T0 + MINUTE_MS },
          { name: 'day', limit: 100, windowMs: DAY_MS, used: 9, remaining: 91, resetAtMs: T0 + DAY_MS },
        ],
        bans: [{ subject: 'k2', bannedUntilMs: k2BanEnd }],
      };
      assert.deepEqual(await store.peek('account:peek', T0 + 20_000), expected);
      assert.deepEqual(await store.peek('account:peek', T0 + 20_000), expected, 'peeking twice reads the same: nothing charged');
      const next = await store.consume('account:peek', req(windows, T0 + 20_001, { ban: BAN, subject: 'k1' }));
      assert.equal(usage(next, 'minute').used, 10, 'the next consume sees only what consumes charged');
      assert.deepEqual(await store.peek('account:peek', T0 + 2 * MINUTE_MS), {
        nowMs: T0 + 2 * MINUTE_MS,
        windows: [
          { name: 'minute', limit: 10, windowMs: MINUTE_MS, used: 0, remaining: 10, resetAtMs: T0 + 3 * MINUTE_MS },
          { name: 'day', limit: 100, windowMs: DAY_MS, used: 10, remaining: 90, resetAtMs: T0 + DAY_MS },
        ],
        bans: [{ subject: 'k2', bannedUntilMs: k2BanEnd }],
      }, 'an ended minute reads as unused');
      assert.deepEqual((await store.peek('account:peek', k2BanEnd)).bans, [], 'an ended ban is not listed');
      assert.deepEqual(await store.peek('account:peek', T0 + DAY_MS), { nowMs: T0 + DAY_MS, windows: [], bans: [] }, 'nothing live: as if absent');
    });

    caseWith('resets a record: its windows and every ban in it, and nothing of other records', async ({ store }) => {
      const windows = minuteAndDay(1, 100);
      for (const subject of ['k1', 'k2']) {
        for (let i = 0; i < 4; i++) await store.consume('account:reset', req(windows, T0 + i, { ban: BAN, subject }));
      }
      await store.consume('account:other', req(windows, T0, { ban: BAN, subject: 'k3' }));
      assert.equal((await store.peek('account:reset', T0 + 10)).bans.length, 2, 'both keys banned before the reset');
      await store.reset('account:reset');
      assert.deepEqual(await store.peek('account:reset', T0 + 10), { nowMs: T0 + 10, windows: [], bans: [] });
      for (const subject of ['k1', 'k2']) {
        const after = await store.consume('account:reset', req(windows, T0 + 11, { ban: BAN, subject }));
        assert.equal(outcome(after), subject === 'k1' ? 'allowed' : 'rate_limited', `${subject} after the reset`);
      }
      const day = usage(await store.consume('account:reset', req(windows, T0 + MINUTE_MS, { ban: BAN, subject: 'k2' })), 'day');
      assert.equal(day.used, 2, 'the day counts from the reset on');
      assert.equal(usage(await store.consume('account:other', req(windows, T0 + MINUTE_MS, { ban: BAN, subject: 'k3' })), 'day').used, 2, 'the other record kept its day');
      await store.reset('account:never-seen'); // resolves for a record that does not exist
    });

    caseWith('reports remaining and reset exactly at window edges (epoch-aligned)', async ({ store }) => {
      const windows = minuteAndDay(3, 10);
      const first = await store.consume('key:edge', req(windows, T0));
      assert.equal(first.nowMs, T0, 'decides at the request time');
      assert.deepEqual(
        first.windows.map(({ name, limit, used, remaining, resetAtMs }) => ({ name, limit, used, remaining, resetAtMs })),
        [
          { name: 'minute', limit: 3, used: 1, remaining: 2, resetAtMs: T0 + MINUTE_MS },
          { name: 'day', limit: 10, used: 1, remaining: 9, resetAtMs: T0 + DAY_MS },
        ],
      );
      const lastMs = await store.consume('key:edge', req(windows, T0 + MINUTE_MS - 1));
      assert.equal(usage(lastMs, 'minute').used, 2, 'the last millisecond is still the same window');
      assert.equal(usage(lastMs, 'minute').resetAtMs, T0 + MINUTE_MS);
      const nextWindow = await store.consume('key:edge', req(windows, T0 + MINUTE_MS));
      assert.equal(usage(nextWindow, 'minute').used, 1, 'a new minute starts at the boundary');
      assert.equal(usage(nextWindow, 'minute').resetAtMs, T0 + 2 * MINUTE_MS);
      assert.equal(usage(nextWindow, 'day').used, 3);
      const midWindow = await store.consume('key:edge2', req(windows, T0 + 12_345));
      assert.equal(usage(midWindow, 'minute').resetAtMs, T0 + MINUTE_MS, 'windows align to the epoch, not the first request');
    });

    caseWith('starts a ban at the threshold, holds it without charging or extending, and ends it', async ({ store }) => {
      const windows = minuteAndDay(1, 100);
      assert.equal((await store.consume('key:ban', req(windows, T0, { ban: BAN }))).allowed, true);
      const reasons: string[] = [];
      for (let i = 1; i <= 3; i++) {
        const result = await store.consume('key:ban', req(windows, T0 + i, { ban: BAN }));
        reasons.push(result.allowed ? 'allowed' : result.reason);
      }
      assert.deepEqual(reasons, ['rate_limited', 'rate_limited', 'banned']);
      const banEnd = T0 + 3 + BAN.durationMs;
      const during = await store.consume('key:ban', req(windows, T0 + 5 * MINUTE_MS, { ban: BAN }));
      assert.equal(during.allowed ? 'allowed' : during.reason, 'banned', 'a fresh minute does not lift the ban');
      assert.equal(during.allowed || during.reason !== 'banned' ? 0 : during.bannedUntilMs, banEnd, 'not extended');
      assert.equal(usage(during, 'day').used, 1, 'nothing charged while banned');
      const justBefore = await store.consume('key:ban', req(windows, banEnd - 1, { ban: BAN }));
      assert.equal(justBefore.allowed, false);
      const after = await store.consume('key:ban', req(windows, banEnd, { ban: BAN }));
      assert.equal(after.allowed, true, 'the ban ends at bannedUntilMs');
      assert.equal(usage(after, 'day').used, 2);
    });

    caseWith('counts rejections toward a ban per interval and not without a ban policy', async ({ store }) => {
      const windows = minuteAndDay(1, 100);
      await store.consume('key:strikes', req(windows, T0, { ban: BAN }));
      await store.consume('key:strikes', req(windows, T0 + 1, { ban: BAN }));
      await store.consume('key:strikes', req(windows, T0 + 2, { ban: BAN }));
      // A new interval: the two earlier rejections no longer count.
      await store.consume('key:strikes', req(windows, T0 + MINUTE_MS, { ban: BAN }));
      const second = await store.consume('key:strikes', req(windows, T0 + MINUTE_MS + 1, { ban: BAN }));
      assert.equal(second.allowed ? 'allowed' : second.reason, 'rate_limited');
      await store.consume('key:noban', req(windows, T0));
      for (let i = 0; i < 10; i++) {
        const result = await store.consume('key:noban', req(windows, T0 + i));
        assert.equal(result.allowed ? 'allowed' : result.reason, 'rate_limited');
      }
    });

    caseWith('counts day-long and 30-day windows', async ({ store }) => {
      const month: RateLimitWindow = { name: 'month', limit: 2, windowMs: 30 * DAY_MS };
      const monthStart = Math.floor(T0 / month.windowMs) * month.windowMs;
      assert.equal((await store.consume('key:month', req([month], monthStart))).allowed, true);
      assert.equal(
        (await store.consume('key:month', req([month], monthStart + 10 * DAY_MS))).allowed,
        true,
      );
      const third = await store.consume('key:month', req([month], monthStart + 29 * DAY_MS));
      assert.equal(third.allowed, false);
      assert.equal(usage(third, 'month').resetAtMs, monthStart + 30 * DAY_MS);
      const next = await store.consume('key:month', req([month], monthStart + 30 * DAY_MS));
      assert.equal(next.allowed, true);
      const day = minuteAndDay(1000, 2);
      await store.consume('key:day', req(day, T0));
      await store.consume('key:day', req(day, T0 + 12 * 3_600_000));
      assert.equal((await store.consume('key:day', req(day, T0 + DAY_MS - 1))).allowed, false);
      assert.equal((await store.consume('key:day', req(day, T0 + DAY_MS))).allowed, true);
    });

    caseWith('keeps the usage already counted across a plan change (new limits, same windows)', async ({ store }) => {
      for (let i = 0; i < 3; i++) await store.consume('key:plan', req(minuteAndDay(5, 10), T0));
      const upgraded = await store.consume('key:plan', req(minuteAndDay(50, 100), T0 + 1));
      assert.equal(upgraded.allowed, true);
      assert.equal(usage(upgraded, 'minute').used, 4);
      assert.equal(usage(upgraded, 'minute').remaining, 46);
      const downgraded = await store.consume('key:plan', req(minuteAndDay(4, 100), T0 + 2));
      assert.equal(downgraded.allowed, false, '4 used of a new limit of 4');
    });

    caseWith('keeps callers apart, also under parallel bursts', async ({ store }) => {
      const keys = ['key:a', 'key:b', 'anon:203.0.113.1', 'anon:2001:db8::/64', 'key:e'];
      const results = await Promise.all(
        keys.flatMap((key) =>
          Array.from({ length: 30 }, () =>
            Promise.resolve(store.consume(key, req(minuteAndDay(10, 100), T0))).then((result) => ({ key, result })),
          ),
        ),
      );
      for (const key of keys) {
        assert.equal(results.filter((entry) => entry.key === key && entry.result.allowed).length, 10, `admitted for ${key}`);
      }
    });

    caseWith(
      'lets every key expire: no later than its last window, ban or rejection interval requires',
      async (harness) => {
        const ttl = requireHook(harness.remainingTtlMs?.bind(harness), 'remainingTtlMs', 'expiry');
        // Real time, since a store may time its keys on its own clock (Redis, PostgreSQL). Nothing here depends
        // on how long the calls take: a remaining lifetime read at `after` (taken once it is read) must reach at
        // least to the end the store was asked to keep the key for, and at most to that end seen from `now`
        // (taken before the consume). Only a lifetime that ended in between lets the key go, and then it
        // must be gone. 1,000 ms of slack for clocks kept in whole milliseconds or seconds.
        const now = Date.now();
        const expectLifetime = async (key: string, endMs: number, what: string) => {
          const remaining = await ttl(key);
          const after = Date.now();
          if (remaining === undefined) {
            assert.ok(after >= endMs, `${what}: the key is gone before ${new Date(endMs).toISOString()}`);
            return;
          }
          assert.ok(Number.isFinite(remaining), `${what}: the key has an expiry`);
          assert.ok(remaining <= endMs - now + 1000, `${what}: expiry ${remaining} ms is no later than ${endMs - now} ms`);
          assert.ok(remaining >= endMs - after - 1000, `${what}: expiry ${remaining} ms reaches ${endMs - after} ms`);
        };
        await harness.store.consume('key:ttl', req(minuteAndDay(1, 100), now));
        await expectLifetime('key:ttl', Math.floor(now / DAY_MS) * DAY_MS + DAY_MS, 'a minute + day key lives to the end of its day window');
        await harness.store.consume('key:ttl-min', req([{ name: 'minute', limit: 5, windowMs: MINUTE_MS }], now));
        await expectLifetime('key:ttl-min', Math.floor(now / MINUTE_MS) * MINUTE_MS + MINUTE_MS, 'a minute-only key lives to its window end');
        for (let i = 0; i < 4; i++) await harness.store.consume('key:ttl-ban', req([{ name: 'minute', limit: 1, windowMs: MINUTE_MS }], now, { ban: BAN }));
        await expectLifetime('key:ttl-ban', now + BAN.durationMs, 'a banned key lives until the ban ends');
      },
      options.capabilities?.expiry ?? true,
    );

    caseWith(
      'sets the expiry again on the next consume after a key lost it',
      async (harness) => {
        const ttl = requireHook(harness.remainingTtlMs?.bind(harness), 'remainingTtlMs', 'lostTtl');
        const drop = requireHook(harness.dropTtl?.bind(harness), 'dropTtl', 'lostTtl');
        const windows = minuteAndDay(10, 100);
        // Real time (a store may time its keys on its own clock), at the start of its minute so that both
        // consumes fall in one minute window.
        const now = Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS;
        await harness.store.consume('key:lost', req(windows, now));
        await drop('key:lost');
        assert.equal(await ttl('key:lost'), Number.POSITIVE_INFINITY, 'the harness removed the expiry');
        const result = await harness.store.consume('key:lost', req(windows, now + 1));
        assert.equal(usage(result, 'minute').used, 2, 'the counters survived');
        const restored = await ttl('key:lost');
        assert.ok(restored !== undefined && Number.isFinite(restored) && restored > 0, 'the expiry is back');
      },
      options.capabilities?.lostTtl ?? true,
    );
  });
}

function requireHook<T>(hook: T | undefined, name: string, capability: string): T {
  if (hook === undefined) {
    assert.fail(`the harness has no ${name}(); provide it, or set capabilities.${capability} to false`);
  }
  return hook;
}

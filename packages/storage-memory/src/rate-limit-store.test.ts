import { DAY_MS, MINUTE_MS, createPetstore, createRateLimiter, staticApiKeys, type ConsumeRequest, type RateLimitWindow } from '@petstore/core';
import { fakeClock } from '@petstore/core/testing';
import { describe, expect, it } from 'vitest';
import { memoryCategoryStore } from './category-store.js';
import { memoryRateLimitStore } from './rate-limit-store.js';

const START = Date.UTC(2026, 0, 1);
const minuteAndDay = (perMinute: number, perDay: number): RateLimitWindow[] => [
  { name: 'minute', limit: perMinute, windowMs: MINUTE_MS },
  { name: 'day', limit: perDay, windowMs: DAY_MS },
];
const request = (windows: readonly RateLimitWindow[], nowMs: number, ban?: ConsumeRequest['ban'], cost = 1): ConsumeRequest => ({
  windows,
  cost,
  nowMs,
  ban,
  banSubject: '',
});

describe('memoryRateLimitStore', () => {
  it('admits up to the limit, then rejects with reason rate_limited', async () => {
    const store = memoryRateLimitStore();
    const windows = minuteAndDay(2, 10);
    expect((await store.consume('key:a', request(windows, START))).allowed).toBe(true);
    expect((await store.consume('key:a', request(windows, START))).windows.map((window) => window.remaining)).toEqual([0, 8]);
    expect(await store.consume('key:a', request(windows, START))).toMatchObject({ allowed: false, reason: 'rate_limited' });
  });

  it('answers each request of a key with its own result, and keeps usage per window name', async () => {
    const store = memoryRateLimitStore();
    const windows = Object.freeze(minuteAndDay(5, 10));
    const results = [];
    for (let i = 0; i < 6; i++) results.push(await store.consume('key:a', request(windows, START + i)));
    // Earlier results are not changed by later charges.
    expect(results.map((result) => result.windows[0]?.used)).toEqual([1, 2, 3, 4, 5, 5]);
    expect(results.map((result) => result.allowed)).toEqual([true, true, true, true, true, false]);
    // Other windows for the same key (a plan change) keep the usage per window name.
    const upgraded = await store.consume('key:a', request(minuteAndDay(50, 100), START + 10));
    expect(upgraded.windows.map((window) => window.used)).toEqual([6, 6]);
  });

  it('admits exactly the quota under a burst of parallel consumes', async () => {
    const store = memoryRateLimitStore();
    const results = await Promise.all(
      Array.from({ length: 500 }, () => store.consume('key:a', request(minuteAndDay(60, 1000), START))),
    );
    expect(results.filter((result) => result.allowed)).toHaveLength(60);
  });

  it('charges several windows all or nothing and does not charge rejections', async () => {
    const store = memoryRateLimitStore();
    const windows = minuteAndDay(2, 3);
    for (let i = 0; i < 5; i++) await store.consume('key:a', request(windows, START));
    const nextMinute = await store.consume('key:a', request(windows, START + MINUTE_MS));
    expect(nextMinute.allowed).toBe(true);
    expect(nextMinute.windows.find((window) => window.name === 'day')?.used).toBe(3);
    const dayFull = await store.consume('key:a', request(windows, START + 2 * MINUTE_MS));
    expect(dayFull).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(dayFull.windows.find((window) => window.name === 'minute')?.used).toBe(0);
  });

  it('keeps keys apart', async () => {
    const store = memoryRateLimitStore();
    const windows = minuteAndDay(1, 10);
    expect((await store.consume('key:a', request(windows, START))).allowed).toBe(true);
    expect((await store.consume('key:a', request(windows, START))).allowed).toBe(false);
    expect((await store.consume('key:b', request(windows, START))).allowed).toBe(true);
  });

  it('never tracks more than maxKeys under a flood of distinct keys', async () => {
    const store = memoryRateLimitStore({ maxKeys: 1000 });
    let largest = 0;
    for (let i = 0; i < 20_000; i++) {
      await store.consume(`anon:10.0.${i >> 8}.${i & 255}`, request(minuteAndDay(30, 500), START));
      largest = Math.max(largest, store.size);
    }
    expect(largest).toBe(1000);
    expect(store.size).toBe(1000);
  });

  it('lets an entry expire when its last window ends, also for day and 30-day windows', async () => {
    const clock = fakeClock(START);
    const store = memoryRateLimitStore({ clock });
    const month: RateLimitWindow = { name: 'month', limit: 5, windowMs: 30 * DAY_MS };
    await store.consume('key:month', request([month], clock.now()));
    await store.consume('key:day', request(minuteAndDay(5, 5), clock.now()));
    clock.advance(DAY_MS - 1);
    expect(store.purgeExpired()).toBe(0);
    clock.advance(2);
    expect(store.purgeExpired()).toBe(1);
    expect(store.size).toBe(1);
    clock.advance(29 * DAY_MS);
    expect(store.purgeExpired()).toBe(1);
    expect(store.size).toBe(0);
  });

  it('counts a 30-day window across days', async () => {
    const store = memoryRateLimitStore();
    const month: RateLimitWindow = { name: 'month', limit: 2, windowMs: 30 * DAY_MS };
    const monthStart = Math.floor(START / month.windowMs) * month.windowMs;
    expect((await store.consume('key:m', request([month], monthStart))).allowed).toBe(true);
    expect((await store.consume('key:m', request([month], monthStart + 10 * DAY_MS))).allowed).toBe(true);
    const third = await store.consume('key:m', request([month], monthStart + 20 * DAY_MS));
    expect(third.allowed).toBe(false);
    expect(third.windows[0]?.resetAtMs).toBe(monthStart + 30 * DAY_MS);
    expect((await store.consume('key:m', request([month], monthStart + 30 * DAY_MS))).allowed).toBe(true);
  });

  it('keeps a ban while it lasts, then forgets it', async () => {
    const clock = fakeClock(START);
    const store = memoryRateLimitStore({ clock });
    const limiter = createRateLimiter({
      store,
      clock,
      ban: { rejectedThreshold: 3, intervalMs: MINUTE_MS, durationMs: 10 * MINUTE_MS },
    });
    const principal = { keyId: 'k', accountId: 'a', plan: 'enterprise' as const, limits: { requestsPerMinute: 1, requestsPerDay: 100 } };
    expect((await limiter.consume({ principal })).allowed).toBe(true);
    const reasons = [];
    for (let i = 0; i < 3; i++) reasons.push((await limiter.consume({ principal })).reason);
    expect(reasons).toEqual(['rate_limited', 'rate_limited', 'banned']);
    clock.advance(5 * MINUTE_MS);
    expect((await limiter.consume({ principal })).reason).toBe('banned');
    clock.advance(5 * MINUTE_MS);
    expect((await limiter.consume({ principal })).allowed).toBe(true);
  });

  it('reads no clock in consume, and expires entries by the requests\' own time', async () => {
    const clock = fakeClock(START);
    let reads = 0;
    const store = memoryRateLimitStore({ clock: { now: () => (reads++, clock.now()) } });
    await store.consume('key:a', request(minuteAndDay(5, 5), clock.now()));
    await store.consume('key:a', request(minuteAndDay(5, 5), clock.now()));
    expect(reads).toBe(0);
    clock.advance(DAY_MS - 1);
    expect(store.remainingTtlMs('key:a')).toBe(1);
    clock.advance(2);
    expect(store.remainingTtlMs('key:a')).toBeUndefined();
  });

  it('peeks without making a key recently used, and reads an expired entry as absent', async () => {
    const store = memoryRateLimitStore({ maxKeys: 2 });
    await store.consume('account:a', request(minuteAndDay(5, 10), START, undefined, 2));
    await store.consume('account:b', request(minuteAndDay(5, 10), START));
    const snapshot = await store.peek('account:a', START + 1);
    expect(snapshot.windows.map(({ name, used, remaining }) => ({ name, used, remaining }))).toEqual([
      { name: 'minute', used: 2, remaining: 3 },
      { name: 'day', used: 2, remaining: 8 },
    ]);
    // a is still the least recently used: a third key evicts it, not b.
    await store.consume('account:c', request(minuteAndDay(5, 10), START));
    expect(store.readState('account:a')).toBeUndefined();
    expect(store.readState('account:b')).toBeDefined();
    expect(await store.peek('account:b', START + DAY_MS)).toEqual({ nowMs: START + DAY_MS, windows: [], bans: [] });
  });

  it('resets one record: it is gone, the others stay, and the next consume starts afresh', async () => {
    const store = memoryRateLimitStore();
    const ban = { rejectedThreshold: 1, intervalMs: MINUTE_MS, durationMs: 10 * MINUTE_MS };
    await store.consume('account:a', { ...request(minuteAndDay(0, 10), START, ban), banSubject: 'k1' });
    await store.consume('account:b', request(minuteAndDay(5, 10), START));
    expect(store.size).toBe(2);
    await store.reset('account:a');
    await store.reset('account:missing');
    expect(store.size).toBe(1);
    expect(store.readState('account:a')).toBeUndefined();
    const after = await store.consume('account:a', { ...request(minuteAndDay(5, 10), START + 1, ban), banSubject: 'k1' });
    expect(after.allowed).toBe(true);
    expect(after.windows.map((window) => window.used)).toEqual([1, 1]);
  });

  it('answers copies from readState: changing one changes nothing in the store', async () => {
    const store = memoryRateLimitStore();
    await store.consume('account:a', request(minuteAndDay(5, 10), START));
    const copy = store.readState('account:a');
    expect(copy).toEqual({
      counters: {
        minute: { startMs: START, count: 1, limit: 5, windowMs: MINUTE_MS },
        day: { startMs: START, count: 1, limit: 10, windowMs: DAY_MS },
      },
      bans: {},
    });
    if (copy !== undefined) (copy.counters['minute'] as { count: number }).count = 99;
    expect(store.readState('account:a')?.counters['minute']?.count).toBe(1);
  });

  it('makes a new, empty store with the same bounds and clock (newStore)', async () => {
    const clock = fakeClock(Date.UTC(2026, 0, 1));
    const store = memoryRateLimitStore({ maxKeys: 3, clock });
    const request: ConsumeRequest = {
      windows: [{ name: 'minute', limit: 5, windowMs: MINUTE_MS }],
      cost: 1,
      nowMs: clock.now(),
      ban: undefined,
      banSubject: '',
    };
    await store.consume('shared-name', request);
    const other = store.newStore();
    expect(other.size).toBe(0);
    expect((await other.consume('shared-name', request)).windows[0]?.used).toBe(1); // nothing shared
    for (let i = 0; i < 10; i++) await other.consume(`k${i}`, request);
    expect(other.size).toBe(3); // the same maxKeys
    expect(store.size).toBe(1);
    expect(other.remainingTtlMs('k9')).toBe(MINUTE_MS); // the same clock
  });

  it("keeps API keys' counters when a flood of client addresses passes through a petstore on one memory store", async () => {
    const petstore = createPetstore({
      apiKeys: staticApiKeys([{ key: 'paying-key', plan: 'free' }]),
      categories: memoryCategoryStore(),
      rateLimit: { store: memoryRateLimitStore({ maxKeys: 10 }) },
      clock: fakeClock(Date.UTC(2026, 0, 1)),
    });
    const paying = () => petstore.handle({ method: 'GET', path: '/categories', headers: { authorization: 'Bearer paying-key' } });
    for (let i = 0; i < 5; i++) await paying();
    for (let i = 0; i < 1000; i++) {
      await petstore.handle({ method: 'GET', path: '/categories', headers: {}, clientAddress: `10.0.${i >> 8}.${i & 255}` });
    }
    expect((await paying()).headers['x-ratelimit-remaining']).toBe('54'); // 60 − 6: not reset by the flood
  });

  it('rejects a maxKeys that is not a whole number >= 1', () => {
    expect(() => memoryRateLimitStore({ maxKeys: 0 })).toThrow(TypeError);
    expect(() => memoryRateLimitStore({ maxKeys: 1.5 })).toThrow(TypeError);
  });
});

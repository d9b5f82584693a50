/**
 * The block cache's hand-offs without Redis: `ask` stands for Redis and answers when the test says. Each wait is
 * bounded by one turn of the event loop (every promise chain that can settle has settled by then), so a hand-off
 * that never settles fails the test at once instead of hanging it.
 */
import { MINUTE_MS, type ConsumeRequest, type ConsumeResult } from '@petstore/core';
import { describe, expect, it } from 'vitest';
import { createBlockCache } from './block-cache.js';
import type { PolicyArguments } from './consume-batches.js';

const T0 = Date.UTC(2026, 0, 1);
const POLICY: PolicyArguments = ['[["minute",1,60000]]', '<BI4dd', '[1,3,60000,600000,1,60000]', 1];
const windows = [{ name: 'minute', limit: 1, windowMs: MINUTE_MS }];
const ban = { rejectedThreshold: 3, intervalMs: MINUTE_MS, durationMs: 10 * MINUTE_MS };
const request = (nowMs: number): ConsumeRequest => ({ windows, nowMs, ban, cost: 1, banSubject: 'k1' });
const banned = (nowMs: number): ConsumeResult => ({
  allowed: false,
  reason: 'banned',
  nowMs,
  bannedUntilMs: T0 + ban.durationMs,
  windows: [{ name: 'minute', limit: 1, windowMs: MINUTE_MS, used: 1, remaining: 0, resetAtMs: T0 + MINUTE_MS }],
});

/** One turn of the event loop: every settled promise's reactions have run by then. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** A Redis stand-in: each call waits until the test answers it. */
function fakeRedis() {
  const calls: Array<{ answer(result: ConsumeResult): void; fail(error: Error): void }> = [];
  const ask = () =>
    new Promise<ConsumeResult>((resolve, reject) => {
      calls.push({ answer: resolve, fail: reject });
    });
  return { calls, ask };
}

/** `promise`, observed: `state()` says whether it settled yet, and with what. */
function observe<T>(promise: Promise<T>) {
  let state: { settled: false } | { settled: true; value?: T; error?: unknown } = { settled: false };
  promise.then(
    (value) => (state = { settled: true, value }),
    (error: unknown) => (state = { settled: true, error }),
  );
  return () => state;
}

describe('the block cache of the Redis rate-limit store', () => {
  it('lets the consumes that come during a refresh wait for its answer, then answers them from it', async () => {
    const cache = createBlockCache({ maxAgeMs: 1000 }, 'request')!;
    const redis = fakeRedis();
    const first = observe(cache.consume('account:a', POLICY, request(T0), redis.ask));
    await nextTurn();
    redis.calls[0]!.answer(banned(T0));
    await nextTurn();
    expect(first()).toEqual({ settled: true, value: banned(T0) });
    // Within maxAgeMs: from memory, nothing asked.
    expect(await cache.consume('account:a', POLICY, request(T0 + 999), redis.ask)).toEqual(banned(T0 + 999));
    expect(redis.calls).toHaveLength(1);
    // maxAgeMs later: the first consume refreshes, the others wait for it.
    const refreshing = observe(cache.consume('account:a', POLICY, request(T0 + 1000), redis.ask));
    const waiting = [1, 2, 3].map((i) => observe(cache.consume('account:a', POLICY, request(T0 + 1000 + i), redis.ask)));
    await nextTurn();
    expect(redis.calls).toHaveLength(2);
    expect([refreshing(), ...waiting.map((state) => state())]).toEqual([{ settled: false }, { settled: false }, { settled: false }, { settled: false }]);
    redis.calls[1]!.answer(banned(T0 + 1000));
    await nextTurn();
    expect(refreshing()).toEqual({ settled: true, value: banned(T0 + 1000) });
    expect(waiting.map((state) => state())).toEqual([1, 2, 3].map((i) => ({ settled: true, value: banned(T0 + 1000 + i) })));
    expect(redis.calls).toHaveLength(2);
  });

  it('answers a sliding or gcra refusal from memory only before its retryAtMs, and only for a cost at least the refused one', async () => {
    for (const [algorithm, code] of [['sliding', 1], ['gcra', 2]] as const) {
      const cache = createBlockCache({ maxAgeMs: 10 * MINUTE_MS }, 'request')!;
      const policy: PolicyArguments = [`[["minute",5,60000,"${algorithm}"]]`, '<BI4dd', `[1,0,0,0,5,60000,${code}]`, 3];
      const drained = [{ name: 'minute', limit: 5, windowMs: MINUTE_MS, algorithm }];
      const consume = (nowMs: number, cost: number): ConsumeRequest => ({ windows: drained, nowMs, ban: undefined, cost, banSubject: 'k1' });
      // Redis refused a cost of 3 with 1 unit left: 3 fit again at T0 + 30 s (its usage drains meanwhile).
      const refused = (nowMs: number): ConsumeResult => ({
        allowed: false,
        reason: 'rate_limited',
        nowMs,
        windows: [{ name: 'minute', limit: 5, windowMs: MINUTE_MS, used: 4, remaining: 1, resetAtMs: T0 + 2 * MINUTE_MS, retryAtMs: T0 + 30_000 }],
      });
      let asked = 0;
      const redisAnswers = (result: ConsumeResult) => () => {
        asked += 1;
        return Promise.resolve(result);
      };
      const admitted: ConsumeResult = { allowed: true, nowMs: T0 + 30_000, windows: [] };
      expect(await cache.consume('anon:a', policy, consume(T0, 3), redisAnswers(refused(T0)))).toEqual(refused(T0));
      expect(await cache.consume('anon:a', policy, consume(T0 + 29_999, 3), redisAnswers(admitted))).toEqual(refused(T0 + 29_999));
      expect(await cache.consume('anon:a', policy, consume(T0 + 29_999, 5), redisAnswers(admitted))).toEqual(refused(T0 + 29_999));
      expect(asked).toBe(1);
      // A cheaper request may fit sooner, and at retryAtMs the refused cost does: Redis decides both.
      expect(await cache.consume('anon:a', policy, consume(T0 + 1, 2), redisAnswers(refused(T0 + 1)))).toEqual(refused(T0 + 1));
      expect(asked).toBe(2);
      expect(await cache.consume('anon:a', policy, consume(T0 + 30_000, 3), redisAnswers(admitted))).toEqual(admitted);
      expect(asked, algorithm).toBe(3);
    }
  });

  it('lets the waiting consumes ask Redis themselves when the refresh fails, one refreshing for the others', async () => {
    const cache = createBlockCache({ maxAgeMs: 1000 }, 'request')!;
    const redis = fakeRedis();
    const first = cache.consume('account:b', POLICY, request(T0), redis.ask);
    await nextTurn();
    redis.calls[0]!.answer(banned(T0));
    await first;
    const refreshing = observe(cache.consume('account:b', POLICY, request(T0 + 1000), redis.ask));
    const waiting = [1, 2].map((i) => observe(cache.consume('account:b', POLICY, request(T0 + 1000 + i), redis.ask)));
    await nextTurn();
    const failure = new Error('not a store outage');
    redis.calls[1]!.fail(failure);
    await nextTurn();
    expect(refreshing()).toEqual({ settled: true, error: failure });
    // The first waiter refreshes; the second, having waited once, asks Redis on its own.
    expect(redis.calls).toHaveLength(4);
    redis.calls[2]!.answer(banned(T0 + 1001));
    redis.calls[3]!.answer(banned(T0 + 1002));
    await nextTurn();
    expect(waiting.map((state) => state())).toEqual([1, 2].map((i) => ({ settled: true, value: banned(T0 + 1000 + i) })));
  });
});

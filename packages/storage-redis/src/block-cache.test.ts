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

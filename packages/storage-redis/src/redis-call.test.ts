/**
 * The deadline of one store call, on fake timers: time moves only when the test advances it, so what is asserted
 * is when each call is answered on the deadline's clock, however busy the machine is.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RedisTimeoutError, createDeadline } from './redis-call.js';

const never = () => new Promise<never>(() => {});
/** A call that answers `value` (or fails with `error`) `ms` after it starts, on the fake clock. */
const after = <T,>(ms: number, value: T) => new Promise<T>((resolve) => setTimeout(() => resolve(value), ms));
const failsAfter = (ms: number, error: Error) => new Promise<never>((_, reject) => setTimeout(() => reject(error), ms));

/** Follows a promise: `state()` is 'pending' until it settles, then its outcome. */
function watch<T>(promise: Promise<T>) {
  let outcome: { status: 'pending' } | { status: 'fulfilled'; value: T } | { status: 'rejected'; reason: unknown } = { status: 'pending' };
  promise.then(
    (value) => (outcome = { status: 'fulfilled', value }),
    (reason: unknown) => (outcome = { status: 'rejected', reason }),
  );
  return { state: () => outcome };
}

/**
 * Records the timers set and cleared while `run` runs, by wrapping the (fake) setTimeout and clearTimeout in place
 * and putting them back after. Not vi.spyOn: vitest restores its spies again once the file is done, which would
 * put back the fake setTimeout it wrapped after the fake timers were uninstalled.
 */
async function recordingTimers<T>(run: (timers: { set: unknown[]; cleared: Set<unknown> }) => Promise<T>): Promise<T> {
  const setTimer = globalThis.setTimeout;
  const clearTimer = globalThis.clearTimeout;
  const timers = { set: [] as unknown[], cleared: new Set<unknown>() };
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    const timer = setTimer(...args);
    timers.set.push(timer);
    return timer;
  }) as typeof setTimeout;
  globalThis.clearTimeout = ((timer: Parameters<typeof clearTimeout>[0]) => {
    timers.cleared.add(timer);
    clearTimer(timer);
  }) as typeof clearTimeout;
  try {
    return await run(timers);
  } finally {
    globalThis.setTimeout = setTimer;
    globalThis.clearTimeout = clearTimer;
  }
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('createDeadline', () => {
  it('answers what the call answers, value or error, when it settles in time, and clears its timer then', async () => {
    const withDeadline = createDeadline(200);
    // The deadline's timer is the one setTimeout call made while withDeadline runs (synchronously); it must be
    // cleared once the call settles. (Counting every pending timer would also count other code's.)
    await recordingTimers(async (timers) => {
      const timerOf = (start: () => Promise<unknown>) => {
        const before = timers.set.length;
        const promise = start();
        expect(timers.set.length, 'timers set by one withDeadline call').toBe(before + 1);
        return { promise, timer: timers.set.at(-1) };
      };
      const quick = timerOf(() => withDeadline(Promise.resolve(7)));
      await expect(quick.promise).resolves.toBe(7);
      const slow = after(199, 'late but in time');
      const late = timerOf(() => withDeadline(slow));
      const lateState = watch(late.promise);
      await vi.advanceTimersByTimeAsync(199);
      expect(lateState.state()).toEqual({ status: 'fulfilled', value: 'late but in time' });
      const failure = new Error('reply error');
      const failed = timerOf(() => withDeadline(Promise.reject(failure)));
      await expect(failed.promise).rejects.toBe(failure);
      for (const { timer } of [quick, late, failed]) expect(timers.cleared.has(timer), 'its timer cleared').toBe(true);
    });
  });

  it('rejects each call that outlives its deadline, at the deadline, and only those', async () => {
    const withDeadline = createDeadline(60);
    const calls = [after(10, 'fast'), never(), after(59, 'in time'), after(150, 'too slow')].map((call) => watch(withDeadline(call)));
    await vi.advanceTimersByTimeAsync(59);
    expect(calls.map((call) => call.state().status)).toEqual(['fulfilled', 'pending', 'fulfilled', 'pending']);
    await vi.advanceTimersByTimeAsync(1);
    // Rejected at the deadline, not when the slow call settles (90 ms later).
    expect(calls.map((call) => call.state().status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected']);
    for (const call of [calls[1], calls[3]]) {
      const reason = (call?.state() as { reason: unknown }).reason;
      expect(reason).toBeInstanceOf(RedisTimeoutError);
      expect(reason).toMatchObject({ name: 'RedisTimeoutError', callTimeoutMs: 60, message: 'Redis did not answer within callTimeoutMs (60 ms)' });
    }
  });

  it('times out calls started later against their own deadline, and ignores late outcomes', async () => {
    const withDeadline = createDeadline(50);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const first = watch(withDeadline(never()));
      await vi.advanceTimersByTimeAsync(30);
      const second = watch(withDeadline(failsAfter(120, new Error('late'))));
      await vi.advanceTimersByTimeAsync(20);
      expect(first.state().status).toBe('rejected'); // 50 ms after it started
      expect(second.state().status).toBe('pending'); // 20 ms after it started
      await vi.advanceTimersByTimeAsync(29);
      expect(second.state().status).toBe('pending');
      await vi.advanceTimersByTimeAsync(1);
      expect((second.state() as { reason: unknown }).reason).toBeInstanceOf(RedisTimeoutError);
      await vi.advanceTimersByTimeAsync(100); // the late rejection arrives and is ignored
      await new Promise((resolve) => setImmediate(resolve)); // past the turn where Node reports unhandled rejections
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('keeps serving after many calls have come and gone, leaving no timer behind', async () => {
    const withDeadline = createDeadline(1000);
    // The deadlines' timers: the setTimeout calls made while the calls are started (synchronously, so no other
    // code's timers are among them). Each must be cleared once its call has settled.
    await recordingTimers(async (timers) => {
      for (let round = 0; round < 3; round++) {
        const firstTimer = timers.set.length;
        const calls = Array.from({ length: 5000 }, (_, i) => withDeadline(Promise.resolve(i)));
        const started = timers.set.slice(firstTimer);
        expect(started).toHaveLength(5000);
        const values = await Promise.all(calls);
        expect(values[4999]).toBe(4999);
        expect(started.filter((timer) => !timers.cleared.has(timer)), 'timers left behind').toEqual([]);
      }
    });
    const hanging = watch(createDeadline(20)(never()));
    await vi.advanceTimersByTimeAsync(20);
    expect((hanging.state() as { reason: unknown }).reason).toBeInstanceOf(RedisTimeoutError);
  });
});

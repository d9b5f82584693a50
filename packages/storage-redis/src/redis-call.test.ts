import { describe, expect, it } from 'vitest';
import { RedisTimeoutError, createDeadline } from './redis-call.js';

const never = () => new Promise<never>(() => {});
const after = <T,>(ms: number, value: T) => new Promise<T>((resolve) => setTimeout(() => resolve(value), ms));

describe('createDeadline', () => {
  it('answers what the call answers, value or error, when it settles in time', async () => {
    const withDeadline = createDeadline(200);
    await expect(withDeadline(Promise.resolve(7))).resolves.toBe(7);
    await expect(withDeadline(after(20, 'late but in time'))).resolves.toBe('late but in time');
    const failure = new Error('reply error');
    await expect(withDeadline(Promise.reject(failure))).rejects.toBe(failure);
  });

  it('rejects each call that outlives its deadline, and only those', async () => {
    const withDeadline = createDeadline(60);
    const started = performance.now();
    const outcomes = await Promise.allSettled([
      withDeadline(after(10, 'fast')),
      withDeadline(never()),
      withDeadline(after(30, 'in time')),
      withDeadline(after(150, 'too slow')),
    ]);
    const elapsed = performance.now() - started;
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected']);
    const reasons = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason as unknown] : []));
    expect(reasons).toHaveLength(2);
    for (const reason of reasons) {
      expect(reason).toBeInstanceOf(RedisTimeoutError);
      expect((reason as RedisTimeoutError).timeoutMs).toBe(60);
    }
    expect(elapsed).toBeGreaterThanOrEqual(59);
    expect(elapsed).toBeLessThan(140); // rejected at the deadline, not when the slow call settles
  });

  it('times out calls started later against their own deadline, and ignores late outcomes', async () => {
    const withDeadline = createDeadline(50);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const first = withDeadline(never());
      await after(30, null);
      const startedLater = performance.now();
      const second = withDeadline(new Promise((_, reject) => setTimeout(() => reject(new Error('late')), 120)));
      await expect(first).rejects.toBeInstanceOf(RedisTimeoutError);
      await expect(second).rejects.toBeInstanceOf(RedisTimeoutError);
      expect(performance.now() - startedLater).toBeGreaterThanOrEqual(49);
      await after(120, null); // the late rejection arrives and is ignored
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('keeps serving after many calls have come and gone', async () => {
    const withDeadline = createDeadline(1000);
    for (let round = 0; round < 3; round++) {
      const values = await Promise.all(Array.from({ length: 5000 }, (_, i) => withDeadline(Promise.resolve(i))));
      expect(values[4999]).toBe(4999);
    }
    await expect(createDeadline(20)(never())).rejects.toBeInstanceOf(RedisTimeoutError);
  });
});

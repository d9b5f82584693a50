import { parseList } from 'structured-headers';
import { describe, expect, it } from 'vitest';
import { bindingWindow, blockedUntilMs, rateLimitHeaders, retryAfterSeconds, standardRateLimitHeaders } from './headers.js';
import type { ConsumeResult, WindowUsage } from './types.js';

const MINUTE = 60_000;
/** 2026-01-01T10:00:00Z. */
const NOW = Date.UTC(2026, 0, 1, 10);
const NEXT_MINUTE = NOW + MINUTE;
const MIDNIGHT = Date.UTC(2026, 0, 2);

function window(name: string, limit: number, used: number, resetAtMs: number): WindowUsage {
  return { name, limit, windowMs: MINUTE, used, remaining: Math.max(0, limit - used), resetAtMs };
}

function seconds(epochMs: number): string {
  return String(epochMs / 1000);
}

describe('bindingWindow', () => {
  it('is the window with the fewest remaining', () => {
    const minute = window('minute', 60, 10, NEXT_MINUTE);
    const day = window('day', 1000, 990, MIDNIGHT);
    expect(bindingWindow([minute, day])).toBe(day);
    expect(bindingWindow([day, minute])).toBe(day);
  });

  it('is the later-resetting window on a tie', () => {
    const minute = window('minute', 60, 60, NEXT_MINUTE);
    const day = window('day', 1000, 1000, MIDNIGHT);
    expect(bindingWindow([minute, day])).toBe(day);
    expect(bindingWindow([day, minute])).toBe(day);
  });

  it('is undefined without windows', () => {
    expect(bindingWindow([])).toBeUndefined();
  });
});

describe('rateLimitHeaders', () => {
  it('shows the minute while the minute binds, without Retry-After on an admitted request', () => {
    const result: ConsumeResult = {
      allowed: true,
      nowMs: NOW,
      windows: [window('minute', 60, 1, NEXT_MINUTE), window('day', 1000, 1, MIDNIGHT)],
    };
    expect(rateLimitHeaders(result)).toEqual({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '59',
      'x-ratelimit-reset': seconds(NEXT_MINUTE),
    });
  });

  it("shows the day's limit and reset once the day is used up", () => {
    const admittedLast: ConsumeResult = {
      allowed: true,
      nowMs: NOW,
      windows: [window('minute', 60, 1, NEXT_MINUTE), window('day', 1000, 1000, MIDNIGHT)],
    };
    expect(rateLimitHeaders(admittedLast)).toEqual({
      'x-ratelimit-limit': '1000',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': seconds(MIDNIGHT),
    });
    const minuteAlsoFull: ConsumeResult = {
      allowed: false,
      reason: 'rate_limited',
      nowMs: NOW,
      windows: [window('minute', 60, 60, NEXT_MINUTE), window('day', 1000, 1000, MIDNIGHT)],
    };
    expect(rateLimitHeaders(minuteAlsoFull)).toMatchObject({
      'x-ratelimit-limit': '1000',
      'x-ratelimit-reset': seconds(MIDNIGHT),
      'retry-after': String((MIDNIGHT - NOW) / 1000),
    });
  });

  it('gives X-RateLimit-Reset in whole Unix seconds, rounded up', () => {
    const reset = NOW + 1_500; // not on a second boundary
    const result: ConsumeResult = { allowed: true, nowMs: NOW, windows: [window('burst', 5, 1, reset)] };
    expect(rateLimitHeaders(result)['x-ratelimit-reset']).toBe(String((NOW + 2_000) / 1000));
    const onTheSecond: ConsumeResult = { allowed: true, nowMs: NOW, windows: [window('burst', 5, 1, NOW + 3_000)] };
    expect(rateLimitHeaders(onTheSecond)['x-ratelimit-reset']).toBe(String((NOW + 3_000) / 1000));
  });

  it('gives Retry-After in whole seconds, rounded up, at least 1', () => {
    const rejectedUntil = (resetAtMs: number): ConsumeResult => ({
      allowed: false,
      reason: 'rate_limited',
      nowMs: NOW,
      windows: [window('burst', 5, 5, resetAtMs)],
    });
    expect(rateLimitHeaders(rejectedUntil(NOW + 1_500))['retry-after']).toBe('2');
    expect(rateLimitHeaders(rejectedUntil(NOW + 3_000))['retry-after']).toBe('3');
    expect(rateLimitHeaders(rejectedUntil(NOW + 1))['retry-after']).toBe('1');
    expect(rateLimitHeaders(rejectedUntil(NOW))['retry-after']).toBe('1');
    expect(retryAfterSeconds(rejectedUntil(NOW + 59_001))).toBe(60);
  });

  it('waits for every exhausted window, and ignores windows with room', () => {
    const result: ConsumeResult = {
      allowed: false,
      reason: 'rate_limited',
      nowMs: NOW,
      windows: [
        window('second', 5, 5, NOW + 400),
        window('minute', 60, 60, NOW + 20_500),
        window('day', 1000, 100, MIDNIGHT),
      ],
    };
    expect(blockedUntilMs(result)).toBe(NOW + 20_500);
    expect(rateLimitHeaders(result)['retry-after']).toBe('21');
  });

  it('shows Remaining 0 and the ban end while banned', () => {
    const bannedUntilMs = NOW + 15 * MINUTE + 250;
    const result: ConsumeResult = {
      allowed: false,
      reason: 'banned',
      nowMs: NOW,
      bannedUntilMs,
      windows: [window('minute', 60, 3, NEXT_MINUTE), window('day', 1000, 70, MIDNIGHT)],
    };
    expect(rateLimitHeaders(result)).toEqual({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(Math.ceil(bannedUntilMs / 1000)),
      'retry-after': String(15 * 60 + 1),
    });
  });

  it('shows an exhausted window that outlasts the ban while banned', () => {
    const bannedUntilMs = NOW + 15 * MINUTE;
    const result: ConsumeResult = {
      allowed: false,
      reason: 'banned',
      nowMs: NOW,
      bannedUntilMs,
      windows: [window('minute', 60, 0, NEXT_MINUTE), window('day', 1000, 1000, MIDNIGHT)],
    };
    const headers = rateLimitHeaders(result);
    expect(headers['x-ratelimit-remaining']).toBe('0');
    expect(headers['x-ratelimit-reset']).toBe(seconds(MIDNIGHT));
    expect(headers['retry-after']).toBe(String((MIDNIGHT - NOW) / 1000));
  });

  it('has no rate-limit headers without windows, but still a Retry-After when rejected', () => {
    expect(rateLimitHeaders({ allowed: true, nowMs: NOW, windows: [] })).toEqual({});
    expect(
      rateLimitHeaders({ allowed: false, reason: 'banned', nowMs: NOW, bannedUntilMs: NOW + 5_000, windows: [] }),
    ).toEqual({ 'retry-after': '5' });
  });
});

describe('standardRateLimitHeaders (draft-ietf-httpapi-ratelimit-headers-11)', () => {
  it('lists every window as a policy and reports the binding one with r and t in seconds', () => {
    const result: ConsumeResult = {
      allowed: true,
      nowMs: NOW + 500,
      windows: [
        { ...window('minute', 60, 10, NEXT_MINUTE), windowMs: MINUTE },
        { ...window('day', 1000, 995, MIDNIGHT), windowMs: 86_400_000 },
      ],
    };
    expect(standardRateLimitHeaders(result)).toEqual({
      'ratelimit-policy': '"minute";q=60;w=60, "day";q=1000;w=86400',
      ratelimit: `"day";r=5;t=${Math.ceil((MIDNIGHT - NOW - 500) / 1000)}`,
    });
  });

  it('reports r=0 and t up to the end of the ban while banned', () => {
    const result: ConsumeResult = {
      allowed: false,
      reason: 'banned',
      nowMs: NOW,
      bannedUntilMs: NOW + 900_000,
      windows: [{ ...window('minute', 60, 3, NEXT_MINUTE), windowMs: MINUTE }],
    };
    expect(standardRateLimitHeaders(result).ratelimit).toBe('"minute";r=0;t=900');
  });
});

describe('rate-limit headers for a request that costs more than one unit', () => {
  it('runs Retry-After to the reset of every window with less left than the cost, not only the empty ones', () => {
    const result: ConsumeResult = {
      allowed: false,
      reason: 'rate_limited',
      nowMs: NOW,
      windows: [window('minute', 60, 58, NEXT_MINUTE), { ...window('day', 1000, 997, MIDNIGHT), windowMs: 86_400_000 }],
    };
    // Cost 5: the minute (2 left) and the day (3 left) both lack room: wait for the day.
    expect(retryAfterSeconds(result, 5)).toBe((MIDNIGHT - NOW) / 1000);
    expect(rateLimitHeaders(result, 5)).toEqual({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '2',
      'x-ratelimit-reset': seconds(NEXT_MINUTE),
      'retry-after': String((MIDNIGHT - NOW) / 1000),
    });
    // Cost 3: only the minute lacks room.
    expect(retryAfterSeconds(result, 3)).toBe(60);
    expect(blockedUntilMs(result, 3)).toBe(NEXT_MINUTE);
  });

  it('counts an exhausted window for the default cost of 1, as before', () => {
    const result: ConsumeResult = { allowed: false, reason: 'rate_limited', nowMs: NOW, windows: [window('minute', 60, 60, NEXT_MINUTE)] };
    expect(retryAfterSeconds(result)).toBe(60);
    expect(retryAfterSeconds(result, 1)).toBe(60);
  });
});

describe('standardRateLimitHeaders against the examples of draft-ietf-httpapi-ratelimit-headers-11', () => {
  const HOUR = 3_600_000;
  const DAY = 86_400_000;
  /** A result at `nowMs` with the given windows (name, quota, window length, units used). */
  function result(nowMs: number, windows: Array<[string, number, number, number]>, refused = false): ConsumeResult {
    const usage = windows.map(([name, limit, windowMs, used]) => {
      const resetAtMs = Math.floor(nowMs / windowMs) * windowMs + windowMs;
      return { name, limit, windowMs, used, remaining: Math.max(0, limit - used), resetAtMs };
    });
    return refused
      ? { allowed: false, reason: 'rate_limited', nowMs, windows: usage }
      : { allowed: true, nowMs, windows: usage };
  }
  const sameList = (ours: string, draft: string) => expect(parseList(ours)).toEqual(parseList(draft));

  it('B.3.1 "Use with multiple windows": 4,900 of 5,000 daily units used in 14 hours', () => {
    const dayStart = Date.UTC(2026, 0, 1);
    const headers = standardRateLimitHeaders(result(dayStart + 14 * HOUR, [['hour', 1000, HOUR, 0], ['day', 5000, DAY, 4900]]));
    // The draft's own text, to the character.
    expect(headers['ratelimit-policy']).toBe('"hour";q=1000;w=3600, "day";q=5000;w=86400');
    expect(headers['ratelimit']).toBe('"day";r=100;t=36000');
  });

  it('B.2.1 "Throttling window specified via parameter": 99 units left for the next 50 seconds', () => {
    const headers = standardRateLimitHeaders(result(Date.UTC(2026, 0, 1, 10, 0, 10), [['fixedwindow', 100, 60_000, 1]]));
    sameList(headers['ratelimit'] as string, '"fixedwindow";r=99;t=50');
    sameList(headers['ratelimit-policy'] as string, '"fixedwindow";q=100;w=60');
  });

  it('section 3 and 4.2: several policies, and an available quota of 50 for 30 seconds', () => {
    const at = Date.UTC(2026, 0, 1, 10, 0, 30);
    sameList(
      standardRateLimitHeaders(result(at, [['burst', 100, 60_000, 0], ['daily', 1000, DAY, 0]]))['ratelimit-policy'] as string,
      '"burst";q=100;w=60,"daily";q=1000;w=86400',
    );
    sameList(standardRateLimitHeaders(result(at, [['default', 100, 60_000, 50]]))['ratelimit'] as string, '"default";r=50;t=30');
  });

  it('B.1.4 "Use in throttled responses": r=0 and t meeting Retry-After', () => {
    const at = Date.UTC(2019, 7, 5, 9, 26, 55);
    const throttled = result(at, [['default', 100, 60_000, 100]], true);
    sameList(standardRateLimitHeaders(throttled)['ratelimit'] as string, '"default";r=0;t=5');
    expect(retryAfterSeconds(throttled)).toBe(5);
  });

  it('are structured-field Lists of String items with Integer parameters, as the draft requires', () => {
    const headers = standardRateLimitHeaders(result(Date.UTC(2026, 0, 1, 10), [['minute', 60, 60_000, 7], ['day', 1000, DAY, 7]]));
    const policies = parseList(headers['ratelimit-policy'] as string);
    expect(policies.map(([name]) => name)).toEqual(['minute', 'day']);
    for (const [name, parameters] of policies) {
      expect(typeof name).toBe('string');
      expect([...parameters.keys()]).toEqual(['q', 'w']);
      for (const value of parameters.values()) expect(Number.isInteger(value)).toBe(true);
    }
    const [limit, ...others] = parseList(headers['ratelimit'] as string);
    expect(others).toEqual([]);
    expect(limit?.[0]).toBe('minute');
    expect(Object.fromEntries(limit?.[1] ?? [])).toEqual({ r: 53, t: 60 });
  });
});

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

describe('standardRateLimitHeaders (draft-ietf-httpapi-ratelimit-headers-10)', () => {
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

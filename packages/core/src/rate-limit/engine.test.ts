import { describe, expect, it, vi } from 'vitest';
import type { PlanLimits, Principal } from '../auth/principal.js';
import { fakeClock } from '../testing/fake-clock.js';
import { createRateLimiter, type RateLimitDecision, type RateLimiter, type RateLimitSubject } from './engine.js';
import { NO_PEEK_RESET, testRateLimitStore } from '../../test-support/rate-limit-store.js';
import type { BanPolicy } from './types.js';

const SECOND = 1_000;
const MINUTE = 60_000;
/** 2026-01-01T00:00:00Z. */
const T0 = Date.UTC(2026, 0, 1);

function principal(plan: Principal['plan'], limits?: PlanLimits, keyId = `key-${plan}`): { principal: Principal } {
  return { principal: { keyId, accountId: `account-${keyId}`, plan, ...(limits ? { limits } : {}) } };
}

function setup(options: Partial<Parameters<typeof createRateLimiter>[0]> = {}) {
  const clock = fakeClock(T0);
  const store = testRateLimitStore();
  const limiter = createRateLimiter({ store, clock, ...options });
  return { clock, store, limiter };
}

/** Sends `count` requests one after the other; answers how many were admitted and the last decision. */
async function send(limiter: RateLimiter, subject: RateLimitSubject, count: number) {
  let admitted = 0;
  let last: RateLimitDecision | undefined;
  for (let i = 0; i < count; i++) {
    last = await limiter.consume(subject);
    if (last.allowed) admitted++;
  }
  if (last === undefined) throw new Error('send at least one request');
  return { admitted, last };
}

function epochSeconds(epochMs: number): string {
  return String(Math.ceil(epochMs / 1000));
}

describe('createRateLimiter: plans', () => {
  it('admits exactly 60 requests a minute on the Free plan, then answers 429 headers', async () => {
    const { clock, limiter } = setup();
    const free = principal('free');
    clock.advance(15 * SECOND);
    const first = await limiter.consume(free);
    expect(first).toMatchObject({ allowed: true, reason: undefined, retryAfterSeconds: undefined });
    expect(first.headers).toEqual({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '59',
      'x-ratelimit-reset': epochSeconds(T0 + MINUTE),
    });
    expect((await send(limiter, free, 59)).admitted).toBe(59);

    const rejected = await limiter.consume(free);
    expect(rejected).toMatchObject({ allowed: false, reason: 'rate_limited', retryAfterSeconds: 45 });
    expect(rejected.headers).toEqual({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': epochSeconds(T0 + MINUTE),
      'retry-after': '45',
    });
  });

  it('admits again when the minute rolls over', async () => {
    const { clock, limiter } = setup();
    const free = principal('free');
    await send(limiter, free, 61);
    clock.set(T0 + MINUTE - 1);
    expect((await limiter.consume(free)).allowed).toBe(false);
    clock.set(T0 + MINUTE);
    const next = await limiter.consume(free);
    expect(next.allowed).toBe(true);
    expect(next.headers['x-ratelimit-remaining']).toBe('59');
  });

  it('shows the day window after 1,000 requests a day, with Retry-After until midnight UTC', async () => {
    const { clock, limiter } = setup();
    const free = principal('free');
    clock.set(Date.UTC(2026, 0, 1, 10));
    for (let minute = 0; minute < 20; minute++) {
      expect((await send(limiter, free, 50)).admitted).toBe(50);
      clock.advance(MINUTE);
    }
    const rejected = await limiter.consume(free);
    const midnight = Date.UTC(2026, 0, 2);
    const untilMidnightSeconds = (midnight - clock.now()) / 1000;
    expect(rejected).toMatchObject({ allowed: false, reason: 'rate_limited', retryAfterSeconds: untilMidnightSeconds });
    expect(rejected.headers).toEqual({
      'x-ratelimit-limit': '1000',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': epochSeconds(midnight),
      'retry-after': String(untilMidnightSeconds),
    });
    clock.set(midnight - 1);
    expect((await limiter.consume(free)).allowed).toBe(false);
    clock.set(midnight);
    expect((await limiter.consume(free)).allowed).toBe(true);
  });

  it.each([
    ['pro', 300],
    ['business', 1000],
  ] as const)('admits %s keys %i requests a minute', async (plan, perMinute) => {
    const { limiter } = setup();
    const subject = principal(plan);
    const { admitted, last } = await send(limiter, subject, perMinute + 1);
    expect(admitted).toBe(perMinute);
    expect(last.headers['x-ratelimit-limit']).toBe(String(perMinute));
  });

  it.each([
    ['pro', 10_000],
    ['business', 100_000],
  ] as const)('gives %s keys %i requests a day', async (plan, perDay) => {
    const { limiter } = setup();
    const first = await limiter.consume(principal(plan));
    const day = first.result.windows.find((window) => window.name === 'day');
    expect(day).toMatchObject({ limit: perDay, remaining: perDay - 1 });
  });

  it("applies an enterprise key's custom limits", async () => {
    const { limiter } = setup();
    const subject = principal('enterprise', { requestsPerMinute: 7, requestsPerDay: 50 });
    const { admitted, last } = await send(limiter, subject, 8);
    expect(admitted).toBe(7);
    expect(last.headers['x-ratelimit-limit']).toBe('7');
  });

  it('gives an enterprise key without limits the enterprise default (Business), or the configured one', async () => {
    expect((await send(setup().limiter, principal('enterprise'), 1001)).admitted).toBe(1000);
    const configured = setup({ plans: { enterprise: { requestsPerMinute: 5, requestsPerDay: 5 } } });
    expect((await send(configured.limiter, principal('enterprise'), 6)).admitted).toBe(5);
  });

  it('lets configured plans replace the defaults', async () => {
    const { limiter } = setup({ plans: { free: { requestsPerMinute: 2, requestsPerDay: 10 } } });
    expect((await send(limiter, principal('free'), 3)).admitted).toBe(2);
    expect((await send(limiter, principal('pro'), 3)).admitted).toBe(3);
  });

  it('counts each key separately', async () => {
    const { limiter } = setup();
    await send(limiter, principal('free', undefined, 'a'), 60);
    expect((await limiter.consume(principal('free', undefined, 'a'))).allowed).toBe(false);
    expect((await limiter.consume(principal('free', undefined, 'b'))).allowed).toBe(true);
  });

  it('admits exactly the remaining requests of a concurrent burst', async () => {
    const { limiter } = setup();
    const free = principal('free');
    const decisions = await Promise.all(Array.from({ length: 100 }, () => limiter.consume(free)));
    expect(decisions.filter((decision) => decision.allowed)).toHaveLength(60);
  });
});

describe('createRateLimiter: anonymous callers', () => {
  it('admits 30 requests a minute per client address by default', async () => {
    const { limiter } = setup();
    const { admitted, last } = await send(limiter, { clientAddress: '203.0.113.7' }, 31);
    expect(admitted).toBe(30);
    expect(last.headers['x-ratelimit-limit']).toBe('30');
    expect((await limiter.consume({ clientAddress: '203.0.113.8' })).allowed).toBe(true);
  });

  it('applies configured anonymous limits', async () => {
    const { limiter } = setup({ anonymous: { requestsPerMinute: 3, requestsPerDay: 100 } });
    expect((await send(limiter, { clientAddress: '203.0.113.7' }, 4)).admitted).toBe(3);
  });

  it('counts an IPv4-mapped IPv6 address as the IPv4 address', async () => {
    const { limiter } = setup();
    await send(limiter, { clientAddress: '203.0.113.7' }, 15);
    expect((await send(limiter, { clientAddress: '::ffff:203.0.113.7' }, 16)).admitted).toBe(15);
  });

  it('shares one counter across an IPv6 /64, and not across /64s', async () => {
    const { limiter } = setup();
    await send(limiter, { clientAddress: '2001:db8:1:2::1' }, 15);
    expect((await send(limiter, { clientAddress: '2001:db8:1:2:ffff:ffff:ffff:fffe' }, 16)).admitted).toBe(15);
    expect((await limiter.consume({ clientAddress: '2001:db8:1:3::1' })).allowed).toBe(true);
  });

  it("shares one 'unknown' counter among callers without a usable address", async () => {
    const { store, limiter } = setup();
    await send(limiter, { clientAddress: undefined }, 20);
    expect((await send(limiter, { clientAddress: 'not-an-address' }, 11)).admitted).toBe(10);
    expect(store.keys(T0)).toEqual(['anon:unknown']);
  });

  it('groups IPv6 addresses by the configured ipv6Subnet', async () => {
    const { limiter } = setup({ ipv6Subnet: 56 });
    // 2001:db8:0:1::/64 and 2001:db8:0:2::/64 lie in one /56.
    await send(limiter, { clientAddress: '2001:db8:0:1::1' }, 15);
    expect((await send(limiter, { clientAddress: '2001:db8:0:2::9' }, 16)).admitted).toBe(15);
    expect((await limiter.consume({ clientAddress: '2001:db8:0:100::1' })).allowed).toBe(true); // another /56
  });

  it('charges an anonymous key the caller chose as it is', async () => {
    const { store, limiter } = setup();
    await send(limiter, { anonymousKey: 'session:abc' }, 30);
    expect((await limiter.consume({ anonymousKey: 'session:abc' })).allowed).toBe(false);
    expect((await limiter.consume({ anonymousKey: 'session:xyz' })).allowed).toBe(true);
    expect(store.keys(T0).sort()).toEqual(['anon:session:abc', 'anon:session:xyz']);
  });

  it('takes a separate store for anonymous callers from store.newStore(), when the store has one', async () => {
    const anonymous = testRateLimitStore();
    const keyed = testRateLimitStore();
    let created = 0;
    const store = {
      ...NO_PEEK_RESET,
      consume: keyed.consume.bind(keyed),
      newStore: () => {
        created++;
        return anonymous;
      },
    };
    const limiter = createRateLimiter({ store, clock: fakeClock(T0) });
    await limiter.consume({ clientAddress: '203.0.113.7' });
    await limiter.consume(principal('free', undefined, 'k1'));
    expect(created).toBe(1);
    expect(anonymous.keys(T0)).toEqual(['anon:203.0.113.7']);
    expect(keyed.keys(T0)).toEqual(['account:account-k1']);
  });

  it('keeps anonymous callers in the separate anonymousStore when given', async () => {
    const anonymousStore = testRateLimitStore();
    const { store, limiter } = setup({ anonymousStore });
    await limiter.consume({ clientAddress: '203.0.113.7' });
    await limiter.consume(principal('free', undefined, 'k1'));
    expect(anonymousStore.keys(T0)).toEqual(['anon:203.0.113.7']);
    expect(store.keys(T0)).toEqual(['account:account-k1']);
  });
});

describe('createRateLimiter: temporary ban', () => {
  it('bans after 20 rejections in a minute, for 15 minutes, without charging', async () => {
    const { clock, limiter } = setup();
    const free = principal('free');
    await send(limiter, free, 60);
    clock.advance(30 * SECOND);
    for (let i = 1; i <= 19; i++) expect((await limiter.consume(free)).reason).toBe('rate_limited');

    const banned = await limiter.consume(free);
    const banEndMs = T0 + 30 * SECOND + 15 * MINUTE;
    expect(banned).toMatchObject({ allowed: false, reason: 'banned', retryAfterSeconds: 15 * 60 });
    expect(banned.headers).toEqual({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': epochSeconds(banEndMs),
      'retry-after': String(15 * 60),
    });

    clock.advance(5 * MINUTE); // a fresh minute, but still banned
    const during = await limiter.consume(free);
    expect(during).toMatchObject({ reason: 'banned', retryAfterSeconds: 10 * 60 });
    clock.set(banEndMs - 1);
    expect((await limiter.consume(free)).reason).toBe('banned');

    clock.set(banEndMs);
    const after = await limiter.consume(free);
    expect(after.allowed).toBe(true);
    expect(after.result.windows.find((window) => window.name === 'day')?.used).toBe(61);
  });

  it('bans anonymous callers too', async () => {
    const { limiter } = setup();
    const { last } = await send(limiter, { clientAddress: '198.51.100.1' }, 30 + 20);
    expect(last.reason).toBe('banned');
  });

  it('never bans with ban: false', async () => {
    const { clock, limiter } = setup({ ban: false });
    const free = principal('free');
    await send(limiter, free, 60);
    for (let i = 0; i < 200; i++) expect((await limiter.consume(free)).reason).toBe('rate_limited');
    clock.advance(MINUTE);
    expect((await limiter.consume(free)).allowed).toBe(true);
  });

  it('applies a configured ban policy', async () => {
    const { limiter } = setup({ ban: { rejectedThreshold: 2, intervalMs: MINUTE, durationMs: 2 * MINUTE } });
    const subject = principal('enterprise', { requestsPerMinute: 1, requestsPerDay: 10 });
    const { last } = await send(limiter, subject, 3);
    expect(last).toMatchObject({ reason: 'banned', retryAfterSeconds: 120 });
  });
});

describe('createRateLimiter: configuration', () => {
  const clock = fakeClock(T0);
  const store = testRateLimitStore();

  it.each([-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '60' as unknown as number])(
    'throws a TypeError for a plan limit of %s',
    (value) => {
      expect(() =>
        createRateLimiter({ store, clock, plans: { pro: { requestsPerMinute: value, requestsPerDay: 10 } } }),
      ).toThrow(TypeError);
      expect(() =>
        createRateLimiter({ store, clock, anonymous: { requestsPerMinute: 10, requestsPerDay: value } }),
      ).toThrow(TypeError);
    },
  );

  it.each([
    { rejectedThreshold: 0, intervalMs: MINUTE, durationMs: MINUTE },
    { rejectedThreshold: 5, intervalMs: 0, durationMs: MINUTE },
    { rejectedThreshold: 5, intervalMs: MINUTE, durationMs: 1.5 },
  ])('throws a TypeError for the ban policy %j', (ban) => {
    expect(() => createRateLimiter({ store, clock, ban })).toThrow(TypeError);
  });

  it('throws a TypeError for limits or a ban policy with a missing field', () => {
    const minuteOnly = { requestsPerMinute: 10 } as PlanLimits;
    expect(() => createRateLimiter({ store, clock, plans: { free: minuteOnly } })).toThrow(TypeError);
    expect(() => createRateLimiter({ store, clock, anonymous: minuteOnly })).toThrow(TypeError);
    const thresholdOnly = { rejectedThreshold: 2 } as BanPolicy;
    expect(() => createRateLimiter({ store, clock, ban: thresholdOnly })).toThrow(TypeError);
  });

  it("fails closed on a principal's invalid custom limits instead of leaving a window unlimited", async () => {
    const limiter = createRateLimiter({ store, clock });
    for (const limits of [
      { requestsPerMinute: 10 } as PlanLimits,
      { requestsPerMinute: Number.NaN, requestsPerDay: 10 },
      { requestsPerMinute: 10, requestsPerDay: -1 },
    ]) {
      await expect(limiter.consume(principal('enterprise', limits))).rejects.toThrow(TypeError);
    }
  });

  it('fails closed with a clear TypeError on a principal whose plan is not a plan', async () => {
    const limiter = createRateLimiter({ store, clock });
    const stranger = { ...principal('free').principal, plan: 'gold' } as unknown as Principal;
    await expect(limiter.consume({ principal: stranger })).rejects.toThrow('principal.plan "gold" is not a plan');
  });

  it('decides on the system clock when given no clock', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(T0 + 59 * SECOND);
      const limiter = createRateLimiter({ store: testRateLimitStore(), plans: { free: { requestsPerMinute: 1, requestsPerDay: 10 } } });
      const first = await limiter.consume(principal('free'));
      expect(first.headers['x-ratelimit-reset']).toBe(epochSeconds(T0 + MINUTE));
      expect((await limiter.consume(principal('free'))).allowed).toBe(false);
      vi.setSystemTime(T0 + MINUTE); // the next minute window, by the system clock
      expect((await limiter.consume(principal('free'))).allowed).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it('accepts a limit of 0, which rejects every request', async () => {
    const limiter = createRateLimiter({ store, clock, plans: { free: { requestsPerMinute: 0, requestsPerDay: 10 } } });
    expect((await limiter.consume(principal('free'))).allowed).toBe(false);
  });
});

describe('createRateLimiter: standard headers', () => {
  it('adds RateLimit-Policy and RateLimit only when standardHeaders is on', async () => {
    const clock = fakeClock(Date.UTC(2026, 0, 1));
    const off = createRateLimiter({ store: testRateLimitStore(), clock });
    const on = createRateLimiter({ store: testRateLimitStore(), clock, standardHeaders: true });
    const subject = { clientAddress: '203.0.113.9' };
    expect(Object.keys((await off.consume(subject)).headers).sort()).toEqual([
      'x-ratelimit-limit',
      'x-ratelimit-remaining',
      'x-ratelimit-reset',
    ]);
    expect((await on.consume(subject)).headers).toMatchObject({
      'x-ratelimit-limit': '30',
      'ratelimit-policy': '"minute";q=30;w=60, "day";q=500;w=86400',
      ratelimit: '"minute";r=29;t=60',
    });
  });
});

describe('createRateLimiter: costs', () => {
  it('charges the cost in units to every window, and counts the headers in units', async () => {
    const { clock, limiter } = setup();
    const free = principal('free');
    clock.advance(15 * SECOND);
    const dear = await limiter.consume(free, { cost: 5 });
    expect(dear.allowed).toBe(true);
    expect(dear.headers).toMatchObject({ 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '55' });
    expect(dear.result.windows.map((window) => window.used)).toEqual([5, 5]);
    expect((await limiter.consume(free)).headers['x-ratelimit-remaining']).toBe('54');
  });

  it('refuses a cost above what is left with 429 and charges nothing; Retry-After runs to the window that lacks room', async () => {
    const { clock, limiter } = setup();
    const free = principal('free');
    clock.advance(15 * SECOND);
    await limiter.consume(free, { cost: 57 });
    const refused = await limiter.consume(free, { cost: 5 });
    expect(refused).toMatchObject({ allowed: false, reason: 'rate_limited', retryAfterSeconds: 45 });
    expect(refused.headers).toMatchObject({ 'x-ratelimit-remaining': '3', 'retry-after': '45' });
    const fits = await limiter.consume(free, { cost: 3 });
    expect(fits.allowed).toBe(true);
    expect(fits.result.windows.map((window) => window.used)).toEqual([60, 60]);
  });

  it('waits for the day when the day is what lacks room for the cost, though the minute has some', async () => {
    const { clock, limiter } = setup();
    const free = principal('free');
    clock.set(Date.UTC(2026, 0, 1, 10));
    for (let minute = 0; minute < 20; minute++) {
      await limiter.consume(free, { cost: 49 });
      clock.advance(MINUTE);
    }
    // 980 of the day's 1,000 used: a cost of 30 fits the fresh minute, not the day.
    const refused = await limiter.consume(free, { cost: 30 });
    expect(refused).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(refused.retryAfterSeconds).toBe((Date.UTC(2026, 0, 2) - clock.now()) / 1000);
    expect((await limiter.consume(free, { cost: 20 })).allowed).toBe(true);
  });

  it.each([0, -1, 1.5, Number.NaN, '2' as unknown as number])('rejects a cost of %s with a TypeError, charging nothing', async (cost) => {
    const { limiter, store } = setup();
    await expect(limiter.consume(principal('free'), { cost })).rejects.toThrow(/cost must be a whole number >= 1/);
    expect(store.keys(T0)).toEqual([]);
  });
});

describe('createRateLimiter: one record per account, bans per key', () => {
  const ban: BanPolicy = { rejectedThreshold: 2, intervalMs: MINUTE, durationMs: 10 * MINUTE };
  const keyOf = (keyId: string, accountId = 'acme') => ({ principal: { keyId, accountId, plan: 'enterprise' as const, limits: { requestsPerMinute: 3, requestsPerDay: 100 } } });

  it('shares the quota between the keys of one account, and not with other accounts', async () => {
    const { limiter, store } = setup({ ban });
    expect((await limiter.consume(keyOf('k1'), { cost: 2 })).allowed).toBe(true);
    const second = await limiter.consume(keyOf('k2'));
    expect(second.headers['x-ratelimit-remaining']).toBe('0');
    expect((await limiter.consume(keyOf('k1'))).allowed).toBe(false);
    expect((await limiter.consume(keyOf('k9', 'other'))).allowed).toBe(true);
    expect(store.keys(T0).sort()).toEqual(['account:acme', 'account:other']);
  });

  it('bans only the key that earned it; the account goes on through its other keys', async () => {
    const { clock, limiter } = setup({ ban });
    await send(limiter, keyOf('k1'), 3);
    expect((await limiter.consume(keyOf('k1'))).reason).toBe('rate_limited');
    expect((await limiter.consume(keyOf('k1'))).reason).toBe('banned');
    expect((await limiter.consume(keyOf('k2'))).reason).toBe('rate_limited');
    clock.advance(MINUTE);
    expect((await limiter.consume(keyOf('k1'))).reason).toBe('banned');
    expect((await limiter.consume(keyOf('k2'))).allowed).toBe(true);
  });
});

describe('createRateLimiter: peek and reset', () => {
  const ban: BanPolicy = { rejectedThreshold: 1, intervalMs: MINUTE, durationMs: 10 * MINUTE };
  const keyOf = (keyId: string) => ({ principal: { keyId, accountId: 'acme', plan: 'enterprise' as const, limits: { requestsPerMinute: 2, requestsPerDay: 100 } } });

  it('reads an account without charging it: windows in units, every banned key, or one key', async () => {
    const { clock, limiter } = setup({ ban });
    clock.advance(20 * SECOND);
    await limiter.consume(keyOf('k1'), { cost: 2 });
    await limiter.consume(keyOf('k2')); // refused: k2 banned
    const banEnd = T0 + 20 * SECOND + 10 * MINUTE;
    const peeked = await limiter.peek({ accountId: 'acme' });
    expect(peeked).toEqual({
      nowMs: T0 + 20 * SECOND,
      windows: [
        { name: 'minute', limit: 2, windowMs: MINUTE, used: 2, remaining: 0, resetAtMs: T0 + MINUTE },
        { name: 'day', limit: 100, windowMs: 86_400_000, used: 2, remaining: 98, resetAtMs: T0 + 86_400_000 },
      ],
      bans: [{ keyId: 'k2', bannedUntilMs: banEnd }],
    });
    expect((await limiter.peek({ accountId: 'acme', keyId: 'k1' })).bans).toEqual([]);
    expect((await limiter.peek({ accountId: 'acme', keyId: 'k2' })).bans).toEqual([{ keyId: 'k2', bannedUntilMs: banEnd }]);
    expect(await limiter.peek({ accountId: 'acme' })).toEqual(peeked); // nothing charged
    expect(await limiter.peek({ accountId: 'nobody' })).toEqual({ nowMs: T0 + 20 * SECOND, windows: [], bans: [] });
  });

  it('reads and resets an anonymous caller by its address, normalised as a request is', async () => {
    const { limiter } = setup({ ban, anonymous: { requestsPerMinute: 1, requestsPerDay: 10 } });
    await limiter.consume({ clientAddress: '2001:db8:1:2::5' });
    await limiter.consume({ clientAddress: '2001:db8:1:2::6' }); // the same /64: refused and banned
    const peeked = await limiter.peek({ clientAddress: '2001:db8:1:2:ffff::1' });
    expect(peeked.windows.map((window) => window.used)).toEqual([1, 1]);
    expect(peeked.bans).toEqual([{ bannedUntilMs: T0 + 10 * MINUTE }]);
    await limiter.reset({ clientAddress: '2001:db8:1:2::7' });
    expect((await limiter.consume({ clientAddress: '2001:db8:1:2::5' })).allowed).toBe(true);
  });

  it('resets an account: its shared windows and the bans of all its keys; the next request is admitted', async () => {
    const { limiter } = setup({ ban });
    await limiter.consume(keyOf('k1'), { cost: 2 });
    await limiter.consume(keyOf('k1'));
    await limiter.consume(keyOf('k2'));
    expect((await limiter.peek({ accountId: 'acme' })).bans.map((entry) => entry.keyId)).toEqual(['k1', 'k2']);
    await limiter.reset({ accountId: 'acme', keyId: 'k1' });
    expect(await limiter.peek({ accountId: 'acme' })).toMatchObject({ windows: [], bans: [] });
    expect((await limiter.consume(keyOf('k2'))).allowed).toBe(true);
  });

  it('answers 503 service_unavailable when the store fails, reporting the error; the insurance store is not read', async () => {
    const failure = new Error('store down');
    const errors: unknown[] = [];
    const insurance = testRateLimitStore();
    const limiter = createRateLimiter({
      store: { consume: () => Promise.reject(failure), peek: () => Promise.reject(failure), reset: () => Promise.reject(failure) },
      clock: fakeClock(T0),
      onStoreFailure: { mode: 'fail-open', insuranceStore: insurance },
      onStoreError: (error) => errors.push(error),
    });
    await limiter.consume(keyOf('k1'));
    expect(insurance.keys(T0)).toEqual(['account:acme']);
    for (const call of [() => limiter.peek({ accountId: 'acme' }), () => limiter.reset({ accountId: 'acme' })]) {
      await expect(call()).rejects.toMatchObject({ code: 'service_unavailable', retryAfterSeconds: 5, cause: failure });
    }
    expect(errors).toEqual([failure, failure, failure]);
  });

  it('refuses an owner it cannot place with a TypeError', async () => {
    const { limiter } = setup();
    await expect(limiter.peek({} as never)).rejects.toThrow(TypeError);
    await expect(limiter.reset({ accountId: '' })).rejects.toThrow(/accountId must be a non-empty string/);
  });
});

describe('createRateLimiter: algorithms', () => {
  /** 60 requests of the free plan in the last ms of a minute, then one at the next minute's start. */
  async function boundaryBurst(limiter: RateLimiter, clock: ReturnType<typeof fakeClock>, subject: RateLimitSubject) {
    clock.set(T0 + MINUTE - 1);
    const before = await send(limiter, subject, 60);
    clock.set(T0 + MINUTE);
    const after = await limiter.consume(subject);
    return { before: before.admitted, after };
  }

  it('counts by fixed windows unless told otherwise: the boundary burst is admitted', async () => {
    const { limiter, clock } = setup();
    const { before, after } = await boundaryBurst(limiter, clock, principal('free'));
    expect(before).toBe(60);
    expect(after.allowed).toBe(true);
  });

  it.each(['sliding', 'gcra'] as const)('rateLimit.algorithm %s counts every plan by it: the boundary burst is refused, Retry-After 1', async (algorithm) => {
    const { limiter, clock } = setup({ algorithm });
    const { before, after } = await boundaryBurst(limiter, clock, principal('free'));
    expect(before).toBe(60);
    expect(after).toMatchObject({ allowed: false, reason: 'rate_limited', retryAfterSeconds: 1 });
  });

  it('a plan names its own algorithm; the other plans and the anonymous policy keep the default', async () => {
    const { limiter, clock } = setup({ plans: { pro: { requestsPerMinute: 60, requestsPerDay: 10_000, algorithm: 'gcra' } } });
    expect((await boundaryBurst(limiter, clock, principal('pro'))).after.allowed).toBe(false);
    expect((await boundaryBurst(limiter, clock, principal('free'))).after.allowed).toBe(true);
  });

  it('the anonymous policy names its own algorithm', async () => {
    const { limiter, clock } = setup({ anonymous: { requestsPerMinute: 60, requestsPerDay: 500, algorithm: 'sliding' } });
    expect((await boundaryBurst(limiter, clock, { clientAddress: '203.0.113.9' })).after.allowed).toBe(false);
  });

  it("a key's custom limits count by its plan's algorithm", async () => {
    const { limiter, clock } = setup({ plans: { enterprise: { requestsPerMinute: 1_000, requestsPerDay: 100_000, algorithm: 'gcra' } } });
    const custom = principal('enterprise', { requestsPerMinute: 60, requestsPerDay: 5_000 });
    expect((await boundaryBurst(limiter, clock, custom)).after.allowed).toBe(false);
  });

  it('refuses, at creation, an algorithm its store does not implement, naming the store and the algorithm', () => {
    const bare = () => {
      const store = testRateLimitStore();
      return { consume: store.consume, peek: store.peek, reset: store.reset };
    };
    expect(() => createRateLimiter({ store: bare(), algorithm: 'sliding' })).toThrow(/rateLimit\.store does not implement the sliding algorithm \(it implements: fixed\)/);
    expect(() => createRateLimiter({ store: bare(), plans: { pro: { requestsPerMinute: 1, requestsPerDay: 1, algorithm: 'gcra' } } })).toThrow(
      /rateLimit\.store does not implement the gcra algorithm/,
    );
    expect(() =>
      createRateLimiter({ store: testRateLimitStore(), anonymousStore: bare(), anonymous: { requestsPerMinute: 1, requestsPerDay: 1, algorithm: 'gcra' } }),
    ).toThrow(/rateLimit\.anonymousStore does not implement the gcra algorithm/);
    expect(() =>
      createRateLimiter({ store: testRateLimitStore(), algorithm: 'sliding', onStoreFailure: { mode: 'fail-open', insuranceStore: bare() } }),
    ).toThrow(/insuranceStore does not implement the sliding algorithm/);
    // A store without `algorithms` still serves fixed windows.
    expect(() => createRateLimiter({ store: bare() })).not.toThrow();
  });

  it('refuses an unknown algorithm and limits too large for exact sliding or gcra arithmetic, at creation', () => {
    const store = testRateLimitStore();
    expect(() => createRateLimiter({ store, algorithm: 'token-bucket' as never })).toThrow(/algorithm must be 'fixed', 'sliding' or 'gcra'/);
    expect(() => createRateLimiter({ store, plans: { free: { requestsPerMinute: 1, requestsPerDay: 1, algorithm: 'leaky' as never } } })).toThrow(
      /plans\.free\.algorithm must be 'fixed', 'sliding' or 'gcra'/,
    );
    const huge = { requestsPerMinute: 60, requestsPerDay: 20_000_000 };
    expect(() => createRateLimiter({ store, plans: { free: huge } })).not.toThrow();
    expect(() => createRateLimiter({ store, plans: { free: { ...huge, algorithm: 'gcra' } } })).toThrow(
      /rateLimit\.plans\.free: requestsPerDay must be at most 13031248 for the gcra algorithm, got 20000000/,
    );
  });
});

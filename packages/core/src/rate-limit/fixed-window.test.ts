import { describe, expect, it } from 'vitest';
import { chargeInPlace, decideConsume, windowStartMs, type RateLimitState } from './fixed-window.js';
import type { BanPolicy, ConsumeResult, RateLimitWindow, WindowUsage } from './types.js';

const SECOND = 1_000;
const MINUTE = 60_000;
const DAY = 86_400_000;
/** 2026-01-01T00:00:00Z: a minute and a day boundary. */
const T0 = Date.UTC(2026, 0, 1);

function minute(limit: number): RateLimitWindow {
  return { name: 'minute', limit, windowMs: MINUTE };
}
function day(limit: number): RateLimitWindow {
  return { name: 'day', limit, windowMs: DAY };
}

/** Applies consumes one after the other, keeping the state as a store would. */
function keyState(ban?: BanPolicy) {
  let state: RateLimitState | undefined;
  return {
    consume(nowMs: number, windows: readonly RateLimitWindow[]): ConsumeResult {
      const decision = decideConsume(state, { windows, nowMs, ban });
      state = decision.state;
      return decision.result;
    },
    get state(): RateLimitState | undefined {
      return state;
    },
  };
}

/** mulberry32: deterministic random numbers, so a failing step of a random run can be replayed. */
function seededRandom(seed: number) {
  const random = () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = <T,>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  return { random, pick };
}

function usage(result: ConsumeResult, name: string): WindowUsage {
  const window = result.windows.find((candidate) => candidate.name === name);
  if (window === undefined) throw new Error(`no window ${name} in the result`);
  return window;
}

describe('windowStartMs', () => {
  it('aligns windows to the Unix epoch', () => {
    expect(windowStartMs(T0 + 59_999, MINUTE)).toBe(T0);
    expect(windowStartMs(T0 + MINUTE, MINUTE)).toBe(T0 + MINUTE);
    expect(windowStartMs(Date.UTC(2026, 0, 1, 23, 59, 59, 999), DAY)).toBe(T0);
  });
});

describe('decideConsume: counting', () => {
  it('admits up to the limit, then rejects with reason rate_limited', () => {
    const key = keyState();
    const windows = [minute(3)];
    const remaining = [1, 2, 3].map(() => usage(key.consume(T0, windows), 'minute').remaining);
    expect(remaining).toEqual([2, 1, 0]);
    const rejected = key.consume(T0, windows);
    expect(rejected).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(usage(rejected, 'minute')).toMatchObject({ used: 3, remaining: 0, limit: 3 });
  });

  it('does not charge rejected requests', () => {
    const key = keyState();
    const windows = [minute(2), day(100)];
    key.consume(T0, windows);
    key.consume(T0, windows);
    for (let i = 0; i < 5; i++) expect(key.consume(T0 + i, windows).allowed).toBe(false);
    const next = key.consume(T0 + MINUTE, windows);
    expect(next.allowed).toBe(true);
    expect(usage(next, 'minute').used).toBe(1);
    expect(usage(next, 'day').used).toBe(3);
  });

  it('does not charge the day when the minute rejects', () => {
    const key = keyState();
    const windows = [minute(2), day(10)];
    key.consume(T0, windows);
    key.consume(T0, windows);
    const rejected = key.consume(T0 + 1, windows);
    expect(rejected.allowed).toBe(false);
    expect(usage(rejected, 'day')).toMatchObject({ used: 2, remaining: 8 });
    expect(key.state?.counters['day']?.count).toBe(2);
  });

  it('does not charge the minute when the day is exhausted', () => {
    const key = keyState();
    const windows = [minute(10), day(3)];
    for (let i = 0; i < 3; i++) key.consume(T0 + i, windows);
    const rejected = key.consume(T0 + 10, windows);
    expect(rejected.allowed).toBe(false);
    expect(usage(rejected, 'minute')).toMatchObject({ used: 3, remaining: 7 });
    expect(key.state?.counters['minute']?.count).toBe(3);
    // In the next minute the day still rejects, and the fresh minute stays untouched.
    const nextMinute = key.consume(T0 + MINUTE, windows);
    expect(nextMinute.allowed).toBe(false);
    expect(usage(nextMinute, 'minute')).toMatchObject({ used: 0, remaining: 10 });
  });

  it('keeps usage per window name when the limit changes (plan change)', () => {
    const key = keyState();
    key.consume(T0, [minute(2)]);
    key.consume(T0, [minute(2)]);
    expect(key.consume(T0, [minute(2)]).allowed).toBe(false);
    const upgraded = key.consume(T0 + 1, [minute(5)]);
    expect(upgraded.allowed).toBe(true);
    expect(usage(upgraded, 'minute')).toMatchObject({ used: 3, remaining: 2, limit: 5 });
    const downgraded = key.consume(T0 + 2, [minute(1)]);
    expect(downgraded.allowed).toBe(false);
    expect(usage(downgraded, 'minute')).toMatchObject({ used: 3, remaining: 0 });
  });

  it('drops counters of windows no longer requested', () => {
    const key = keyState();
    key.consume(T0, [minute(5), day(5)]);
    key.consume(T0, [minute(5)]);
    expect(Object.keys(key.state?.counters ?? {})).toEqual(['minute']);
  });

  it('rejects every request of a window with limit 0', () => {
    const key = keyState();
    expect(key.consume(T0, [minute(0)])).toMatchObject({ allowed: false, reason: 'rate_limited' });
  });

  it('does not change the previous state', () => {
    const ban: BanPolicy = { rejectedThreshold: 2, intervalMs: MINUTE, durationMs: MINUTE };
    const key = keyState(ban);
    key.consume(T0, [minute(1)]);
    key.consume(T0, [minute(1)]);
    const previous = key.state;
    const copy = structuredClone(previous);
    for (const nowMs of [T0 + 1, T0 + MINUTE]) {
      decideConsume(previous, { windows: [minute(1)], nowMs, ban });
      decideConsume(previous, { windows: [minute(1)], nowMs, ban: undefined });
    }
    expect(previous).toEqual(copy);
  });
});

describe('decideConsume: window boundaries', () => {
  it('rolls the minute over at second :00, not a minute after the first request', () => {
    const key = keyState();
    const windows = [minute(2)];
    key.consume(T0 + 30 * SECOND, windows);
    const full = key.consume(T0 + 45 * SECOND, windows);
    expect(usage(full, 'minute')).toMatchObject({ remaining: 0, resetAtMs: T0 + MINUTE });

    const lastMs = key.consume(T0 + MINUTE - 1, windows);
    expect(lastMs.allowed).toBe(false);
    expect(usage(lastMs, 'minute')).toMatchObject({ remaining: 0, resetAtMs: T0 + MINUTE });

    const firstMs = key.consume(T0 + MINUTE, windows);
    expect(firstMs.allowed).toBe(true);
    expect(usage(firstMs, 'minute')).toMatchObject({ used: 1, remaining: 1, resetAtMs: T0 + 2 * MINUTE });
  });

  it('resets a window at its start, announcing the end of the window it is in', () => {
    const key = keyState();
    expect(usage(key.consume(T0, [minute(5)]), 'minute').resetAtMs).toBe(T0 + MINUTE);
  });

  it('rolls the day over at 00:00 UTC', () => {
    const key = keyState();
    const windows = [day(1)];
    const noon = Date.UTC(2026, 0, 1, 12);
    const midnight = Date.UTC(2026, 0, 2);
    expect(usage(key.consume(noon, windows), 'day')).toMatchObject({ remaining: 0, resetAtMs: midnight });

    const lastMs = key.consume(midnight - 1, windows);
    expect(lastMs.allowed).toBe(false);
    expect(usage(lastMs, 'day').resetAtMs).toBe(midnight);

    const firstMs = key.consume(midnight, windows);
    expect(firstMs.allowed).toBe(true);
    expect(usage(firstMs, 'day')).toMatchObject({ used: 1, resetAtMs: Date.UTC(2026, 0, 3) });
  });
});

describe('decideConsume: temporary ban', () => {
  const ban: BanPolicy = { rejectedThreshold: 3, intervalMs: MINUTE, durationMs: 5 * MINUTE };

  it('starts exactly at the threshold-th rejection within the interval', () => {
    const key = keyState(ban);
    const windows = [minute(1), day(10)];
    key.consume(T0, windows);
    expect(key.consume(T0 + 10 * SECOND, windows)).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(key.consume(T0 + 20 * SECOND, windows)).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(key.consume(T0 + 30 * SECOND, windows)).toEqual(
      expect.objectContaining({ allowed: false, reason: 'banned', bannedUntilMs: T0 + 30 * SECOND + 5 * MINUTE }),
    );
  });

  it('holds without charging or extending, and ends at bannedUntilMs', () => {
    const key = keyState(ban);
    const windows = [minute(1), day(10)];
    key.consume(T0, windows);
    key.consume(T0 + 10 * SECOND, windows);
    key.consume(T0 + 20 * SECOND, windows);
    key.consume(T0 + 30 * SECOND, windows);
    const bannedUntilMs = T0 + 30 * SECOND + 5 * MINUTE;
    const stateAtBan = structuredClone(key.state);

    // Later minutes have room, but the ban holds and charges nothing.
    for (const nowMs of [T0 + 2 * MINUTE, T0 + 3 * MINUTE, bannedUntilMs - 1]) {
      expect(key.consume(nowMs, windows)).toMatchObject({ allowed: false, reason: 'banned', bannedUntilMs });
    }
    expect(key.state).toEqual(stateAtBan);

    const after = key.consume(bannedUntilMs, windows);
    expect(after.allowed).toBe(true);
    expect(usage(after, 'day').used).toBe(2);
  });

  it('does not add up rejections of different intervals', () => {
    const key = keyState(ban);
    const windows = [day(1)];
    key.consume(T0, windows);
    key.consume(T0 + 58 * SECOND, windows);
    key.consume(T0 + 59 * SECOND, windows);
    expect(key.consume(T0 + MINUTE, windows)).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(T0 + MINUTE + 1, windows)).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(T0 + MINUTE + 2, windows)).toMatchObject({ reason: 'banned' });
  });

  it('counts rejections afresh after a ban', () => {
    const key = keyState(ban);
    const windows = [day(1)];
    key.consume(T0, windows);
    for (let i = 1; i <= 3; i++) key.consume(T0 + i, windows);
    const end = T0 + 3 + 5 * MINUTE;
    expect(key.consume(end, windows)).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(end + 1, windows)).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(end + 2, windows)).toMatchObject({ reason: 'banned', bannedUntilMs: end + 2 + 5 * MINUTE });
  });

  it('counts rejections across admitted requests within one interval', () => {
    const key = keyState(ban);
    const windows = [{ name: 'ten-seconds', limit: 1, windowMs: 10 * SECOND }];
    key.consume(T0, windows);
    key.consume(T0 + 1, windows);
    key.consume(T0 + 2, windows);
    expect(key.consume(T0 + 10 * SECOND, windows).allowed).toBe(true);
    expect(key.consume(T0 + 10 * SECOND + 1, windows)).toMatchObject({ reason: 'banned' });
  });

  it('starts counting from zero after a ban that ends within the same interval', () => {
    const shortBan: BanPolicy = { rejectedThreshold: 3, intervalMs: 10 * MINUTE, durationMs: MINUTE };
    const key = keyState(shortBan);
    const windows = [day(1)];
    key.consume(T0, windows);
    for (let i = 1; i <= 3; i++) key.consume(T0 + i, windows);
    const end = T0 + 3 + MINUTE;
    expect(key.consume(end, windows)).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(end + 1, windows)).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(end + 2, windows)).toMatchObject({ reason: 'banned' });
  });

  it('never bans when the ban policy is undefined', () => {
    const key = keyState(undefined);
    const windows = [minute(1)];
    key.consume(T0, windows);
    for (let i = 1; i <= 100; i++) {
      expect(key.consume(T0 + i, windows)).toMatchObject({ allowed: false, reason: 'rate_limited' });
    }
    expect(key.state?.bannedUntilMs).toBe(0);
    expect(key.consume(T0 + MINUTE, windows).allowed).toBe(true);
  });
});

describe('decideConsume: expiresAtMs', () => {
  it('lasts until the longest window resets', () => {
    expect(decideConsume(undefined, { windows: [minute(5), day(5)], nowMs: T0 + 5, ban: undefined }).expiresAtMs).toBe(
      T0 + DAY,
    );
    expect(decideConsume(undefined, { windows: [minute(5)], nowMs: T0 + 5, ban: undefined }).expiresAtMs).toBe(
      T0 + MINUTE,
    );
  });

  it('covers a ban that outlasts the windows', () => {
    const ban: BanPolicy = { rejectedThreshold: 1, intervalMs: MINUTE, durationMs: 10 * MINUTE };
    const first = decideConsume(undefined, { windows: [minute(0)], nowMs: T0 + 5, ban });
    expect(first.result).toMatchObject({ reason: 'banned' });
    expect(first.expiresAtMs).toBe(T0 + 5 + 10 * MINUTE);
    const during = decideConsume(first.state, { windows: [minute(0)], nowMs: T0 + 2 * MINUTE, ban });
    expect(during.expiresAtMs).toBeGreaterThanOrEqual(T0 + 5 + 10 * MINUTE);
  });

  it('covers rejections counted toward a ban in a longer interval', () => {
    const ban: BanPolicy = { rejectedThreshold: 5, intervalMs: 60 * MINUTE, durationMs: MINUTE };
    const decision = decideConsume(undefined, { windows: [minute(0)], nowMs: T0 + 5, ban });
    expect(decision.result).toMatchObject({ reason: 'rate_limited' });
    expect(decision.expiresAtMs).toBe(T0 + 60 * MINUTE);
  });

  it('marks the state worthless from expiresAtMs on: deciding with it or without it gives the same answer', () => {
    const ban: BanPolicy = { rejectedThreshold: 2, intervalMs: 10 * MINUTE, durationMs: 7 * MINUTE };
    const windows = [minute(1), { name: 'hour', limit: 3, windowMs: 60 * MINUTE }];
    let state: RateLimitState | undefined;
    let nowMs = T0 + 17 * SECOND;
    // Admitted, rejected (counted toward a ban), banned, then during the ban.
    for (let step = 0; step < 4; step++) {
      const decision = decideConsume(state, { windows, nowMs, ban });
      state = decision.state;
      const atExpiry = { windows, nowMs: decision.expiresAtMs, ban };
      expect(decideConsume(state, atExpiry).result).toEqual(decideConsume(undefined, atExpiry).result);
      nowMs += 1_000;
    }
  });
});

describe('decideConsume: one-pass admitted path', () => {
  /** The two-pass algorithm decideConsume had before its one-pass path for admitted requests: the oracle. */
  function twoPassReference(previous: RateLimitState | undefined, request: Parameters<typeof decideConsume>[1]) {
    const { nowMs, ban } = request;
    const counters: Record<string, { startMs: number; count: number }> = {};
    const windows: WindowUsage[] = [];
    let hasRoom = true;
    let expiresAtMs = nowMs;
    for (const window of request.windows) {
      const startMs = windowStartMs(nowMs, window.windowMs);
      const stored = previous?.counters[window.name];
      const count = stored !== undefined && stored.startMs === startMs ? stored.count : 0;
      counters[window.name] = { startMs, count };
      if (count + 1 > window.limit) hasRoom = false;
      const resetAtMs = startMs + window.windowMs;
      expiresAtMs = Math.max(expiresAtMs, resetAtMs);
      const { name, limit, windowMs } = window;
      windows.push({ name, limit, windowMs, used: count, remaining: Math.max(0, limit - count), resetAtMs });
    }
    const endOf = (counter: { startMs: number }) => (ban ? counter.startMs + ban.intervalMs : 0);
    const bannedUntilMs = previous?.bannedUntilMs ?? 0;
    if (bannedUntilMs > nowMs) {
      const state = previous as RateLimitState;
      const result = { allowed: false, reason: 'banned', nowMs, windows, bannedUntilMs };
      const stateEndMs = state.rejected ? endOf(state.rejected) : 0;
      return { state, result, expiresAtMs: Math.max(expiresAtMs, bannedUntilMs, stateEndMs) };
    }
    if (hasRoom) {
      for (const entry of windows) {
        const counter = counters[entry.name]!;
        counter.count += 1;
        entry.used = counter.count;
        entry.remaining = Math.max(0, entry.limit - counter.count);
      }
      const rejected = previous?.rejected;
      const state = { counters, rejected, bannedUntilMs: 0 };
      const result = { allowed: true, nowMs, windows };
      return { state, result, expiresAtMs: Math.max(expiresAtMs, rejected ? endOf(rejected) : 0) };
    }
    if (ban === undefined) {
      const state = { counters, rejected: undefined, bannedUntilMs: 0 };
      return { state, result: { allowed: false, reason: 'rate_limited', nowMs, windows }, expiresAtMs };
    }
    const intervalStartMs = windowStartMs(nowMs, ban.intervalMs);
    const rejectedCount = (previous?.rejected?.startMs === intervalStartMs ? previous.rejected.count : 0) + 1;
    if (rejectedCount >= ban.rejectedThreshold) {
      const banEndMs = nowMs + ban.durationMs;
      const state = { counters, rejected: undefined, bannedUntilMs: banEndMs };
      const result = { allowed: false, reason: 'banned', nowMs, windows, bannedUntilMs: banEndMs };
      return { state, result, expiresAtMs: Math.max(expiresAtMs, banEndMs) };
    }
    const state = { counters, rejected: { startMs: intervalStartMs, count: rejectedCount }, bannedUntilMs: 0 };
    const result = { allowed: false, reason: 'rate_limited', nowMs, windows };
    return { state, result, expiresAtMs: Math.max(expiresAtMs, intervalStartMs + ban.intervalMs) };
  }

  it('decides exactly as the two-pass algorithm over a random run, duplicate window names included', () => {
    const { pick } = seededRandom(7);
    const plans: RateLimitWindow[][] = [
      [minute(3), day(8)],
      [minute(100), day(1000)],
      [minute(2)],
      [day(4), minute(1)],
      [minute(0), { name: 'hour', limit: 3, windowMs: 60 * MINUTE }],
      [minute(2), minute(5)],
      [minute(4), { name: 'minute', limit: 4, windowMs: 60 * MINUTE }],
      [],
    ];
    const bans: (BanPolicy | undefined)[] = [
      undefined,
      { rejectedThreshold: 3, intervalMs: MINUTE, durationMs: 5 * MINUTE },
    ];
    const states = new Map<string, RateLimitState>();
    const outcomes = new Set<string>();
    let nowMs = T0;
    for (let step = 0; step < 5000; step++) {
      nowMs += pick([0, 0, 0, 0, 1, 1000, 7 * SECOND, MINUTE, 10 * MINUTE, DAY / 3]);
      const key = pick(['a', 'b', 'c']);
      const request = { windows: pick(plans), nowMs, ban: pick(bans) };
      const previous = states.get(key);
      const decision = decideConsume(previous, request);
      expect(decision, `step ${step}`).toStrictEqual(twoPassReference(previous, request));
      states.set(key, decision.state);
      outcomes.add(decision.result.allowed ? 'allowed' : decision.result.reason);
    }
    expect([...outcomes].sort()).toEqual(['allowed', 'banned', 'rate_limited']);
  });
});

describe('chargeInPlace', () => {
  const ban: BanPolicy = { rejectedThreshold: 3, intervalMs: MINUTE, durationMs: 5 * MINUTE };

  it('charges the counters of the state itself and answers what decideConsume answers', () => {
    const windows = [minute(3), day(10)];
    const first = decideConsume(undefined, { windows, nowMs: T0, ban });
    const request = { windows, nowMs: T0 + 5 * SECOND, ban };
    const expected = decideConsume(first.state, request);
    const state = first.state;
    const result = chargeInPlace(state, request);
    expect(result).toStrictEqual(expected.result);
    expect(state).toStrictEqual(expected.state);
  });

  it('answers undefined and leaves the state untouched whenever the general path is needed', () => {
    const windows = [minute(2), day(10)];
    const cases: [string, RateLimitState, readonly RateLimitWindow[], number][] = [];
    const charged = (times: number, at: number) => {
      let state: RateLimitState | undefined;
      for (let i = 0; i < times; i++) state = decideConsume(state, { windows, nowMs: at, ban }).state;
      return state as RateLimitState;
    };
    cases.push(['a window is full', charged(2, T0), windows, T0 + 1]);
    cases.push(['a counter is from an earlier window', charged(1, T0), windows, T0 + MINUTE]);
    cases.push(['a window has no counter yet', charged(1, T0), [minute(2), day(10), { name: 'hour', limit: 5, windowMs: 60 * MINUTE }], T0 + 1]);
    cases.push(['two windows share a name', charged(1, T0), [minute(2), minute(5)], T0 + 1]);
    cases.push(['the key is banned', { ...charged(1, T0), bannedUntilMs: T0 + MINUTE }, windows, T0 + 1]);
    for (const [label, state, requested, nowMs] of cases) {
      const before = structuredClone(state);
      expect(chargeInPlace(state, { windows: requested, nowMs, ban }), label).toBeUndefined();
      expect(state, label).toStrictEqual(before);
    }
  });

  it('gives a store that charges in place the same answers and states as decideConsume, over a random run', () => {
    const { random, pick } = seededRandom(11);
    // One array per plan, as the engine hands out: the in-place path needs the same windows as last time.
    const plans: RateLimitWindow[][] = [[minute(5), day(40)], [minute(50), day(400)], [day(6)], [minute(2), minute(3)]];
    const bans = [undefined, ban];
    const reference = new Map<string, RateLimitState>();
    // What the memory store keeps: the state, and the windows its counters were built for.
    const held = new Map<string, { state: RateLimitState; windows: readonly RateLimitWindow[] }>();
    let inPlace = 0;
    let nowMs = T0;
    for (let step = 0; step < 5000; step++) {
      nowMs += pick([0, 0, 0, 1, 1000, 7 * SECOND, MINUTE, DAY / 4]);
      const key = pick(['a', 'b']);
      const request = { windows: random() < 0.95 ? plans[key === 'a' ? 0 : 1]! : pick(plans), nowMs, ban: pick(bans) };
      const expected = decideConsume(reference.get(key), request);
      reference.set(key, expected.state);

      const entry = held.get(key);
      let result = entry !== undefined && entry.windows === request.windows ? chargeInPlace(entry.state, request) : undefined;
      if (result !== undefined) {
        inPlace += 1;
      } else {
        const decision = decideConsume(entry?.state, request);
        const windows = entry !== undefined && decision.state === entry.state ? entry.windows : request.windows;
        held.set(key, { state: decision.state, windows });
        result = decision.result;
      }
      expect(result, `step ${step}`).toStrictEqual(expected.result);
      expect(held.get(key)?.state, `state at step ${step}`).toStrictEqual(expected.state);
    }
    expect(inPlace).toBeGreaterThan(1000);
  });
});

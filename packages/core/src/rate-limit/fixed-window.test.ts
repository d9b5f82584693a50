import { describe, expect, it } from 'vitest';
import { decideConsume, windowStartMs, type RateLimitState } from './fixed-window.js';
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

/**
 * An independent model of a store's answers for one key, written from the documented rules (types.ts and the
 * README's "Bans"), not from fixed-window.ts: instead of counters it keeps what happened.
 *
 * - Admitted requests: when, and which window names they were charged to.
 * - Per window name, since which request the key has asked for that name without a break: a request that
 *   leaves a name out drops its usage, so a later request naming it again counts from zero.
 * - The rejections counted toward a ban since the last ban started, and when the ban ends.
 *
 * A request at time t with windows W and ban policy B:
 * - banned (t before the ban's end): rejected `banned`, nothing changes;
 * - else used(w) = admitted requests charged to w's name inside the epoch-aligned window of length w.windowMs
 *   that holds t; when every window has room, all are charged; else nothing is, and with B the rejection
 *   counts toward a ban: reaching B.rejectedThreshold rejections inside one epoch-aligned interval of
 *   B.intervalMs bans the key for B.durationMs from t (and the count starts over); without B the count is
 *   dropped.
 */
class KeyModel {
  private requests = 0;
  private readonly admitted: { atMs: number; request: number; names: readonly string[] }[] = [];
  /** Window name → the first request of the unbroken run of requests that named it. */
  private readonly namedSince = new Map<string, number>();
  /** Times of the rejections counted toward a ban. */
  private rejections: number[] = [];
  private banEndMs = Number.NEGATIVE_INFINITY;

  consume(nowMs: number, windows: readonly RateLimitWindow[], ban: BanPolicy | undefined): ConsumeResult {
    const request = ++this.requests;
    if (nowMs < this.banEndMs) {
      const report = windows.map((window) => this.report(window, nowMs, this.used(window, nowMs)));
      return { allowed: false, reason: 'banned', nowMs, windows: report, bannedUntilMs: this.banEndMs };
    }

    const names = windows.map((window) => window.name);
    for (const name of [...this.namedSince.keys()]) if (!names.includes(name)) this.namedSince.delete(name);
    for (const name of names) if (!this.namedSince.has(name)) this.namedSince.set(name, request);

    const used = windows.map((window) => this.used(window, nowMs));
    if (windows.every((window, index) => (used[index] as number) < window.limit)) {
      this.admitted.push({ atMs: nowMs, request, names });
      const report = windows.map((window, index) => this.report(window, nowMs, (used[index] as number) + 1));
      return { allowed: true, nowMs, windows: report };
    }

    const report = windows.map((window, index) => this.report(window, nowMs, used[index] as number));
    if (ban === undefined) {
      this.rejections = [];
      return { allowed: false, reason: 'rate_limited', nowMs, windows: report };
    }
    this.rejections.push(nowMs);
    const intervalStartMs = nowMs - (nowMs % ban.intervalMs);
    const inInterval = this.rejections.filter(
      (atMs) => atMs >= intervalStartMs && atMs < intervalStartMs + ban.intervalMs,
    ).length;
    if (inInterval >= ban.rejectedThreshold) {
      this.banEndMs = nowMs + ban.durationMs;
      this.rejections = [];
      return { allowed: false, reason: 'banned', nowMs, windows: report, bannedUntilMs: this.banEndMs };
    }
    return { allowed: false, reason: 'rate_limited', nowMs, windows: report };
  }

  /** Admitted requests charged to `window`'s name in the window holding `nowMs`, since the name's run began. */
  private used(window: RateLimitWindow, nowMs: number): number {
    const since = this.namedSince.get(window.name);
    if (since === undefined) return 0;
    const startMs = nowMs - (nowMs % window.windowMs);
    let count = 0;
    // Time never goes back in these runs: walk back from the latest admission until the window's start.
    for (let index = this.admitted.length - 1; index >= 0; index--) {
      const entry = this.admitted[index] as (typeof this.admitted)[number];
      if (entry.atMs < startMs || entry.request < since) break;
      if (entry.atMs < startMs + window.windowMs && entry.names.includes(window.name)) count++;
    }
    return count;
  }

  private report({ name, limit, windowMs }: RateLimitWindow, nowMs: number, used: number): WindowUsage {
    const resetAtMs = nowMs - (nowMs % windowMs) + windowMs;
    return { name, limit, windowMs, used, remaining: limit > used ? limit - used : 0, resetAtMs };
  }
}

describe('decideConsume: against a model of the documented rules', () => {
  it('the model answers the documented examples', () => {
    const ban: BanPolicy = { rejectedThreshold: 2, intervalMs: MINUTE, durationMs: 5 * MINUTE };
    const key = new KeyModel();
    const windows = [minute(1), day(10)];
    expect(key.consume(T0 + 1, windows, ban)).toMatchObject({ allowed: true });
    expect(usage(key.consume(T0 + 2, windows, ban), 'day')).toMatchObject({ used: 1, remaining: 9 });
    expect(key.consume(T0 + 3, windows, ban)).toMatchObject({ reason: 'banned', bannedUntilMs: T0 + 3 + 5 * MINUTE });
    expect(key.consume(T0 + 5 * MINUTE + 2, windows, ban)).toMatchObject({ reason: 'banned' });
    const after = key.consume(T0 + 5 * MINUTE + 3, windows, ban);
    expect(after.allowed).toBe(true);
    expect(usage(after, 'minute')).toMatchObject({ used: 1, resetAtMs: T0 + 6 * MINUTE });
    expect(usage(after, 'day')).toMatchObject({ used: 2, resetAtMs: T0 + DAY });
    // Leaving the day out drops its usage; the minute keeps counting.
    key.consume(T0 + 6 * MINUTE, [minute(5)], ban);
    const again = key.consume(T0 + 6 * MINUTE + 1, [minute(5), day(10)], ban);
    expect(again.windows.map((window) => window.used)).toEqual([2, 1]);
  });

  it('decides as the model over a random run of three keys, plans, plan changes and bans', () => {
    const { pick } = seededRandom(7);
    // A name always has the same length; a plan never names a window twice (see the example test for that).
    const hour = (limit: number): RateLimitWindow => ({ name: 'hour', limit, windowMs: 60 * MINUTE });
    const plans: RateLimitWindow[][] = [
      [minute(3), day(8)],
      [minute(100), day(1000)],
      [minute(2)],
      [day(4), minute(1)],
      [minute(0), hour(3)],
      [hour(5), minute(4)],
      [day(3)],
      [],
    ];
    const bans: (BanPolicy | undefined)[] = [
      undefined,
      { rejectedThreshold: 3, intervalMs: MINUTE, durationMs: 5 * MINUTE },
      { rejectedThreshold: 2, intervalMs: MINUTE, durationMs: 7 * SECOND },
    ];
    const states = new Map<string, RateLimitState>();
    const models = new Map<string, KeyModel>();
    const outcomes = new Map<string, number>();
    let nowMs = T0;
    for (let step = 0; step < 5000; step++) {
      nowMs += pick([0, 0, 0, 0, 1, 1000, 7 * SECOND, 7 * SECOND, 7 * SECOND, MINUTE, 10 * MINUTE, DAY / 3]);
      const key = pick(['a', 'b', 'c']);
      const request = { windows: pick(plans), nowMs, ban: pick(bans) };
      const model = models.get(key) ?? new KeyModel();
      models.set(key, model);
      const decision = decideConsume(states.get(key), request);
      states.set(key, decision.state);
      const expected = model.consume(nowMs, request.windows, request.ban);
      expect(decision.result, `step ${step}, key ${key}`).toStrictEqual(expected);
      const outcome = expected.allowed ? 'allowed' : expected.reason;
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
    }
    // The run reaches every outcome often enough to mean something.
    expect([...outcomes.keys()].sort()).toEqual(['allowed', 'banned', 'rate_limited']);
    for (const count of outcomes.values()) expect(count).toBeGreaterThan(30);
  });

  it('shares one counter between two windows of one name: the tighter rejects, and nothing is charged', () => {
    const key = keyState();
    for (let i = 0; i < 3; i++) key.consume(T0 + i, [minute(5)]);
    const rejected = key.consume(T0 + 10, [minute(3), minute(5)]);
    expect(rejected).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(rejected.windows.map(({ used, remaining }) => ({ used, remaining }))).toEqual([
      { used: 3, remaining: 0 },
      { used: 3, remaining: 2 },
    ]);
    expect(usage(key.consume(T0 + 20, [minute(5)]), 'minute')).toMatchObject({ used: 4, remaining: 1 });
  });
});

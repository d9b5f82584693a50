import { describe, expect, it } from 'vitest';
import { decideConsume, peekState, windowStartMs, type RateLimitState } from './decide.js';
import type { BanPolicy, ConsumeRequest, ConsumeResult, RateLimitWindow, WindowUsage } from './types.js';
import { seededRandom } from '../testing/seeded-random.js';

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

/** A consume request; cost 1 and the anonymous ban subject unless told. */
function consumeRequest(
  nowMs: number,
  windows: readonly RateLimitWindow[],
  options: { cost?: number; ban?: BanPolicy | undefined; subject?: string } = {},
): ConsumeRequest {
  return { windows, nowMs, cost: options.cost ?? 1, ban: options.ban, banSubject: options.subject ?? '' };
}

/** Applies consumes to one record one after the other, keeping the state as a store would. */
function record(ban?: BanPolicy) {
  let state: RateLimitState | undefined;
  return {
    consume(nowMs: number, windows: readonly RateLimitWindow[], options: { cost?: number; subject?: string } = {}): ConsumeResult {
      const decision = decideConsume(state, consumeRequest(nowMs, windows, { ...options, ban }));
      state = decision.state;
      return decision.result;
    },
    get state(): RateLimitState | undefined {
      return state;
    },
  };
}


function usage(result: ConsumeResult, name: string): WindowUsage {
  const window = result.windows.find((candidate) => candidate.name === name);
  if (window === undefined) throw new Error(`no window ${name} in the result`);
  return window;
}

function outcome(result: ConsumeResult): string {
  return result.allowed ? 'allowed' : result.reason;
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
    const key = record();
    const windows = [minute(3)];
    const remaining = [1, 2, 3].map(() => usage(key.consume(T0, windows), 'minute').remaining);
    expect(remaining).toEqual([2, 1, 0]);
    const rejected = key.consume(T0, windows);
    expect(rejected).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(usage(rejected, 'minute')).toMatchObject({ used: 3, remaining: 0, limit: 3 });
  });

  it('does not charge rejected requests', () => {
    const key = record();
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
    const key = record();
    const windows = [minute(2), day(10)];
    key.consume(T0, windows);
    key.consume(T0, windows);
    const rejected = key.consume(T0 + 1, windows);
    expect(rejected.allowed).toBe(false);
    expect(usage(rejected, 'day')).toMatchObject({ used: 2, remaining: 8 });
    expect(key.state?.counters['day']?.count).toBe(2);
  });

  it('does not charge the minute when the day is exhausted', () => {
    const key = record();
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

  it('keeps usage per window name when the limit changes (plan change), and records the limit last charged', () => {
    const key = record();
    key.consume(T0, [minute(2)]);
    key.consume(T0, [minute(2)]);
    expect(key.consume(T0, [minute(2)]).allowed).toBe(false);
    expect(key.state?.counters['minute']).toEqual({ startMs: T0, count: 2, limit: 2, windowMs: MINUTE });
    const upgraded = key.consume(T0 + 1, [minute(5)]);
    expect(upgraded.allowed).toBe(true);
    expect(usage(upgraded, 'minute')).toMatchObject({ used: 3, remaining: 2, limit: 5 });
    expect(key.state?.counters['minute']).toEqual({ startMs: T0, count: 3, limit: 5, windowMs: MINUTE });
    const downgraded = key.consume(T0 + 2, [minute(1)]);
    expect(downgraded.allowed).toBe(false);
    expect(usage(downgraded, 'minute')).toMatchObject({ used: 3, remaining: 0 });
  });

  it('counts afresh when a window keeps its name but changes its length', () => {
    const key = record();
    const hourly: RateLimitWindow = { name: 'minute', limit: 3, windowMs: 60 * MINUTE };
    for (let i = 0; i < 3; i++) key.consume(T0 + i, [hourly]);
    expect(key.consume(T0 + 3, [hourly]).allowed).toBe(false);
    // The same name, now a minute long: the start of the window is the same instant, the window is not.
    const renamed = key.consume(T0 + 4, [minute(3)]);
    expect(renamed.allowed).toBe(true);
    expect(usage(renamed, 'minute')).toMatchObject({ used: 1, remaining: 2, windowMs: MINUTE });
  });

  it('drops counters of windows no longer requested', () => {
    const key = record();
    key.consume(T0, [minute(5), day(5)]);
    key.consume(T0, [minute(5)]);
    expect(Object.keys(key.state?.counters ?? {})).toEqual(['minute']);
  });

  it('rejects every request of a window with limit 0', () => {
    const key = record();
    expect(key.consume(T0, [minute(0)])).toMatchObject({ allowed: false, reason: 'rate_limited' });
  });

  it('does not change the previous state', () => {
    const ban: BanPolicy = { rejectedThreshold: 2, intervalMs: MINUTE, durationMs: MINUTE };
    const key = record(ban);
    key.consume(T0, [minute(1)], { subject: 'k1' });
    key.consume(T0, [minute(1)], { subject: 'k1' });
    key.consume(T0, [minute(1)], { subject: 'k2' });
    key.consume(T0, [minute(1)], { subject: 'k2' });
    const previous = key.state;
    const copy = structuredClone(previous);
    for (const nowMs of [T0 + 1, T0 + MINUTE, T0 + 2 * MINUTE]) {
      for (const subject of ['k1', 'k2', 'k3']) {
        decideConsume(previous, consumeRequest(nowMs, [minute(1)], { ban, subject }));
        decideConsume(previous, consumeRequest(nowMs, [minute(5)], { ban: undefined, subject, cost: 3 }));
      }
    }
    expect(previous).toEqual(copy);
  });
});

describe('decideConsume: costs', () => {
  it('charges the cost to every window', () => {
    const key = record();
    const first = key.consume(T0, [minute(10), day(100)], { cost: 4 });
    expect(first.allowed).toBe(true);
    expect(first.windows.map(({ used, remaining }) => ({ used, remaining }))).toEqual([
      { used: 4, remaining: 6 },
      { used: 4, remaining: 96 },
    ]);
    const second = key.consume(T0 + 1, [minute(10), day(100)], { cost: 1 });
    expect(second.windows.map((window) => window.used)).toEqual([5, 5]);
  });

  it('admits a cost that uses up exactly what is left', () => {
    const key = record();
    key.consume(T0, [minute(10)], { cost: 7 });
    const exact = key.consume(T0 + 1, [minute(10)], { cost: 3 });
    expect(exact.allowed).toBe(true);
    expect(usage(exact, 'minute')).toMatchObject({ used: 10, remaining: 0 });
  });

  it('refuses a cost larger than what is left, with units still left, and charges nothing', () => {
    const key = record();
    key.consume(T0, [minute(10), day(100)], { cost: 8 });
    const tooDear = key.consume(T0 + 1, [minute(10), day(100)], { cost: 3 });
    expect(tooDear).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(tooDear.windows.map(({ used, remaining }) => ({ used, remaining }))).toEqual([
      { used: 8, remaining: 2 },
      { used: 8, remaining: 92 },
    ]);
    // What is left is still there for a request that fits.
    const fits = key.consume(T0 + 2, [minute(10), day(100)], { cost: 2 });
    expect(fits.allowed).toBe(true);
    expect(fits.windows.map((window) => window.used)).toEqual([10, 10]);
  });

  it('refuses a cost that fits the minute but not the day, charging neither', () => {
    const key = record();
    key.consume(T0, [minute(10), day(12)], { cost: 9 });
    const nextMinute = key.consume(T0 + MINUTE, [minute(10), day(12)], { cost: 5 });
    expect(nextMinute.allowed).toBe(false);
    expect(nextMinute.windows.map((window) => window.used)).toEqual([0, 9]);
    expect(key.state?.counters['minute']?.count).toBe(0);
  });

  it('refuses every request of a cost above the limit', () => {
    const key = record();
    expect(key.consume(T0, [minute(3)], { cost: 4 })).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(usage(key.consume(T0, [minute(3)], { cost: 3 }), 'minute').used).toBe(3);
  });

  it('counts one rejection toward a ban per refused request, whatever its cost', () => {
    const ban: BanPolicy = { rejectedThreshold: 3, intervalMs: MINUTE, durationMs: 5 * MINUTE };
    const key = record(ban);
    key.consume(T0, [minute(10)], { cost: 9 });
    expect(key.consume(T0 + 1, [minute(10)], { cost: 5 })).toMatchObject({ reason: 'rate_limited' });
    expect(key.state?.bans['']?.rejected).toEqual({ startMs: T0, count: 1 });
    expect(key.consume(T0 + 2, [minute(10)], { cost: 2 })).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(T0 + 3, [minute(10)], { cost: 1 }).allowed).toBe(true);
    expect(key.consume(T0 + 4, [minute(10)], { cost: 1 })).toMatchObject({ reason: 'banned', bannedUntilMs: T0 + 4 + 5 * MINUTE });
  });
});

describe('decideConsume: window boundaries', () => {
  it('rolls the minute over at second :00, not a minute after the first request', () => {
    const key = record();
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
    const key = record();
    expect(usage(key.consume(T0, [minute(5)]), 'minute').resetAtMs).toBe(T0 + MINUTE);
  });

  it('rolls the day over at 00:00 UTC', () => {
    const key = record();
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
    const key = record(ban);
    const windows = [minute(1), day(10)];
    key.consume(T0, windows);
    expect(key.consume(T0 + 10 * SECOND, windows)).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(key.consume(T0 + 20 * SECOND, windows)).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(key.consume(T0 + 30 * SECOND, windows)).toEqual(
      expect.objectContaining({ allowed: false, reason: 'banned', bannedUntilMs: T0 + 30 * SECOND + 5 * MINUTE }),
    );
  });

  it('holds without charging or extending, and ends at bannedUntilMs', () => {
    const key = record(ban);
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
    const key = record(ban);
    const windows = [day(1)];
    key.consume(T0, windows);
    key.consume(T0 + 58 * SECOND, windows);
    key.consume(T0 + 59 * SECOND, windows);
    expect(key.consume(T0 + MINUTE, windows)).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(T0 + MINUTE + 1, windows)).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(T0 + MINUTE + 2, windows)).toMatchObject({ reason: 'banned' });
  });

  it('counts rejections afresh after a ban', () => {
    const key = record(ban);
    const windows = [day(1)];
    key.consume(T0, windows);
    for (let i = 1; i <= 3; i++) key.consume(T0 + i, windows);
    const end = T0 + 3 + 5 * MINUTE;
    expect(key.consume(end, windows)).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(end + 1, windows)).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(end + 2, windows)).toMatchObject({ reason: 'banned', bannedUntilMs: end + 2 + 5 * MINUTE });
  });

  it('counts rejections across admitted requests within one interval: an admitted request forgets none', () => {
    const key = record(ban);
    const windows = [{ name: 'ten-seconds', limit: 1, windowMs: 10 * SECOND }];
    key.consume(T0, windows);
    key.consume(T0 + 1, windows);
    key.consume(T0 + 2, windows);
    expect(key.consume(T0 + 10 * SECOND, windows).allowed).toBe(true);
    expect(key.state?.bans['']?.rejected).toEqual({ startMs: T0, count: 2 });
    expect(key.consume(T0 + 10 * SECOND + 1, windows)).toMatchObject({ reason: 'banned' });
  });

  it('starts counting from zero after a ban that ends within the same interval', () => {
    const shortBan: BanPolicy = { rejectedThreshold: 3, intervalMs: 10 * MINUTE, durationMs: MINUTE };
    const key = record(shortBan);
    const windows = [day(1)];
    key.consume(T0, windows);
    for (let i = 1; i <= 3; i++) key.consume(T0 + i, windows);
    const end = T0 + 3 + MINUTE;
    expect(key.consume(end, windows)).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(end + 1, windows)).toMatchObject({ reason: 'rate_limited' });
    expect(key.consume(end + 2, windows)).toMatchObject({ reason: 'banned' });
  });

  it('never bans when the ban policy is undefined, and keeps no rejection counts', () => {
    const key = record(undefined);
    const windows = [minute(1)];
    key.consume(T0, windows);
    for (let i = 1; i <= 100; i++) {
      expect(key.consume(T0 + i, windows)).toMatchObject({ allowed: false, reason: 'rate_limited' });
    }
    expect(key.state?.bans).toEqual({});
    expect(key.consume(T0 + MINUTE, windows).allowed).toBe(true);
  });

  it('still holds a running ban for a request without a ban policy', () => {
    const state = record(ban);
    state.consume(T0, [minute(0)]);
    state.consume(T0 + 1, [minute(0)]);
    state.consume(T0 + 2, [minute(0)]);
    const decision = decideConsume(state.state, consumeRequest(T0 + 3, [minute(5)], { ban: undefined }));
    expect(decision.result).toMatchObject({ allowed: false, reason: 'banned', bannedUntilMs: T0 + 2 + 5 * MINUTE });
  });
});

describe('decideConsume: one record, several ban subjects (the keys of one account)', () => {
  const ban: BanPolicy = { rejectedThreshold: 2, intervalMs: MINUTE, durationMs: 5 * MINUTE };

  it('shares the windows between subjects', () => {
    const account = record(ban);
    account.consume(T0, [minute(3)], { subject: 'k1' });
    account.consume(T0 + 1, [minute(3)], { subject: 'k2', cost: 2 });
    const third = account.consume(T0 + 2, [minute(3)], { subject: 'k1' });
    expect(third).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(usage(third, 'minute')).toMatchObject({ used: 3, remaining: 0 });
  });

  it('bans only the subject that earned it; the others go on using what the account has left', () => {
    const account = record(ban);
    const windows = [minute(2), day(100)];
    account.consume(T0, windows, { subject: 'k1' });
    account.consume(T0 + 1, windows, { subject: 'k1' });
    expect(account.consume(T0 + 2, windows, { subject: 'k1' })).toMatchObject({ reason: 'rate_limited' });
    expect(account.consume(T0 + 3, windows, { subject: 'k1' })).toMatchObject({ reason: 'banned', bannedUntilMs: T0 + 3 + 5 * MINUTE });
    // k2 is not banned: refused for the full minute only, and its refusal counts for k2 alone.
    expect(account.consume(T0 + 4, windows, { subject: 'k2' })).toMatchObject({ reason: 'rate_limited' });
    expect(account.state?.bans).toEqual({
      k1: { rejected: undefined, bannedUntilMs: T0 + 3 + 5 * MINUTE },
      k2: { rejected: { startMs: T0, count: 1 }, bannedUntilMs: 0 },
    });
    const nextMinute = account.consume(T0 + MINUTE, windows, { subject: 'k2' });
    expect(nextMinute.allowed).toBe(true);
    expect(usage(nextMinute, 'day').used).toBe(3);
    expect(account.consume(T0 + MINUTE + 1, windows, { subject: 'k1' })).toMatchObject({ reason: 'banned' });
    expect(usage(account.consume(T0 + MINUTE + 2, windows, { subject: 'k3' }), 'day').used).toBe(4);
  });

  it("keeps another subject's rejections and ban through every outcome of this subject's requests", () => {
    const account = record(ban);
    account.consume(T0, [minute(1)], { subject: 'k1' });
    account.consume(T0 + 1, [minute(1)], { subject: 'k1' }); // k1: 1 rejection
    account.consume(T0 + 2, [minute(1)], { subject: 'k2' });
    account.consume(T0 + 3, [minute(1)], { subject: 'k2' }); // k2: banned
    const k2Ban = { rejected: undefined, bannedUntilMs: T0 + 3 + 5 * MINUTE };
    expect(account.state?.bans).toEqual({ k1: { rejected: { startMs: T0, count: 1 }, bannedUntilMs: 0 }, k2: k2Ban });
    account.consume(T0 + 10 * SECOND, [minute(5)], { subject: 'k3' }); // admitted
    account.consume(T0 + 11 * SECOND, [minute(0)], { subject: 'k3' }); // rate limited
    expect(account.state?.bans).toEqual({
      k1: { rejected: { startMs: T0, count: 1 }, bannedUntilMs: 0 },
      k2: k2Ban,
      k3: { rejected: { startMs: T0, count: 1 }, bannedUntilMs: 0 },
    });
  });

  it('keeps the subject keys of the record as they are, also ones named like Object.prototype members', () => {
    const account = record(ban);
    for (const subject of ['__proto__', 'constructor', 'toString']) {
      account.consume(T0, [minute(0)], { subject });
      expect(account.consume(T0 + 1, [minute(0)], { subject })).toMatchObject({ reason: 'banned' });
    }
    expect(account.consume(T0 + 2, [minute(5)], { subject: 'hasOwnProperty' }).allowed).toBe(true);
    const bans = account.state?.bans ?? {};
    expect(Object.keys(bans).sort()).toEqual(['__proto__', 'constructor', 'toString']);
    expect(Object.getPrototypeOf(bans)).toBe(Object.prototype);
    expect(JSON.parse(JSON.stringify(account.state)).bans).toEqual(JSON.parse(JSON.stringify(bans)));
    expect(({} as Record<string, unknown>)['bannedUntilMs']).toBeUndefined();
  });
});

describe('decideConsume: pruning', () => {
  const ban: BanPolicy = { rejectedThreshold: 2, intervalMs: MINUTE, durationMs: 2 * MINUTE };

  it("removes a subject whose ban and rejection interval have ended, at any subject's next request", () => {
    const account = record(ban);
    account.consume(T0, [minute(0)], { subject: 'k1' });
    account.consume(T0 + 1, [minute(0)], { subject: 'k1' }); // banned until T0 + 1 + 2 min
    account.consume(T0 + 2, [minute(0)], { subject: 'k2' }); // one rejection, interval ends at T0 + 1 min
    account.consume(T0 + MINUTE, [minute(5)], { subject: 'k3' });
    expect(Object.keys(account.state?.bans ?? {})).toEqual(['k1']);
    account.consume(T0 + 1 + 2 * MINUTE, [minute(5)], { subject: 'k3' });
    expect(account.state?.bans).toEqual({});
  });

  it('keeps a live rejection count but drops an ended ban of the same subject', () => {
    const longInterval: BanPolicy = { rejectedThreshold: 2, intervalMs: 60 * MINUTE, durationMs: MINUTE };
    const account = record(longInterval);
    account.consume(T0, [minute(0)], { subject: 'k1' });
    account.consume(T0 + 1, [minute(0)], { subject: 'k1' }); // banned until T0 + 1 + 1 min
    account.consume(T0 + 2 * MINUTE, [minute(0)], { subject: 'k1' }); // a new rejection in the same hour
    expect(account.state?.bans).toEqual({ k1: { rejected: { startMs: T0, count: 1 }, bannedUntilMs: 0 } });
  });

  it('keeps the bans of a record bounded by its live subjects', () => {
    const account = record(ban);
    for (let i = 0; i < 1000; i++) account.consume(T0 + i * MINUTE, [minute(0)], { subject: `k${i}` });
    expect(Object.keys(account.state?.bans ?? {})).toEqual(['k999']);
  });
});

describe('decideConsume: expiresAtMs', () => {
  it('lasts until the longest window resets', () => {
    expect(decideConsume(undefined, consumeRequest(T0 + 5, [minute(5), day(5)])).expiresAtMs).toBe(T0 + DAY);
    expect(decideConsume(undefined, consumeRequest(T0 + 5, [minute(5)])).expiresAtMs).toBe(T0 + MINUTE);
  });

  it('covers a ban that outlasts the windows', () => {
    const ban: BanPolicy = { rejectedThreshold: 1, intervalMs: MINUTE, durationMs: 10 * MINUTE };
    const first = decideConsume(undefined, consumeRequest(T0 + 5, [minute(0)], { ban }));
    expect(first.result).toMatchObject({ reason: 'banned' });
    expect(first.expiresAtMs).toBe(T0 + 5 + 10 * MINUTE);
    const during = decideConsume(first.state, consumeRequest(T0 + 2 * MINUTE, [minute(0)], { ban }));
    expect(during.expiresAtMs).toBe(T0 + 5 + 10 * MINUTE);
  });

  it('covers the ban of another subject of the record', () => {
    const ban: BanPolicy = { rejectedThreshold: 1, intervalMs: MINUTE, durationMs: 10 * MINUTE };
    const banned = decideConsume(undefined, consumeRequest(T0, [minute(0)], { ban, subject: 'k1' }));
    const other = decideConsume(banned.state, consumeRequest(T0 + 1, [minute(5)], { ban, subject: 'k2' }));
    expect(other.result.allowed).toBe(true);
    expect(other.expiresAtMs).toBe(T0 + 10 * MINUTE);
  });

  it('covers rejections counted toward a ban in a longer interval', () => {
    const ban: BanPolicy = { rejectedThreshold: 5, intervalMs: 60 * MINUTE, durationMs: MINUTE };
    const decision = decideConsume(undefined, consumeRequest(T0 + 5, [minute(0)], { ban }));
    expect(decision.result).toMatchObject({ reason: 'rate_limited' });
    expect(decision.expiresAtMs).toBe(T0 + 60 * MINUTE);
  });

  it('marks the state worthless from expiresAtMs on: deciding with it or without it gives the same answer and state', () => {
    const ban: BanPolicy = { rejectedThreshold: 2, intervalMs: 10 * MINUTE, durationMs: 7 * MINUTE };
    const windows = [minute(1), { name: 'hour', limit: 3, windowMs: 60 * MINUTE }];
    let state: RateLimitState | undefined;
    let nowMs = T0 + 17 * SECOND;
    // Admitted, rejected (counted toward a ban), banned, then during the ban; two subjects.
    for (let step = 0; step < 8; step++) {
      const subject = step % 2 === 0 ? 'k1' : 'k2';
      const decision = decideConsume(state, consumeRequest(nowMs, windows, { ban, subject }));
      state = decision.state;
      for (const next of ['k1', 'k2', 'k3']) {
        const atExpiry = consumeRequest(decision.expiresAtMs, windows, { ban, subject: next, cost: 2 });
        const withState = decideConsume(state, atExpiry);
        const without = decideConsume(undefined, atExpiry);
        expect(withState.result).toEqual(without.result);
        expect(withState.state).toEqual(without.state);
      }
      nowMs += 1_000;
    }
  });
});

describe('peekState', () => {
  const ban: BanPolicy = { rejectedThreshold: 2, intervalMs: MINUTE, durationMs: 5 * MINUTE };

  it('reads nothing for a record that does not exist', () => {
    expect(peekState(undefined, T0)).toEqual({ nowMs: T0, windows: [], bans: [] });
  });

  it('reads each window as of now, shortest first, with the limit last charged, and charges nothing', () => {
    const account = record(ban);
    account.consume(T0 + 5 * SECOND, [day(100), minute(10)], { cost: 3, subject: 'k1' });
    const before = structuredClone(account.state);
    const snapshot = peekState(account.state, T0 + 20 * SECOND);
    expect(snapshot).toEqual({
      nowMs: T0 + 20 * SECOND,
      windows: [
        { name: 'minute', limit: 10, windowMs: MINUTE, used: 3, remaining: 7, resetAtMs: T0 + MINUTE },
        { name: 'day', limit: 100, windowMs: DAY, used: 3, remaining: 97, resetAtMs: T0 + DAY },
      ],
      bans: [],
    });
    expect(account.state).toEqual(before);
  });

  it('reads an ended window as unused, resetting at the end of the current one', () => {
    const account = record(ban);
    account.consume(T0, [minute(10), day(100)], { cost: 4 });
    expect(peekState(account.state, T0 + 90 * SECOND).windows).toEqual([
      { name: 'minute', limit: 10, windowMs: MINUTE, used: 0, remaining: 10, resetAtMs: T0 + 2 * MINUTE },
      { name: 'day', limit: 100, windowMs: DAY, used: 4, remaining: 96, resetAtMs: T0 + DAY },
    ]);
  });

  it('lists the live bans by subject, not the rejection counts nor ended bans', () => {
    const account = record(ban);
    for (const subject of ['k3', 'k1']) {
      account.consume(T0, [minute(0)], { subject });
      account.consume(T0 + 1, [minute(0)], { subject });
    }
    account.consume(T0 + 2, [minute(0)], { subject: 'k2' }); // one rejection only
    expect(peekState(account.state, T0 + 3).bans).toEqual([
      { subject: 'k1', bannedUntilMs: T0 + 1 + 5 * MINUTE },
      { subject: 'k3', bannedUntilMs: T0 + 1 + 5 * MINUTE },
    ]);
    expect(peekState(account.state, T0 + 1 + 5 * MINUTE).bans).toEqual([]);
  });

  it('reads a record with nothing live left as one that does not exist', () => {
    const account = record(ban);
    account.consume(T0, [minute(0)], { subject: 'k1' }); // a rejection counting until T0 + 1 min
    expect(peekState(account.state, T0 + MINUTE)).toEqual({ nowMs: T0 + MINUTE, windows: [], bans: [] });
    const banned = record(ban);
    banned.consume(T0, [minute(0)]);
    banned.consume(T0, [minute(0)]);
    // The minute has ended, the ban has not: the record is live, its window reads as unused.
    expect(peekState(banned.state, T0 + 2 * MINUTE)).toEqual({
      nowMs: T0 + 2 * MINUTE,
      windows: [{ name: 'minute', limit: 0, windowMs: MINUTE, used: 0, remaining: 0, resetAtMs: T0 + 3 * MINUTE }],
      bans: [{ subject: '', bannedUntilMs: T0 + 5 * MINUTE }],
    });
  });
});

/**
 * An independent model of a store's answers for one record, written from the documented rules (types.ts, the
 * docs' "Rate limits" and "Bans"), not from fixed-window.ts: instead of counters it keeps what happened.
 *
 * - Admitted requests: when, their cost, and which window names they were charged to.
 * - Per window name, since which request and with which length the record has asked for that name without a
 *   break: a request that leaves a name out, or names it with another length, drops its usage, so a later
 *   request naming it again counts from zero.
 * - Per ban subject: the rejections counted toward its ban since its last ban started, and when its ban ends.
 *
 * A request at time t with windows W, cost c, ban policy B, for subject s:
 * - s banned (t before its ban's end): rejected `banned`, nothing changes;
 * - else used(w) = the costs of the admitted requests charged to w's name inside the epoch-aligned window of
 *   length w.windowMs that holds t; when every window has room for c (used + c ≤ limit), all are charged c;
 *   else nothing is, and with B the rejection counts once toward s's ban: reaching B.rejectedThreshold
 *   rejections inside one epoch-aligned interval of B.intervalMs bans s for B.durationMs from t (and s's count
 *   starts over). A decision without B (not answered `banned`) forgets every subject's counted rejections.
 */
class RecordModel {
  private requests = 0;
  private readonly admitted: { atMs: number; request: number; cost: number; names: readonly string[] }[] = [];
  /** Window name → the window length and the first request of the unbroken run of requests that named it so. */
  private readonly runs = new Map<string, { windowMs: number; since: number }>();
  private readonly subjects = new Map<string, { rejections: number[]; banEndMs: number }>();

  consume(nowMs: number, windows: readonly RateLimitWindow[], cost: number, ban: BanPolicy | undefined, subjectName: string): ConsumeResult {
    const request = ++this.requests;
    const subject = this.subjects.get(subjectName) ?? { rejections: [], banEndMs: Number.NEGATIVE_INFINITY };
    this.subjects.set(subjectName, subject);
    const used = windows.map((window) => this.used(window, nowMs));
    if (nowMs < subject.banEndMs) {
      const report = windows.map((window, index) => this.report(window, nowMs, used[index] as number));
      return { allowed: false, reason: 'banned', nowMs, windows: report, bannedUntilMs: subject.banEndMs };
    }

    for (const [name, run] of [...this.runs]) {
      const asked = windows.find((window) => window.name === name);
      if (asked === undefined || asked.windowMs !== run.windowMs) this.runs.delete(name);
    }
    for (const window of windows) if (!this.runs.has(window.name)) this.runs.set(window.name, { windowMs: window.windowMs, since: request });
    if (ban === undefined) for (const other of this.subjects.values()) other.rejections = [];

    if (windows.every((window, index) => (used[index] as number) + cost <= window.limit)) {
      this.admitted.push({ atMs: nowMs, request, cost, names: windows.map((window) => window.name) });
      const report = windows.map((window, index) => this.report(window, nowMs, (used[index] as number) + cost));
      return { allowed: true, nowMs, windows: report };
    }

    const report = windows.map((window, index) => this.report(window, nowMs, used[index] as number));
    if (ban === undefined) return { allowed: false, reason: 'rate_limited', nowMs, windows: report };
    subject.rejections.push(nowMs);
    const intervalStartMs = nowMs - (nowMs % ban.intervalMs);
    const inInterval = subject.rejections.filter((atMs) => atMs >= intervalStartMs && atMs < intervalStartMs + ban.intervalMs).length;
    if (inInterval >= ban.rejectedThreshold) {
      subject.banEndMs = nowMs + ban.durationMs;
      subject.rejections = [];
      return { allowed: false, reason: 'banned', nowMs, windows: report, bannedUntilMs: subject.banEndMs };
    }
    return { allowed: false, reason: 'rate_limited', nowMs, windows: report };
  }

  /** Units charged to `window`'s name in the window holding `nowMs`, since the name's run (of this length) began. */
  private used(window: RateLimitWindow, nowMs: number): number {
    const run = this.runs.get(window.name);
    if (run === undefined || run.windowMs !== window.windowMs) return 0;
    const startMs = nowMs - (nowMs % window.windowMs);
    let units = 0;
    // Time never goes back in these runs: walk back from the latest admission until the window's start.
    for (let index = this.admitted.length - 1; index >= 0; index--) {
      const entry = this.admitted[index] as (typeof this.admitted)[number];
      if (entry.atMs < startMs || entry.request < run.since) break;
      if (entry.atMs < startMs + window.windowMs && entry.names.includes(window.name)) units += entry.cost;
    }
    return units;
  }

  private report({ name, limit, windowMs }: RateLimitWindow, nowMs: number, used: number): WindowUsage {
    const resetAtMs = nowMs - (nowMs % windowMs) + windowMs;
    return { name, limit, windowMs, used, remaining: limit > used ? limit - used : 0, resetAtMs };
  }
}

describe('decideConsume: against a model of the documented rules', () => {
  it('the model answers the documented examples', () => {
    const ban: BanPolicy = { rejectedThreshold: 2, intervalMs: MINUTE, durationMs: 5 * MINUTE };
    const account = new RecordModel();
    const windows = [minute(3), day(10)];
    expect(account.consume(T0 + 1, windows, 2, ban, 'k1')).toMatchObject({ allowed: true });
    expect(usage(account.consume(T0 + 2, windows, 2, ban, 'k1'), 'day')).toMatchObject({ used: 2, remaining: 8 });
    expect(account.consume(T0 + 3, windows, 1, ban, 'k1')).toMatchObject({ allowed: true });
    expect(account.consume(T0 + 4, windows, 1, ban, 'k1')).toMatchObject({ reason: 'banned', bannedUntilMs: T0 + 4 + 5 * MINUTE });
    expect(account.consume(T0 + MINUTE, windows, 3, ban, 'k2')).toMatchObject({ allowed: true });
    expect(account.consume(T0 + 5 * MINUTE + 3, windows, 1, ban, 'k1')).toMatchObject({ reason: 'banned' });
    const after = account.consume(T0 + 5 * MINUTE + 4, windows, 1, ban, 'k1');
    expect(after.allowed).toBe(true);
    expect(usage(after, 'minute')).toMatchObject({ used: 1, resetAtMs: T0 + 6 * MINUTE });
    expect(usage(after, 'day')).toMatchObject({ used: 7, resetAtMs: T0 + DAY });
    // Leaving the day out drops its usage; the minute keeps counting.
    account.consume(T0 + 6 * MINUTE, [minute(5)], 1, ban, 'k1');
    const again = account.consume(T0 + 6 * MINUTE + 1, [minute(5), day(10)], 1, ban, 'k1');
    expect(again.windows.map((window) => window.used)).toEqual([2, 1]);
  });

  it('decides as the model over a random run of three records, several subjects, costs, plans, plan changes and bans', () => {
    const { pick } = seededRandom(7);
    // A name always has the same length in a plan; a plan never names a window twice (names are unique).
    const hour = (limit: number): RateLimitWindow => ({ name: 'hour', limit, windowMs: 60 * MINUTE });
    const plans: RateLimitWindow[][] = [
      [minute(6), day(16)],
      [minute(100), day(1000)],
      [minute(4)],
      [day(8), minute(3)],
      [minute(0), hour(6)],
      [hour(10), minute(8)],
      [day(6)],
      [{ name: 'minute', limit: 6, windowMs: 60 * MINUTE }],
      [],
    ];
    // One interval length for every policy of a run: a count in one interval never meets another's.
    const bans: (BanPolicy | undefined)[] = [
      undefined,
      { rejectedThreshold: 3, intervalMs: MINUTE, durationMs: 5 * MINUTE },
      { rejectedThreshold: 3, intervalMs: MINUTE, durationMs: 5 * MINUTE },
      { rejectedThreshold: 2, intervalMs: MINUTE, durationMs: 7 * SECOND },
    ];
    const subjectsOf: Record<string, string[]> = { 'account:a': ['k1', 'k2', 'k3'], 'account:b': ['k4'], 'anon:x': [''] };
    const states = new Map<string, RateLimitState>();
    const models = new Map<string, RecordModel>();
    const outcomes = new Map<string, number>();
    let costlyRefusals = 0;
    let nowMs = T0;
    for (let step = 0; step < 6000; step++) {
      nowMs += pick([0, 0, 0, 0, 1, 1000, 7 * SECOND, 7 * SECOND, 7 * SECOND, MINUTE, 10 * MINUTE, DAY / 3]);
      const key = pick(Object.keys(subjectsOf));
      const subject = pick(subjectsOf[key] as string[]);
      const request = consumeRequest(nowMs, pick(plans), { cost: pick([1, 1, 1, 2, 3, 5]), ban: pick(bans), subject });
      const model = models.get(key) ?? new RecordModel();
      models.set(key, model);
      const decision = decideConsume(states.get(key), request);
      states.set(key, decision.state);
      const expected = model.consume(nowMs, request.windows, request.cost, request.ban, subject);
      expect(decision.result, `step ${step}, ${key} as ${JSON.stringify(subject)}`).toStrictEqual(expected);
      outcomes.set(outcome(expected), (outcomes.get(outcome(expected)) ?? 0) + 1);
      if (outcome(expected) === 'rate_limited' && expected.windows.every((window) => window.remaining > 0)) costlyRefusals++;
    }
    // The run reaches every outcome, and refusals of a cost above what is left, often enough to mean something.
    expect([...outcomes.keys()].sort()).toEqual(['allowed', 'banned', 'rate_limited']);
    for (const count of outcomes.values()) expect(count).toBeGreaterThan(30);
    expect(costlyRefusals).toBeGreaterThan(30);
  });
});

/**
 * The three algorithms as a user meets them: worked examples computed by hand, the boundary burst, Retry-After
 * that never sends a client back too early, the guarantee of each algorithm over random arrivals, and a plan
 * moving from one algorithm to another.
 */
import { describe, expect, it } from 'vitest';
import { decideConsume, type RateLimitState } from './decide.js';
import { blockedUntilMs, rateLimitHeaders, retryAfterSeconds } from './headers.js';
import { seededRandom } from '../testing/seeded-random.js';
import type { ConsumeResult, RateLimitAlgorithm, RateLimitWindow } from './types.js';

const MINUTE = 60_000;
const DAY = 86_400_000;
/** 2026-01-01T00:00:00Z: a minute and a day boundary. */
const T0 = Date.UTC(2026, 0, 1);
const ALGORITHMS: readonly RateLimitAlgorithm[] = ['fixed', 'sliding', 'gcra'];

function window(limit: number, windowMs: number, algorithm: RateLimitAlgorithm, name = 'minute'): RateLimitWindow {
  return algorithm === 'fixed' ? { name, limit, windowMs } : { name, limit, windowMs, algorithm };
}

/** One record, consumed one request after the other as a store would, without bans. */
function record(initial?: RateLimitState) {
  let state = initial;
  return {
    consume(nowMs: number, windows: readonly RateLimitWindow[], cost = 1): ConsumeResult {
      const decision = decideConsume(state, { windows, nowMs, cost, ban: undefined, banSubject: '' });
      state = decision.state;
      return decision.result;
    },
    /** What a consume would answer, without keeping its state. */
    probe(nowMs: number, windows: readonly RateLimitWindow[], cost = 1): ConsumeResult {
      return decideConsume(state, { windows, nowMs, cost, ban: undefined, banSubject: '' }).result;
    },
    get state() {
      return state;
    },
  };
}

/** Sends `count` requests of `cost` at `nowMs`; answers how many were admitted. */
function burst(target: ReturnType<typeof record>, nowMs: number, windows: readonly RateLimitWindow[], count: number, cost = 1): number {
  let admitted = 0;
  for (let i = 0; i < count; i++) if (target.consume(nowMs, windows, cost).allowed) admitted++;
  return admitted;
}

describe('worked examples (10 per minute), as docs/http-api.md gives them', () => {
  it('fixed: 10 at 00:00:59.999 and 10 more at 00:01:00.000 are all admitted (20 within 2 ms)', () => {
    const minute = [window(10, MINUTE, 'fixed')];
    const caller = record();
    expect(burst(caller, T0 + MINUTE - 1, minute, 10)).toBe(10);
    expect(burst(caller, T0 + MINUTE, minute, 11)).toBe(10);
  });

  it('sliding: after 10 at 00:00:30, none at 00:01:00, the next one at 00:01:06, 5 left at 00:01:30', () => {
    const minute = [window(10, MINUTE, 'sliding')];
    const caller = record();
    expect(burst(caller, T0 + 30_000, minute, 10)).toBe(10);
    const refused = caller.consume(T0 + MINUTE, minute);
    expect(refused).toMatchObject({ allowed: false, reason: 'rate_limited' });
    // 10 × (60 − 6) / 60 = 9 units of the previous minute still count at 00:01:06, so 1 fits; at 6 s − 1 ms not.
    expect(refused.windows[0]).toMatchObject({ used: 10, remaining: 0, retryAtMs: T0 + 66_000, resetAtMs: T0 + 2 * MINUTE });
    expect(rateLimitHeaders(refused)).toMatchObject({ 'retry-after': '6', 'x-ratelimit-remaining': '0' });
    expect(caller.probe(T0 + 66_000 - 1, minute).allowed).toBe(false);
    expect(caller.probe(T0 + 66_000, minute).allowed).toBe(true);
    // Half of the previous minute still counts at 00:01:30: 5 units.
    expect(caller.probe(T0 + 90_000, minute, 5).allowed).toBe(true);
    expect(caller.probe(T0 + 90_000, minute, 6).allowed).toBe(false);
  });

  it('gcra: 10 at once, then one every 6 s; the whole burst is back 60 s after the last', () => {
    const minute = [window(10, MINUTE, 'gcra')];
    const caller = record();
    expect(burst(caller, T0 + 12_345, minute, 11)).toBe(10);
    const refused = caller.consume(T0 + 12_345, minute);
    expect(refused.windows[0]).toMatchObject({ used: 10, remaining: 0, retryAtMs: T0 + 18_345, resetAtMs: T0 + 72_345 });
    expect(rateLimitHeaders(refused)).toMatchObject({ 'retry-after': '6', 'x-ratelimit-reset': String(Math.ceil((T0 + 72_345) / 1000)) });
    expect(caller.probe(T0 + 18_344, minute).allowed).toBe(false);
    expect(burst(caller, T0 + 18_345, minute, 2)).toBe(1);
    // 30 s later, 5 units have drained.
    expect(caller.probe(T0 + 48_345, minute, 5).allowed).toBe(true);
    expect(caller.probe(T0 + 48_345, minute, 6).allowed).toBe(false);
  });

  it('gcra with a rate that is not a whole number of ms per unit: 7 per minute still admits a burst of exactly 7', () => {
    const minute = [window(7, MINUTE, 'gcra')];
    const caller = record();
    expect(burst(caller, T0 + 1, minute, 8)).toBe(7);
    // One unit per 60,000 / 7 = 8,571.43 ms: back after 8,572 ms, not after 8,571.
    expect(caller.probe(T0 + 1 + 8_571, minute).allowed).toBe(false);
    expect(caller.probe(T0 + 1 + 8_572, minute).allowed).toBe(true);
  });

  it('gcra with such a rate reports the whole quota back at the first whole ms after it is (resetAtMs rounded up)', () => {
    const minute = [window(7, MINUTE, 'gcra')];
    const caller = record();
    // One unit: back after 8,571.43 ms; the full quota is held again at +8,572, not +8,571.
    expect(caller.consume(T0 + 1, minute).windows[0]).toMatchObject({ used: 1, remaining: 6, resetAtMs: T0 + 1 + 8_572 });
    expect(caller.probe(T0 + 1 + 8_571, minute, 7).allowed).toBe(false);
    expect(caller.probe(T0 + 1 + 8_572, minute, 7).allowed).toBe(true);
  });
});

describe('the boundary burst', () => {
  it.each([
    ['fixed', 20],
    ['sliding', 10],
    ['gcra', 10],
  ] as const)('%s: a full quota in the last ms of a minute and again in the first ms of the next admits %i', (algorithm, admitted) => {
    const minute = [window(10, MINUTE, algorithm)];
    const caller = record();
    expect(burst(caller, T0 + MINUTE - 1, minute, 10) + burst(caller, T0 + MINUTE, minute, 10)).toBe(admitted);
  });
});

describe('Retry-After never sends a client back too early', () => {
  // Random traffic over two windows of each algorithm, costs 1–4: every refusal's Retry-After is checked by
  // retrying the same cost exactly then (admitted) and at the computed instant − 1 ms (still refused).
  it.each(ALGORITHMS)('%s: a retry after exactly Retry-After seconds is admitted; one 1 ms before the announced instant is not', (algorithm) => {
    let refusals = 0;
    for (let seed = 1; seed <= 20; seed++) {
      const { pick, between } = seededRandom(seed * 7 + ALGORITHMS.indexOf(algorithm));
      // Every cost fits the limits (a cost above a limit is never admitted, and createPetstore refuses such costs).
      const windows = [window(between(4, 9), 10_000, algorithm, 'short'), window(between(10, 30), MINUTE, algorithm, 'long')];
      const caller = record();
      let nowMs = T0 + between(0, 9_999);
      for (let step = 0; step < 150; step++) {
        nowMs += pick([0, 0, 1, 7, 450, 999, 2_500, 9_999, 10_000]);
        const cost = pick([1, 1, 2, 3, 4]);
        const result = caller.consume(nowMs, windows, cost);
        if (result.allowed) continue;
        refusals++;
        const seconds = retryAfterSeconds(result, cost) as number;
        const untilMs = blockedUntilMs(result, cost) as number;
        expect(seconds).toBeGreaterThanOrEqual(1);
        expect(caller.probe(nowMs + seconds * 1000, windows, cost).allowed).toBe(true);
        if (untilMs > nowMs) expect(caller.probe(untilMs - 1, windows, cost).allowed).toBe(false);
        expect(caller.probe(untilMs, windows, cost).allowed).toBe(true);
      }
    }
    expect(refusals).toBeGreaterThan(300);
  });
});

/** Admissions of a random run: (time, units), in time order. Arrivals cluster at and around window boundaries. */
function admissions(algorithm: RateLimitAlgorithm, limit: number, windowMs: number, seed: number): Array<{ atMs: number; units: number }> {
  const { pick, random } = seededRandom(seed);
  const windows = [window(limit, windowMs, algorithm)];
  const caller = record();
  const admitted: Array<{ atMs: number; units: number }> = [];
  let nowMs = T0 + Math.floor(random() * windowMs);
  for (let step = 0; step < 600; step++) {
    const boundary = Math.ceil(nowMs / windowMs) * windowMs;
    // Time never goes back (boundary − 1 may be before nowMs).
    nowMs = Math.max(nowMs, pick([nowMs, nowMs, nowMs + 1, nowMs + 13, nowMs + Math.floor(windowMs / 7), boundary - 1, boundary, nowMs + windowMs - 1]));
    const cost = pick([1, 1, 1, 2, 3]);
    if (caller.consume(nowMs, windows, cost).allowed) admitted.push({ atMs: nowMs, units: cost });
  }
  return admitted;
}

/**
 * Every interval between two admissions of a run: its length in ms (the shortest `[a, a + t)` holding both) and
 * the units admitted within it; answers the intervals for which `exceeds(t, units)` holds, and how many were seen.
 */
function intervalsExceeding(
  admitted: ReadonlyArray<{ atMs: number; units: number }>,
  exceeds: (lengthMs: number, units: number) => boolean,
): { seen: number; exceeding: string[] } {
  let seen = 0;
  const exceeding: string[] = [];
  for (let first = 0; first < admitted.length; first++) {
    let units = 0;
    for (let last = first; last < admitted.length; last++) {
      units += (admitted[last] as { units: number }).units;
      const lengthMs = (admitted[last] as { atMs: number }).atMs - (admitted[first] as { atMs: number }).atMs + 1;
      seen++;
      if (exceeds(lengthMs, units)) exceeding.push(`${units} units in ${lengthMs} ms from ${(admitted[first] as { atMs: number }).atMs - T0} ms`);
    }
  }
  return { seen, exceeding };
}

describe('what each algorithm guarantees, over random arrivals', () => {
  const LIMITS = [1, 3, 7, 10];
  const WINDOW_MS = 1_000;

  it('gcra: no interval of t ms admits more than limit + ceil(limit × t / windowMs) units', () => {
    let intervals = 0;
    for (const limit of LIMITS) {
      for (let seed = 1; seed <= 6; seed++) {
        const { seen, exceeding } = intervalsExceeding(admissions('gcra', limit, WINDOW_MS, seed), (t, units) => units > limit + Math.ceil((limit * t) / WINDOW_MS));
        intervals += seen;
        expect(exceeding, `limit ${limit}, seed ${seed}`).toEqual([]);
      }
    }
    expect(intervals).toBeGreaterThan(10_000);
  });

  it('sliding: no interval of t <= windowMs admits more than limit + floor(limit × t / windowMs) units (under 2 × limit)', () => {
    let intervals = 0;
    for (const limit of LIMITS) {
      for (let seed = 1; seed <= 6; seed++) {
        const { seen, exceeding } = intervalsExceeding(
          admissions('sliding', limit, WINDOW_MS, seed),
          (t, units) => t <= WINDOW_MS && units > limit + Math.floor((limit * t) / WINDOW_MS),
        );
        intervals += seen;
        expect(exceeding, `limit ${limit}, seed ${seed}`).toEqual([]);
      }
    }
    expect(intervals).toBeGreaterThan(10_000);
  });

  it('sliding: the bound is reached: a full quota in the last ms of a window, then one unit as soon as each fits, admits 2 × limit − 1 within one windowMs', () => {
    const limit = 10;
    const windows = [window(limit, WINDOW_MS, 'sliding')];
    const caller = record();
    expect(burst(caller, T0 + WINDOW_MS - 1, windows, limit)).toBe(limit);
    let admitted = limit;
    for (let atMs = T0 + WINDOW_MS; atMs < T0 + 2 * WINDOW_MS - 1; atMs++) if (caller.consume(atMs, windows).allowed) admitted++;
    // [T0 + 999, T0 + 1999): one windowMs.
    expect(admitted).toBe(2 * limit - 1);
  });

  it('fixed: no interval of t <= windowMs admits more than 2 × limit, and 2 × limit within 2 ms happens', () => {
    let reached = 0;
    for (const limit of LIMITS) {
      for (let seed = 1; seed <= 6; seed++) {
        const run = admissions('fixed', limit, WINDOW_MS, seed);
        expect(intervalsExceeding(run, (t, units) => t <= WINDOW_MS && units > 2 * limit).exceeding).toEqual([]);
        reached += intervalsExceeding(run, (t, units) => t <= 2 && units === 2 * limit).exceeding.length;
      }
    }
    expect(reached).toBeGreaterThan(0);
  });
});

describe('a plan moving from one algorithm to another', () => {
  // Each pair: 6 of 10 units used under the first algorithm (at 00:00:40), then the plan changes. The units in use
  // carry over, rounded up: the second algorithm admits at most the 4 left at that instant, and never fails.
  const pairs = ALGORITHMS.flatMap((from) => ALGORITHMS.filter((to) => to !== from).map((to) => [from, to] as const));

  it.each(pairs)('%s → %s: the units used carry over; no more than the rest of the limit at the change', (from, to) => {
    const caller = record();
    expect(burst(caller, T0 + 40_000, [window(10, MINUTE, from)], 6)).toBe(6);
    const changed = caller.probe(T0 + 40_000, [window(10, MINUTE, to)]);
    expect(changed.windows[0]).toMatchObject({ used: 7, remaining: 3 });
    expect(burst(caller, T0 + 40_000, [window(10, MINUTE, to)], 10)).toBe(4);
  });

  it.each(['fixed', 'gcra'] as const)('a sliding window read as %s counts what its previous window still weighs, rounded up (the units are not freed)', (to) => {
    const caller = record();
    expect(burst(caller, T0 + 50_000, [window(10, MINUTE, 'sliding')], 10)).toBe(10);
    // At 00:01:15, 10 × 45 / 60 = 7.5 units of the previous minute still count under sliding: 8 carried over.
    expect(burst(caller, T0 + 75_000, [window(10, MINUTE, to)], 10)).toBe(2);
  });

  it('a gcra window read as sliding counts its outstanding units, rounded up', () => {
    const caller = record();
    expect(burst(caller, T0 + 10_000, [window(10, MINUTE, 'gcra')], 10)).toBe(10);
    // 9 s later 1.5 units have drained (one per 6 s): 8.5 outstanding, 9 carried over.
    expect(burst(caller, T0 + 19_000, [window(10, MINUTE, 'sliding')], 10)).toBe(1);
  });

  it('a window whose length changes starts afresh, whatever the algorithm (another window)', () => {
    const caller = record();
    expect(burst(caller, T0 + 1, [window(5, MINUTE, 'gcra')], 5)).toBe(5);
    expect(burst(caller, T0 + 1, [window(5, 2 * MINUTE, 'sliding')], 6)).toBe(5);
  });
});

describe('peek and the record', () => {
  it('a record expires once nothing in it counts: sliding after two windows, gcra when drained', () => {
    const sliding = decideConsume(undefined, { windows: [window(4, MINUTE, 'sliding')], nowMs: T0 + 10_000, cost: 1, ban: undefined, banSubject: '' });
    expect(sliding.expiresAtMs).toBe(T0 + 2 * MINUTE);
    const gcra = decideConsume(undefined, { windows: [window(4, MINUTE, 'gcra')], nowMs: T0 + 10_000, cost: 3, ban: undefined, banSubject: '' });
    // 3 units of 15 s each.
    expect(gcra.expiresAtMs).toBe(T0 + 55_000);
  });

  it('a day window of each algorithm answers the same units as a user would count them', () => {
    for (const algorithm of ALGORITHMS) {
      const caller = record();
      const day = [window(1_000, DAY, algorithm, 'day')];
      expect(caller.consume(T0 + 1, day, 250).windows[0]).toMatchObject({ used: 250, remaining: 750 });
    }
  });
});

import { decideConsume, type BanPolicy, type RateLimitState, type RateLimitWindow } from '@petstore/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chargeInPlace } from './charge-in-place.js';

const SECOND = 1_000;
const MINUTE = 60_000;
const DAY = 86_400_000;
/** 2026-01-01T00:00:00Z: a minute and a day boundary. */
const T0 = Date.UTC(2026, 0, 1);
const minute = (limit: number): RateLimitWindow => ({ name: 'minute', limit, windowMs: MINUTE });
const day = (limit: number): RateLimitWindow => ({ name: 'day', limit, windowMs: DAY });
const ban: BanPolicy = { rejectedThreshold: 3, intervalMs: MINUTE, durationMs: 5 * MINUTE };

describe('chargeInPlace', () => {
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
    const charged = (times: number, at: number) => {
      let state: RateLimitState | undefined;
      for (let i = 0; i < times; i++) state = decideConsume(state, { windows, nowMs: at, ban }).state;
      return state as RateLimitState;
    };
    const hour = { name: 'hour', limit: 5, windowMs: 60 * MINUTE };
    const cases: [string, RateLimitState, readonly RateLimitWindow[], number][] = [
      ['a window is full', charged(2, T0), windows, T0 + 1],
      ['a counter is from an earlier window', charged(1, T0), windows, T0 + MINUTE],
      ['a window has no counter yet', charged(1, T0), [minute(2), day(10), hour], T0 + 1],
      ['two windows share a name', charged(1, T0), [minute(2), minute(5)], T0 + 1],
      ['the key is banned', { ...charged(1, T0), bannedUntilMs: T0 + MINUTE }, windows, T0 + 1],
    ];
    for (const [label, state, requested, nowMs] of cases) {
      const before = structuredClone(state);
      expect(chargeInPlace(state, { windows: requested, nowMs, ban }), label).toBeUndefined();
      expect(state, label).toStrictEqual(before);
    }
  });

  it('gives a store that charges in place the answers of decideConsume alone, over random runs', () => {
    // One array per plan, as the engine hands out: the in-place path needs the same windows as last time.
    const plans: RateLimitWindow[][] = [[minute(5), day(40)], [minute(50), day(400)], [day(6)], [minute(2), { name: 'hour', limit: 9, windowMs: 60 * MINUTE }]];
    const step = fc.record({
      advanceMs: fc.constantFrom(0, 0, 0, 1, 1000, 7 * SECOND, MINUTE, DAY / 4),
      key: fc.constantFrom('a', 'b'),
      plan: fc.oneof({ weight: 19, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.nat(plans.length - 1) }),
      banned: fc.boolean(),
    });
    let inPlace = 0;
    fc.assert(
      fc.property(fc.array(step, { minLength: 50, maxLength: 400 }), (steps) => {
        // The reference: every consume through decideConsume, the state replaced each time.
        const reference = new Map<string, RateLimitState>();
        // What the memory store keeps: the state, and the windows its counters were built for.
        const held = new Map<string, { state: RateLimitState; windows: readonly RateLimitWindow[] }>();
        let nowMs = T0;
        for (const { advanceMs, key, plan, banned } of steps) {
          nowMs += advanceMs;
          const windows = plan === -1 ? plans[key === 'a' ? 0 : 1]! : plans[plan]!;
          const request = { windows, nowMs, ban: banned ? ban : undefined };
          const expected = decideConsume(reference.get(key), request);
          reference.set(key, expected.state);

          const entry = held.get(key);
          let result = entry !== undefined && entry.windows === windows ? chargeInPlace(entry.state, request) : undefined;
          if (result !== undefined) {
            inPlace += 1;
          } else {
            const decision = decideConsume(entry?.state, request);
            held.set(key, { state: decision.state, windows: entry !== undefined && decision.state === entry.state ? entry.windows : windows });
            result = decision.result;
          }
          expect(result).toStrictEqual(expected.result);
        }
      }),
      { numRuns: 40, seed: 11 },
    );
    // The property means something only if the in-place path ran often.
    expect(inPlace).toBeGreaterThan(1000);
  });
});

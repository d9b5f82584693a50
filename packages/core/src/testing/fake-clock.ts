import type { Clock } from '../clock.js';

/** A clock that only moves when told to. */
export interface FakeClock extends Clock {
  /** Moves time forward by `ms` milliseconds (negative moves it back). */
  advance(ms: number): void;
  /** Sets the time to `epochMs` (Unix epoch ms). */
  set(epochMs: number): void;
}

/**
 * A manual clock for tests: time stands still until `advance` or `set`.
 * @param startMs starting time, Unix epoch ms. Default 2026-01-01T00:00:00Z (a minute and day boundary).
 */
export function fakeClock(startMs: number = Date.UTC(2026, 0, 1)): FakeClock {
  let nowMs = startMs;
  return {
    now: () => nowMs,
    advance(ms) {
      nowMs += ms;
    },
    set(epochMs) {
      nowMs = epochMs;
    },
  };
}

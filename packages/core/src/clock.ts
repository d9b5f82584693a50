/**
 * The source of time for every decision. Logic never reads `Date.now()` itself: a clock is injected,
 * so tests move time instead of sleeping.
 */
export interface Clock {
  /** Current time as Unix epoch milliseconds. */
  now(): number;
}

/** The real clock: `Date.now()`, Unix epoch milliseconds. */
export const systemClock: Clock = Object.freeze({ now: () => Date.now() });

/**
 * The account plans and the windows they turn into.
 */
import type { PlanLimits, PlanName } from '../auth/principal.js';
import { MAX_LIMIT_TIMES_WINDOW_MS, type BanPolicy, type RateLimitAlgorithm, type RateLimitWindow } from './types.js';

/** One minute in milliseconds. */
export const MINUTE_MS = 60_000;
/** One day in milliseconds (24 h; Unix time has no leap seconds). */
export const DAY_MS = 86_400_000;

/**
 * Limits per plan (the plan table). `enterprise` is "custom" in the plan table: each enterprise key carries its
 * own `limits`; an enterprise key without them gets the `enterprise` entry here, which by default equals
 * Business.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#plans
 */
export const DEFAULT_PLAN_LIMITS: Readonly<Record<PlanName, Readonly<PlanLimits>>> = Object.freeze({
  free: Object.freeze({ requestsPerMinute: 60, requestsPerDay: 1_000 }),
  pro: Object.freeze({ requestsPerMinute: 300, requestsPerDay: 10_000 }),
  business: Object.freeze({ requestsPerMinute: 1_000, requestsPerDay: 100_000 }),
  enterprise: Object.freeze({ requestsPerMinute: 1_000, requestsPerDay: 100_000 }),
});

/**
 * The anonymous policy: requests without a valid API key (401 answers included) are limited per client
 * address, so key guessing is throttled. Default: 30 per minute and 500 per day per address.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#anonymous-callers
 */
export const DEFAULT_ANONYMOUS_LIMITS: Readonly<PlanLimits> = Object.freeze({
  requestsPerMinute: 30,
  requestsPerDay: 500,
});

/**
 * Default ban: 20 requests rejected with 429 within one minute ban the key (or anonymous
 * address) for 15 minutes.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#bans
 */
export const DEFAULT_BAN_POLICY: Readonly<BanPolicy> = Object.freeze({
  rejectedThreshold: 20,
  intervalMs: MINUTE_MS,
  durationMs: 15 * MINUTE_MS,
});

/**
 * A plan's entry in `rateLimit.plans` (and `rateLimit.anonymous`): its limits, and the algorithm both its windows
 * count by (default: `rateLimit.algorithm`, else `fixed`).
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#algorithms
 */
export interface PlanPolicy extends PlanLimits {
  algorithm?: RateLimitAlgorithm;
}

/**
 * The two windows of a plan: `minute` (60,000 ms) and `day` (86,400,000 ms), counted by `algorithm` (a `fixed`
 * window carries no `algorithm` field).
 */
export function windowsForLimits(limits: PlanLimits, algorithm: RateLimitAlgorithm = 'fixed'): RateLimitWindow[] {
  const windows: RateLimitWindow[] = [
    { name: 'minute', limit: limits.requestsPerMinute, windowMs: MINUTE_MS },
    { name: 'day', limit: limits.requestsPerDay, windowMs: DAY_MS },
  ];
  if (algorithm !== 'fixed') for (const window of windows) window.algorithm = algorithm;
  return windows;
}

/**
 * Checks limits from configuration, for the algorithm that will count them.
 * @throws TypeError when a limit is missing or not a whole number ≥ 0, or, for `sliding` and `gcra`, when
 *   `requestsPerMinute × 60,000` or `requestsPerDay × 86,400,000` exceeds 2^50 (their arithmetic stays exact).
 */
export function assertPlanLimits(limits: PlanLimits, what: string, algorithm: RateLimitAlgorithm = 'fixed'): void {
  if (typeof limits !== 'object' || limits === null) throw new TypeError(`${what} must be an object`);
  // Named fields, not Object.entries: a missing field would otherwise pass and leave its window unlimited.
  for (const [field, windowMs] of [['requestsPerMinute', MINUTE_MS], ['requestsPerDay', DAY_MS]] as const) {
    const value = limits[field];
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new TypeError(`${what}: ${field} must be a whole number >= 0, got ${String(value)}`);
    }
    if (algorithm !== 'fixed' && value * windowMs > MAX_LIMIT_TIMES_WINDOW_MS) {
      throw new TypeError(`${what}: ${field} must be at most ${Math.floor(MAX_LIMIT_TIMES_WINDOW_MS / windowMs)} for the ${algorithm} algorithm, got ${value}`);
    }
  }
}

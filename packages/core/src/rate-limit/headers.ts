/**
 * From a {@link ConsumeResult} to the rate-limit headers. Every count is in units (a request costs its
 * operation's cost, 1 unless configured otherwise).
 */
import { serializeList } from 'structured-headers';
import type { ConsumeResult, WindowUsage } from './types.js';

/**
 * The window that binds the caller: the one closest to exhaustion (fewest remaining); on a tie, the one
 * that resets later. So a caller who has used up the day sees the day's limit and reset, not the minute's.
 *
 * @returns `undefined` only when there are no windows.
 */
export function bindingWindow(windows: readonly WindowUsage[]): WindowUsage | undefined {
  let binding: WindowUsage | undefined;
  for (const window of windows) {
    if (
      binding === undefined ||
      window.remaining < binding.remaining ||
      (window.remaining === binding.remaining && window.resetAtMs > binding.resetAtMs)
    ) {
      binding = window;
    }
  }
  return binding;
}

/** Milliseconds to whole seconds, rounded up (an instant is never announced earlier than it is). */
export function ceilSeconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

/**
 * When a rejected caller can next be admitted for the same cost, Unix epoch ms: the latest of the ban's end
 * (when banned) and, for every window with less left than `cost` units (default 1: every exhausted window), when
 * it has room again (its `retryAtMs` where the algorithm reports one — sliding, gcra — else its reset).
 * `undefined` for an admitted request.
 */
export function blockedUntilMs(result: ConsumeResult, cost = 1): number | undefined {
  if (result.allowed) return undefined;
  let untilMs = result.reason === 'banned' ? Math.max(result.nowMs, result.bannedUntilMs) : result.nowMs;
  for (const window of result.windows) {
    if (window.remaining >= cost) continue;
    const atMs = window.retryAtMs ?? window.resetAtMs;
    if (atMs > untilMs) untilMs = atMs;
  }
  return untilMs;
}

/**
 * Seconds the caller must wait before a retry of the same cost (default 1) can succeed, for `Retry-After`
 * (RFC 9110 §10.2.3: delay-seconds, a whole number): until {@link blockedUntilMs}, rounded up and at least 1.
 * `undefined` for an admitted request.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#retry-after
 */
export function retryAfterSeconds(result: ConsumeResult, cost = 1): number | undefined {
  const untilMs = blockedUntilMs(result, cost);
  return untilMs === undefined ? undefined : Math.max(1, ceilSeconds(untilMs - result.nowMs));
}

/**
 * The headers every API answer carries, as lowercase names:
 *
 * - `x-ratelimit-limit`: the binding window's limit in units (see {@link bindingWindow});
 * - `x-ratelimit-remaining`: units left in it; 0 while banned;
 * - `x-ratelimit-reset`: when it resets, Unix time in whole seconds, rounded up; while banned, when the
 *   caller can next be admitted ({@link blockedUntilMs});
 * - `retry-after` (rejected answers only): see {@link retryAfterSeconds}, for a request costing `cost` units
 *   (default 1).
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#rate-limit-headers
 */
export function rateLimitHeaders(result: ConsumeResult, cost = 1): Record<string, string> {
  const headers: Record<string, string> = {};
  const binding = bindingWindow(result.windows);
  const banned = !result.allowed && result.reason === 'banned';
  if (binding !== undefined) {
    headers['x-ratelimit-limit'] = String(binding.limit);
    headers['x-ratelimit-remaining'] = String(banned ? 0 : binding.remaining);
    headers['x-ratelimit-reset'] = String(
      ceilSeconds(banned ? (blockedUntilMs(result, cost) as number) : binding.resetAtMs),
    );
  }
  const retryAfter = retryAfterSeconds(result, cost);
  if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
  return headers;
}

/**
 * The standard headers of draft-ietf-httpapi-ratelimit-headers-11, as lowercase names (opt-in), each a
 * structured-field List (RFC 9651):
 *
 * - `ratelimit-policy`: every window as a quota policy named after it, with its quota `q` in units and its
 *   window `w` in seconds — `"minute";q=60;w=60, "day";q=1000;w=86400`;
 * - `ratelimit`: the service limit of the policy closest to running out, the draft's "closest limit to reach"
 *   (the {@link bindingWindow}: fewest units left, then the later reset), with the units left `r` and the
 *   seconds until its window resets `t` (rounded up) — `"day";r=0;t=3600`. While banned `r` is 0 and `t` runs
 *   to {@link blockedUntilMs}. `Retry-After` never names a time before the end of `t` (the draft's rule for answers
 *   with both).
 *
 * The quota unit is the draft's default (`qu` is not sent): a request is charged its operation's cost in units.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#standard-rate-limit-headers
 */
export function standardRateLimitHeaders(result: ConsumeResult, cost = 1): Record<string, string> {
  const binding = bindingWindow(result.windows);
  if (binding === undefined) return {};
  const banned = !result.allowed && result.reason === 'banned';
  const resetAtMs = banned ? (blockedUntilMs(result, cost) as number) : binding.resetAtMs;
  return {
    'ratelimit-policy': serializeList(
      result.windows.map((window) => [window.name, new Map([['q', window.limit], ['w', ceilSeconds(window.windowMs)]])]),
    ),
    ratelimit: serializeList([
      [binding.name, new Map([['r', banned ? 0 : binding.remaining], ['t', Math.max(0, ceilSeconds(resetAtMs - result.nowMs))]])],
    ]),
  };
}

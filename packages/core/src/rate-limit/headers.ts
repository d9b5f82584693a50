/**
 * From a {@link ConsumeResult} to the rate-limit headers.
 */
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
 * When a rejected caller can next be admitted, Unix epoch ms: the latest of the ban's end (when banned) and
 * the reset of every exhausted window. `undefined` for an admitted request.
 */
export function blockedUntilMs(result: ConsumeResult): number | undefined {
  if (result.allowed) return undefined;
  let untilMs = result.reason === 'banned' ? Math.max(result.nowMs, result.bannedUntilMs) : result.nowMs;
  for (const window of result.windows) {
    if (window.used >= window.limit && window.resetAtMs > untilMs) untilMs = window.resetAtMs;
  }
  return untilMs;
}

/**
 * Seconds the caller must wait before a retry can succeed, for `Retry-After` (RFC 9110 §10.2.3:
 * delay-seconds, a whole number): until {@link blockedUntilMs}, rounded up and at least 1.
 * `undefined` for an admitted request.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#retry-after
 */
export function retryAfterSeconds(result: ConsumeResult): number | undefined {
  const untilMs = blockedUntilMs(result);
  return untilMs === undefined ? undefined : Math.max(1, ceilSeconds(untilMs - result.nowMs));
}

/**
 * The headers every API answer carries, as lowercase names:
 *
 * - `x-ratelimit-limit`: the binding window's limit (see {@link bindingWindow});
 * - `x-ratelimit-remaining`: requests left in it; 0 while banned;
 * - `x-ratelimit-reset`: when it resets, Unix time in whole seconds, rounded up; while banned, when the
 *   caller can next be admitted ({@link blockedUntilMs});
 * - `retry-after` (rejected answers only): see {@link retryAfterSeconds}.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#rate-limit-headers
 */
export function rateLimitHeaders(result: ConsumeResult): Record<string, string> {
  const headers: Record<string, string> = {};
  const binding = bindingWindow(result.windows);
  const banned = !result.allowed && result.reason === 'banned';
  if (binding !== undefined) {
    headers['x-ratelimit-limit'] = String(binding.limit);
    headers['x-ratelimit-remaining'] = String(banned ? 0 : binding.remaining);
    headers['x-ratelimit-reset'] = String(
      ceilSeconds(banned ? (blockedUntilMs(result) as number) : binding.resetAtMs),
    );
  }
  const retryAfter = retryAfterSeconds(result);
  if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
  return headers;
}

/**
 * The standard headers of draft-ietf-httpapi-ratelimit-headers-10, as lowercase names (opt-in):
 *
 * - `ratelimit-policy`: every window as a named policy, quota `q` and window `w` in seconds —
 *   `"minute";q=60;w=60, "day";q=1000;w=86400`;
 * - `ratelimit`: the binding window ({@link bindingWindow}) with remaining `r` and seconds until reset `t`
 *   (rounded up) — `"day";r=0;t=3600`. While banned `r` is 0 and `t` runs to {@link blockedUntilMs}.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#standard-rate-limit-headers
 */
export function standardRateLimitHeaders(result: ConsumeResult): Record<string, string> {
  const binding = bindingWindow(result.windows);
  if (binding === undefined) return {};
  const banned = !result.allowed && result.reason === 'banned';
  const resetAtMs = banned ? (blockedUntilMs(result) as number) : binding.resetAtMs;
  return {
    'ratelimit-policy': result.windows
      .map((window) => `"${window.name}";q=${window.limit};w=${ceilSeconds(window.windowMs)}`)
      .join(', '),
    ratelimit: `"${binding.name}";r=${banned ? 0 : binding.remaining};t=${Math.max(0, ceilSeconds(resetAtMs - result.nowMs))}`,
  };
}

import { windowStartMs, type ConsumeRequest, type ConsumeResult, type RateLimitState, type RateLimitWindow, type WindowCounter, type WindowUsage } from '@petstore/core';

/**
 * The common case of `decideConsume` for a store that owns its state objects (the memory store): when
 * the key is not banned, every window has room, and each window's counter already counts the current window,
 * charges the counters of `state` in place and answers the result — exactly what `decideConsume` would
 * answer, with `state` itself as the new state and the expiry unchanged. Answers `undefined` in every other
 * case, with `state` untouched; then call `decideConsume`.
 *
 * The caller must hold the only reference to `state`, and `state.counters` must be exactly the counters of
 * `request.windows` (true when the previous decision for the key was made with the same windows and did not
 * answer `banned`). Saves the new state, counters and decision a `decideConsume` allocates: the memory
 * store's common case (same windows as the key's last request, room everywhere) allocates only the answer.
 */
export function chargeInPlace(state: RateLimitState, request: ConsumeRequest): ConsumeResult | undefined {
  const nowMs = request.nowMs;
  if (state.bannedUntilMs > nowMs) return undefined;
  const windows = request.windows;
  const counters = state.counters;
  // First check every window, then charge: all or nothing.
  for (let index = 0; index < windows.length; index++) {
    const window = windows[index] as RateLimitWindow;
    const counter = counters[window.name];
    if (
      counter === undefined ||
      counter.startMs !== windowStartMs(nowMs, window.windowMs) ||
      counter.count + 1 > window.limit
    ) {
      return undefined;
    }
    // Two windows of one name share one counter: the general path's business.
    for (let earlier = 0; earlier < index; earlier++) {
      if ((windows[earlier] as RateLimitWindow).name === window.name) return undefined;
    }
  }
  const usage: WindowUsage[] = [];
  for (let index = 0; index < windows.length; index++) {
    const { name, limit, windowMs } = windows[index] as RateLimitWindow;
    const counter = counters[name] as WindowCounter;
    const count = counter.count + 1;
    counter.count = count;
    usage.push({ name, limit, windowMs, used: count, remaining: Math.max(0, limit - count), resetAtMs: counter.startMs + windowMs });
  }
  return { allowed: true, nowMs, windows: usage };
}

/**
 * The fixed-window decision as a pure function of stored state, the request and `now`.
 *
 * Stores hold a {@link RateLimitState} per key and apply {@link decideConsume} atomically (a memory store in
 * one synchronous step; a networked store in one server-side script that mirrors this function).
 */
import type { ConsumeRequest, ConsumeResult, WindowUsage } from './types.js';

/** One window's counter: the epoch-aligned start of the window it counts, and the requests counted. */
export interface WindowCounter {
  startMs: number;
  count: number;
}

/** Everything a store keeps for one key. Plain data: safe to serialise. */
export interface RateLimitState {
  /** Counters by window name. */
  counters: Record<string, WindowCounter>;
  /** Rejections counted toward a ban, in the current ban interval. */
  rejected: WindowCounter | undefined;
  /** End of the current ban, Unix epoch ms; 0 when not banned. */
  bannedUntilMs: number;
}

/** The result of {@link decideConsume}: the new state to store, the answer, and until when to keep the state. */
export interface ConsumeDecision {
  state: RateLimitState;
  result: ConsumeResult;
  /** After this instant (Unix epoch ms) the state is worthless and the store may drop it. */
  expiresAtMs: number;
}

/** Epoch-aligned start of the fixed window of length `windowMs` that contains `nowMs`. */
export function windowStartMs(nowMs: number, windowMs: number): number {
  return Math.floor(nowMs / windowMs) * windowMs;
}

/**
 * Decides one consume for one key.
 *
 * - While banned (`bannedUntilMs > now`): rejected with reason `banned`; state unchanged.
 * - Else, when every window has room for one more request: all windows are charged.
 * - Else: nothing is charged; the rejection is counted toward a ban, and reaching the threshold starts one.
 *
 * Counters whose window has ended read as 0. Windows absent from the request are dropped from the state.
 * The Redis store's script mirrors this function.
 */
export function decideConsume(previous: RateLimitState | undefined, request: ConsumeRequest): ConsumeDecision {
  const nowMs = request.nowMs;
  const counters: Record<string, WindowCounter> = {};
  const usage: WindowUsage[] = [];
  let hasRoom = true;
  let expiresAtMs = nowMs;
  for (const window of request.windows) {
    const startMs = windowStartMs(nowMs, window.windowMs);
    const stored = previous?.counters[window.name];
    const count = stored !== undefined && stored.startMs === startMs ? stored.count : 0;
    counters[window.name] = { startMs, count };
    if (count + 1 > window.limit) hasRoom = false;
    const resetAtMs = startMs + window.windowMs;
    if (resetAtMs > expiresAtMs) expiresAtMs = resetAtMs;
    usage.push({
      name: window.name,
      limit: window.limit,
      windowMs: window.windowMs,
      used: count,
      remaining: Math.max(0, window.limit - count),
      resetAtMs,
    });
  }

  const bannedUntilMs = previous?.bannedUntilMs ?? 0;
  if (bannedUntilMs > nowMs) {
    const state = previous as RateLimitState;
    return {
      state,
      result: { allowed: false, reason: 'banned', nowMs, windows: usage, bannedUntilMs },
      expiresAtMs: Math.max(expiresAtMs, bannedUntilMs, state.rejected ? endOfCounter(state.rejected, request) : 0),
    };
  }

  if (hasRoom) {
    for (const entry of usage) {
      const counter = counters[entry.name] as WindowCounter;
      counter.count += 1;
      entry.used = counter.count;
      entry.remaining = Math.max(0, entry.limit - counter.count);
    }
    const rejected = previous?.rejected;
    return {
      state: { counters, rejected, bannedUntilMs: 0 },
      result: { allowed: true, nowMs, windows: usage },
      expiresAtMs: Math.max(expiresAtMs, rejected ? endOfCounter(rejected, request) : 0),
    };
  }

  const ban = request.ban;
  if (ban === undefined) {
    return {
      state: { counters, rejected: undefined, bannedUntilMs: 0 },
      result: { allowed: false, reason: 'rate_limited', nowMs, windows: usage },
      expiresAtMs,
    };
  }
  const intervalStartMs = windowStartMs(nowMs, ban.intervalMs);
  const previousRejected = previous?.rejected;
  const rejectedCount =
    (previousRejected !== undefined && previousRejected.startMs === intervalStartMs ? previousRejected.count : 0) + 1;
  if (rejectedCount >= ban.rejectedThreshold) {
    const newBanEndMs = nowMs + ban.durationMs;
    return {
      state: { counters, rejected: undefined, bannedUntilMs: newBanEndMs },
      result: { allowed: false, reason: 'banned', nowMs, windows: usage, bannedUntilMs: newBanEndMs },
      expiresAtMs: Math.max(expiresAtMs, newBanEndMs),
    };
  }
  const rejected = { startMs: intervalStartMs, count: rejectedCount };
  return {
    state: { counters, rejected, bannedUntilMs: 0 },
    result: { allowed: false, reason: 'rate_limited', nowMs, windows: usage },
    expiresAtMs: Math.max(expiresAtMs, intervalStartMs + ban.intervalMs),
  };
}

function endOfCounter(counter: WindowCounter, request: ConsumeRequest): number {
  return request.ban ? counter.startMs + request.ban.intervalMs : 0;
}

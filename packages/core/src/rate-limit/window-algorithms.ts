/**
 * The `sliding` and `gcra` windows: how each reads, charges and reports one counter. The `fixed` window stays
 * inline in `decideConsume`; a counter moving between algorithms is converted here.
 *
 * Every algorithm measures what a window holds at an instant as outstanding unit-milliseconds (units ×
 * `windowMs`), so a decision is whole-number arithmetic that every store (JavaScript, Lua, PL/pgSQL) computes
 * exactly alike: a window admits `cost` units when `held + cost × windowMs <= limit × windowMs`.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#algorithms
 */
import type { RateLimitAlgorithm, RateLimitWindow, WindowUsage } from './types.js';
import type { WindowCounter } from './decide.js';

/** Epoch-aligned start of the window of length `windowMs` that holds `nowMs`. */
function alignedStartMs(nowMs: number, windowMs: number): number {
  return Math.floor(nowMs / windowMs) * windowMs;
}

/**
 * What a stored counter holds at `nowMs`, in unit-milliseconds, read by the algorithm that wrote it with the
 * limit and length it was written with.
 */
export function heldUnitMs(counter: WindowCounter, nowMs: number): number {
  const { windowMs } = counter;
  if (counter.algorithm === 'gcra') {
    const drained = counter.limit * Math.max(0, nowMs - counter.startMs);
    return counter.count > drained ? counter.count - drained : 0;
  }
  const startMs = alignedStartMs(nowMs, windowMs);
  if (counter.algorithm === 'sliding') {
    const elapsedMs = nowMs - startMs;
    if (counter.startMs === startMs) return (counter.previousCount ?? 0) * (windowMs - elapsedMs) + counter.count * windowMs;
    if (counter.startMs === startMs - windowMs) return counter.count * (windowMs - elapsedMs);
    return 0;
  }
  return counter.startMs === startMs ? counter.count * windowMs : 0;
}

/**
 * The counter `window` charges at `nowMs`, before the charge: the stored one carried to `nowMs` when it was
 * written by the same algorithm for the same `windowMs`; one holding the same units (rounded up) when another
 * algorithm wrote it, so changing a plan's algorithm never frees units already used; an empty one when there is
 * none or its `windowMs` differs (another window). Carries the request's `limit`.
 */
export function counterAt(stored: WindowCounter | undefined, window: Pick<RateLimitWindow, 'limit' | 'windowMs'>, algorithm: RateLimitAlgorithm, nowMs: number): WindowCounter {
  const { limit, windowMs } = window;
  const sameWindow = stored !== undefined && stored.windowMs === windowMs;
  const startMs = alignedStartMs(nowMs, windowMs);
  if (sameWindow && stored.algorithm === algorithm) {
    if (algorithm === 'gcra') {
      // A counter charged later than `nowMs` (another instance's clock ahead) is read at its own time.
      const atMs = Math.max(nowMs, stored.startMs);
      return { startMs: atMs, count: heldUnitMs(stored, atMs), limit, windowMs, algorithm };
    }
    // sliding (fixed counters are carried inline by decideConsume)
    if (stored.startMs === startMs) return { startMs, count: stored.count, limit, windowMs, algorithm, previousCount: stored.previousCount ?? 0 };
    const previousCount = stored.startMs === startMs - windowMs ? stored.count : 0;
    return { startMs, count: 0, limit, windowMs, algorithm, previousCount };
  }
  // Written by another algorithm (or none): the units it holds now, rounded up.
  const units = sameWindow ? Math.ceil(heldUnitMs(stored, nowMs) / windowMs) : 0;
  if (algorithm === 'gcra') return { startMs: nowMs, count: units * windowMs, limit, windowMs, algorithm };
  if (algorithm === 'sliding') return { startMs, count: units, limit, windowMs, algorithm, previousCount: 0 };
  return { startMs, count: units, limit, windowMs };
}

/** Unit-milliseconds a counter carried to `nowMs` by {@link counterAt} holds at `nowMs`. */
export function heldAt(counter: WindowCounter, nowMs: number): number {
  if (counter.algorithm === 'gcra') return counter.count;
  if (counter.algorithm === 'sliding') return (counter.previousCount ?? 0) * (counter.windowMs - (nowMs - counter.startMs)) + counter.count * counter.windowMs;
  return counter.count * counter.windowMs;
}

/** Charges `cost` units to a counter carried to now (in place). */
export function chargeCounter(counter: WindowCounter, cost: number): void {
  counter.count += counter.algorithm === 'gcra' ? cost * counter.windowMs : cost;
}

/**
 * When the counter's window has its whole quota back, Unix epoch ms: `fixed`, the end of the window; `sliding`,
 * the end of the window after the current one while the current one counts units (the end of the current one
 * otherwise); `gcra`, the theoretical arrival time (the counter's time when it holds nothing).
 */
export function resetAtMsOf(counter: WindowCounter): number {
  if (counter.algorithm === 'gcra') return counter.limit > 0 ? counter.startMs + Math.ceil(counter.count / counter.limit) : counter.startMs;
  if (counter.algorithm === 'sliding' && counter.count > 0) return counter.startMs + 2 * counter.windowMs;
  return counter.startMs + counter.windowMs;
}

/** The last instant anything of the counter still counts; it may be dropped after. */
export function counterEndMs(counter: WindowCounter): number {
  if (counter.algorithm === 'sliding') return counter.startMs + 2 * counter.windowMs;
  return resetAtMsOf(counter);
}

/**
 * The earliest instant, Unix epoch ms, at which a counter carried to `nowMs` that was not charged admits `cost`
 * units if nothing else is charged meanwhile; `undefined` for a fixed window (its reset) and for a cost above
 * the limit (never).
 */
export function retryAtMsOf(counter: WindowCounter, cost: number, nowMs: number): number | undefined {
  const { limit, windowMs } = counter;
  if (cost > limit || counter.algorithm === undefined) return undefined;
  if (counter.algorithm === 'gcra') {
    const excess = counter.count + cost * windowMs - limit * windowMs;
    return excess <= 0 ? counter.startMs : counter.startMs + Math.ceil(excess / limit);
  }
  // sliding: the previous window's weight falls by `previousCount` per ms until the window ends; then the current
  // window becomes the previous one and its count falls likewise.
  const previousCount = counter.previousCount ?? 0;
  const roomNow = (limit - counter.count - cost) * windowMs;
  if (roomNow >= 0) {
    const atMs = counter.startMs + (previousCount === 0 ? 0 : windowMs - Math.floor(roomNow / previousCount));
    if (atMs < counter.startMs + windowMs) return Math.max(nowMs, atMs);
  }
  const nextStartMs = counter.startMs + windowMs;
  if (counter.count === 0) return nextStartMs;
  return nextStartMs + Math.max(0, windowMs - Math.floor(((limit - cost) * windowMs) / counter.count));
}

/**
 * A window's usage as a consume's result reports it, for a counter carried to `nowMs` (charged or not): `used` the
 * units held rounded up, `remaining` what is left of the limit, `resetAtMs` when the window has its whole quota back
 * (Unix epoch ms); `retryAtMs` when `remaining < cost` and the algorithm can tell (see {@link retryAtMsOf}), the
 * earliest instant (Unix epoch ms) at which `cost` units fit. For store authors whose store answers counters rather
 * than usage (the PostgreSQL store computes usage in the client this way); `decideConsume` reports the same.
 * @param name the window's name, copied to the result
 * @param counter the counter carried to `nowMs`: `startMs`, `count`, `limit`, `windowMs`, `algorithm` and, for
 *   `sliding`, `previousCount`, as {@link WindowCounter} describes them
 * @param nowMs the decision's time, Unix epoch ms
 * @param cost the consume's cost when it was refused (its `retryAtMs` is then reported); `undefined` otherwise
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#algorithms
 */
export function windowUsage(name: string, counter: WindowCounter, nowMs: number, cost: number | undefined): WindowUsage {
  const { limit, windowMs } = counter;
  const used = Math.ceil(heldAt(counter, nowMs) / windowMs);
  const remaining = limit > used ? limit - used : 0;
  const usage: WindowUsage = { name, limit, windowMs, used, remaining, resetAtMs: resetAtMsOf(counter) };
  if (cost !== undefined && remaining < cost) {
    const retryAtMs = retryAtMsOf(counter, cost, nowMs);
    if (retryAtMs !== undefined) usage.retryAtMs = retryAtMs;
  }
  return usage;
}

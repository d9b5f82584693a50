/**
 * The rate-limit decision as a pure function of stored state, the request and `now`: the model every store
 * mirrors, for every algorithm (`fixed` inline here; `sliding` and `gcra` in window-algorithms.ts).
 *
 * Stores hold a {@link RateLimitState} per record (`account:<accountId>`, `anon:<address>`) and apply
 * {@link decideConsume} atomically (a memory store in one synchronous step; a networked store in one
 * server-side script or statement that mirrors this function). {@link peekState} is what `peek` reads.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#rate-limits
 */
import type { BanPolicy, ConsumeRequest, ConsumeResult, RateLimitSnapshot, WindowUsage } from './types.js';
import { chargeCounter, counterAt, counterEndMs, heldUnitMs, windowUsage } from './window-algorithms.js';

/**
 * One window's counter as the store keeps it, and the limit and length as of the last request that charged it
 * (so `peek` can tell what is left without knowing the caller's plan). What `startMs` and `count` hold depends on
 * the window's algorithm (see {@link RateLimitAlgorithm}):
 *
 * - `fixed` (no `algorithm` field): `startMs` is the start of the epoch-aligned window counted (a multiple of
 *   `windowMs`), `count` the units counted in it.
 * - `sliding`: the same, plus `previousCount`, the units counted in the window just before `startMs`.
 * - `gcra`: `startMs` is when the counter was last charged, `count` the work still outstanding then in
 *   unit-milliseconds (units × `windowMs`; it drains at `limit` per millisecond). The theoretical arrival time is
 *   `startMs + count / limit`. Whole numbers throughout, so every store decides exactly alike.
 */
export interface WindowCounter {
  /** `fixed`, `sliding`: start of the window counted; `gcra`: when last charged. Unix epoch ms. */
  startMs: number;
  /** `fixed`, `sliding`: units counted in that window; `gcra`: outstanding unit-milliseconds at `startMs`. */
  count: number;
  /** Units admitted per window, as last charged. */
  limit: number;
  /** Window length in ms, as last charged. */
  windowMs: number;
  /** The algorithm that wrote the counter; absent for `fixed`. */
  algorithm?: 'sliding' | 'gcra';
  /** `sliding` only: units counted in the window before `startMs` (`startMs - windowMs` to `startMs`). */
  previousCount?: number;
}

/** The ban state of one ban subject (an API key's `keyId` inside its account's record; `''` for an anonymous record). */
export interface BanState {
  /**
   * Rejections counted toward a ban in the current ban interval (epoch-aligned, `intervalMs` of the ban policy):
   * its start (Unix epoch ms) and the count; `undefined` when none.
   */
  rejected: { startMs: number; count: number } | undefined;
  /** End of the subject's ban, Unix epoch ms; 0 when not banned. */
  bannedUntilMs: number;
}

/** Everything a store keeps for one record. Plain data: safe to serialise. */
export interface RateLimitState {
  /** Counters by window name. */
  counters: Record<string, WindowCounter>;
  /**
   * Ban states by ban subject. After an admitted or rate-limited consume, only subjects that are banned or have
   * rejections counting in a live interval are present, so the entries are bounded by the live subjects.
   */
  bans: Record<string, BanState>;
}

/** The result of {@link decideConsume}: the new state to store, the answer, and until when to keep the state. */
export interface ConsumeDecision {
  state: RateLimitState;
  result: ConsumeResult;
  /**
   * After this instant (Unix epoch ms) the state is worthless and the store may drop it: the latest end of
   * every window it counts, every live ban and every live rejection interval. Deciding with the state from then
   * on gives the same answer and the same new state as deciding without it.
   */
  expiresAtMs: number;
}

/** Epoch-aligned start of the fixed window of length `windowMs` that contains `nowMs`. */
export function windowStartMs(nowMs: number, windowMs: number): number {
  return Math.floor(nowMs / windowMs) * windowMs;
}

/** `record[key]` when it is the record's own property (never one inherited from `Object.prototype`). */
function own<T>(record: Record<string, T>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/** Sets `record[key]` as an own property, also for the key `__proto__`. */
function setOwn<T>(record: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
  else record[key] = value;
}

/**
 * A ban state as it stands at `nowMs`: an ended ban reads as 0, a rejection count whose interval has ended (or
 * any, without a ban policy) as none; `undefined` when nothing is left.
 */
function liveBan(entry: BanState, nowMs: number, ban: BanPolicy | undefined): BanState | undefined {
  const bannedUntilMs = entry.bannedUntilMs > nowMs ? entry.bannedUntilMs : 0;
  const rejected =
    ban !== undefined && entry.rejected !== undefined && entry.rejected.startMs + ban.intervalMs > nowMs ? entry.rejected : undefined;
  if (bannedUntilMs === 0 && rejected === undefined) return undefined;
  return bannedUntilMs === entry.bannedUntilMs && rejected === entry.rejected ? entry : { rejected, bannedUntilMs };
}

/** The latest end of anything `state` holds: windows, bans, rejection intervals (under `ban`); at least `nowMs`. */
function expiryOf(state: RateLimitState, nowMs: number, ban: BanPolicy | undefined): number {
  let expiresAtMs = nowMs;
  for (const name of Object.keys(state.counters)) {
    const counter = state.counters[name] as WindowCounter;
    const endMs = counter.algorithm === undefined ? counter.startMs + counter.windowMs : counterEndMs(counter);
    if (endMs > expiresAtMs) expiresAtMs = endMs;
  }
  for (const subject of Object.keys(state.bans)) {
    const entry = state.bans[subject] as BanState;
    if (entry.bannedUntilMs > expiresAtMs) expiresAtMs = entry.bannedUntilMs;
    if (ban !== undefined && entry.rejected !== undefined && entry.rejected.startMs + ban.intervalMs > expiresAtMs) {
      expiresAtMs = entry.rejected.startMs + ban.intervalMs;
    }
  }
  return expiresAtMs;
}

/**
 * Decides one consume for one record, on behalf of one ban subject (`request.banSubject`).
 *
 * 1. Counters: a `fixed` window of the request counts the window of its length holding `nowMs` (epoch-aligned);
 *    a stored counter counts only when its start and length are those, else it reads 0. A `sliding` or `gcra`
 *    window carries its counter to `nowMs` (window-algorithms.ts); a counter another algorithm wrote for the same
 *    length counts the units it holds at `nowMs`, rounded up. The new counter records the request's `limit` and
 *    `windowMs`. Windows absent from the request are dropped from the state.
 * 2. While the subject is banned (`bans[banSubject].bannedUntilMs > nowMs`): rejected `banned`; the state is
 *    kept exactly as it was.
 * 3. Else, when every window has room for the cost (`fixed`: `count + cost <= limit`; in general the held
 *    unit-milliseconds plus `cost × windowMs` at most `limit × windowMs`): admitted, every window charged `cost`. The subject's rejections counted toward a ban are kept.
 * 4. Else: rejected `rate_limited`, nothing charged. With a ban policy the rejection counts once (whatever the
 *    cost) toward the subject's ban in the current ban interval; reaching `rejectedThreshold` bans the subject for
 *    `durationMs` from `nowMs` (answered `banned`) and clears its count. Without one, no rejections are counted.
 * 5. After an admitted or rate-limited decision, every subject's ended ban reads 0 and its ended (or, without a
 *    ban policy, any) rejection count is dropped; a subject with neither is removed.
 * 6. `expiresAtMs`: the latest end of every window, live ban and live rejection interval the new state holds.
 *
 * Usage reports the windows after the charge (admitted) or as they stand (rejected), in units. The previous
 * state is never modified. Mirrored by the Redis script and the PostgreSQL function.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#rate-limits
 */
export function decideConsume(previous: RateLimitState | undefined, request: ConsumeRequest): ConsumeDecision {
  const { nowMs, cost, ban, banSubject } = request;
  const counters: Record<string, WindowCounter> = {};
  const usage: WindowUsage[] = [];
  let hasRoom = true;
  // The sliding and gcra counters, by window index: their usage is reported once the decision is known.
  let other: WindowCounter[] | undefined;
  for (const window of request.windows) {
    const { name, limit, windowMs, algorithm } = window;
    const stored = previous === undefined ? undefined : own(previous.counters, name);
    if ((algorithm === undefined || algorithm === 'fixed') && stored?.algorithm === undefined) {
      const startMs = windowStartMs(nowMs, windowMs);
      const count = stored !== undefined && stored.startMs === startMs && stored.windowMs === windowMs ? stored.count : 0;
      setOwn(counters, name, { startMs, count, limit, windowMs });
      if (count + cost > limit) hasRoom = false;
      usage.push({ name, limit, windowMs, used: count, remaining: limit > count ? limit - count : 0, resetAtMs: startMs + windowMs });
    } else {
      const counter = counterAt(stored, window, algorithm ?? 'fixed', nowMs);
      setOwn(counters, name, counter);
      const heldMs = counter.algorithm === 'gcra' ? counter.count : heldUnitMs(counter, nowMs);
      // A cost above the limit never fits (and is not multiplied: it may be any safe integer).
      if (cost > limit || heldMs + cost * windowMs > limit * windowMs) hasRoom = false;
      (other ??= [])[usage.length] = counter;
      usage.push(undefined as unknown as WindowUsage);
    }
  }

  const previousBans = previous?.bans;
  const subject = previousBans === undefined ? undefined : own(previousBans, banSubject);
  const banned = subject !== undefined && subject.bannedUntilMs > nowMs;
  if (other !== undefined && (banned || !hasRoom)) reportOthers(usage, other, request, cost);
  if (banned) {
    const state = previous as RateLimitState;
    return {
      state,
      result: { allowed: false, reason: 'banned', nowMs, windows: usage, bannedUntilMs: subject.bannedUntilMs },
      expiresAtMs: expiryOf(state, nowMs, ban),
    };
  }

  // The other subjects' bans, as they stand now.
  const bans: Record<string, BanState> = {};
  if (previousBans !== undefined) {
    for (const name of Object.keys(previousBans)) {
      if (name === banSubject) continue;
      const entry = liveBan(previousBans[name] as BanState, nowMs, ban);
      if (entry !== undefined) setOwn(bans, name, entry);
    }
  }

  let result: ConsumeResult;
  if (hasRoom) {
    for (let index = 0; index < usage.length; index += 1) {
      const counter = other?.[index];
      if (counter !== undefined) {
        chargeCounter(counter, cost);
        continue;
      }
      const entry = usage[index] as WindowUsage;
      const fixed = counters[entry.name] as WindowCounter;
      fixed.count += cost;
      entry.used = fixed.count;
      entry.remaining = entry.limit > fixed.count ? entry.limit - fixed.count : 0;
    }
    if (other !== undefined) reportOthers(usage, other, request, undefined);
    const kept = subject === undefined ? undefined : liveBan(subject, nowMs, ban);
    if (kept !== undefined) setOwn(bans, banSubject, kept);
    result = { allowed: true, nowMs, windows: usage };
  } else if (ban === undefined) {
    result = { allowed: false, reason: 'rate_limited', nowMs, windows: usage };
  } else {
    const intervalStartMs = windowStartMs(nowMs, ban.intervalMs);
    const rejected = subject?.rejected;
    const count = (rejected !== undefined && rejected.startMs === intervalStartMs ? rejected.count : 0) + 1;
    if (count >= ban.rejectedThreshold) {
      const bannedUntilMs = nowMs + ban.durationMs;
      setOwn(bans, banSubject, { rejected: undefined, bannedUntilMs });
      result = { allowed: false, reason: 'banned', nowMs, windows: usage, bannedUntilMs };
    } else {
      setOwn(bans, banSubject, { rejected: { startMs: intervalStartMs, count }, bannedUntilMs: 0 });
      result = { allowed: false, reason: 'rate_limited', nowMs, windows: usage };
    }
  }
  const state: RateLimitState = { counters, bans };
  return { state, result, expiresAtMs: expiryOf(state, nowMs, ban) };
}

/**
 * Fills in the usage of the sliding and gcra windows (`other`, by window index) once the decision is known; a
 * rejection (`retryCost`) says when each has room for the cost. A function of its own, not a closure: the fixed
 * path allocates nothing for it.
 */
function reportOthers(usage: WindowUsage[], other: readonly (WindowCounter | undefined)[], request: ConsumeRequest, retryCost: number | undefined): void {
  for (let index = 0; index < usage.length; index += 1) {
    const counter = other[index];
    if (counter !== undefined) usage[index] = windowUsage((request.windows[index] as { name: string }).name, counter, request.nowMs, retryCost);
  }
}

/**
 * What `peek` answers for a record at `nowMs`, charging nothing (see {@link RateLimitSnapshot}): each window the
 * record counts, as of `nowMs` and read by the algorithm that wrote it (`fixed`: `used` 0 when its period has
 * ended, `resetAtMs` the end of the period holding `nowMs`), with the limit and length it was last charged with,
 * shortest window first (then by name); and the live bans, by subject. A record that holds nothing live at `nowMs`
 * (no fixed counter of the current period, no sliding counter of it or holding units, no gcra counter holding
 * units, no live ban) reads as one that does not exist: no windows, no bans. Rejections counted toward a ban are
 * not shown.
 */
export function peekState(state: RateLimitState | undefined, nowMs: number): RateLimitSnapshot {
  if (state === undefined) return { nowMs, windows: [], bans: [] };
  let live = false;
  const windows: WindowUsage[] = [];
  for (const name of Object.keys(state.counters)) {
    const stored = state.counters[name] as WindowCounter;
    const { startMs, count, limit, windowMs, algorithm } = stored;
    const currentStartMs = windowStartMs(nowMs, windowMs);
    if (algorithm === undefined) {
      const used = startMs === currentStartMs ? count : 0;
      if (startMs === currentStartMs) live = true;
      windows.push({ name, limit, windowMs, used, remaining: limit > used ? limit - used : 0, resetAtMs: currentStartMs + windowMs });
    } else {
      // Read by the algorithm that wrote it, with the limit it was last charged with.
      const counter = counterAt(stored, stored, algorithm, nowMs);
      if (heldUnitMs(stored, nowMs) > 0 || (algorithm === 'sliding' && startMs === currentStartMs)) live = true;
      windows.push(windowUsage(name, counter, nowMs, undefined));
    }
  }
  const bans: RateLimitSnapshot['bans'] = [];
  for (const subject of Object.keys(state.bans)) {
    const { bannedUntilMs } = state.bans[subject] as BanState;
    if (bannedUntilMs > nowMs) bans.push({ subject, bannedUntilMs });
  }
  if (!live && bans.length === 0) return { nowMs, windows: [], bans: [] };
  windows.sort((a, b) => a.windowMs - b.windowMs || compareStrings(a.name, b.name));
  bans.sort((a, b) => compareStrings(a.subject, b.subject));
  return { nowMs, windows, bans };
}

/** Orders strings by UTF-16 code units (the same in every JavaScript engine and locale). */
function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

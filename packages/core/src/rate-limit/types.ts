/**
 * The rate-limit vocabulary shared by the engine and every {@link RateLimitStore}.
 */
import type { StoreBackend } from '../diagnostics.js';

/**
 * One fixed window of a quota: at most `limit` units per `windowMs` milliseconds. A request is charged its
 * cost in units (1 unless the operation costs more: `rateLimit.cost`).
 *
 * Windows align to the Unix epoch: a window of `windowMs` starts at every multiple of `windowMs` since
 * 1970-01-01T00:00:00Z. A minute window starts at second :00 of every minute; a day window at 00:00 UTC.
 * `name` identifies the counter: usage is kept per name, so changing the `limit` of a name (a plan change)
 * keeps the usage already counted.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#windows
 */
export interface RateLimitWindow {
  /** The counter's name; unique within one request (`minute`, `day`). */
  name: string;
  /** Units admitted per window; a whole number ≥ 0. */
  limit: number;
  /** Window length in milliseconds; a whole number ≥ 1. */
  windowMs: number;
}

/**
 * Temporary ban: when `rejectedThreshold` requests of one ban subject (an API key; an anonymous caller) are
 * rejected for exceeding the limit within one fixed interval of `intervalMs` (epoch-aligned like windows),
 * the subject is banned for `durationMs`, counted from the request that reached the threshold. A rejected
 * request counts once, whatever its cost. Requests answered while banned are not charged to any window and do
 * not extend the ban.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#bans
 */
export interface BanPolicy {
  rejectedThreshold: number;
  intervalMs: number;
  durationMs: number;
}

/**
 * One call of {@link RateLimitStore.consume}: charge `cost` units to every window of one record, all or none,
 * on behalf of one ban subject.
 */
export interface ConsumeRequest {
  /** The windows to check and charge; names are unique within one request. */
  windows: readonly RateLimitWindow[];
  /** Units charged to every window when admitted; a whole number ≥ 1. */
  cost: number;
  /** The caller's current time, Unix epoch ms. A store may use its own clock instead and says so in the result. */
  nowMs: number;
  /** Ban policy; `undefined` turns bans off (a ban already running still holds). */
  ban: BanPolicy | undefined;
  /**
   * Who inside the record earns (and serves) a ban: an API key's `keyId` inside its account's record
   * (`account:<accountId>`); `''` for an anonymous record (`anon:<address>`), which is its own subject.
   */
  banSubject: string;
}

/** The state of one window after a consume (or as {@link RateLimitStore.peek} reads it). Units throughout. */
export interface WindowUsage {
  name: string;
  /** Units admitted per window. */
  limit: number;
  windowMs: number;
  /** Units counted in the current window (after this request, when admitted). */
  used: number;
  /** `max(0, limit - used)`. */
  remaining: number;
  /** When the current window ends and its count resets, Unix epoch ms. */
  resetAtMs: number;
}

/**
 * The outcome of a consume.
 *
 * - `allowed: true`: every window had room for the cost and each was charged it.
 * - `allowed: false, reason: 'rate_limited'`: at least one window had less room than the cost (it may have some
 *   left); nothing was charged.
 * - `allowed: false, reason: 'banned'`: the ban subject is banned until `bannedUntilMs`; nothing was charged.
 *
 * `nowMs` is the time the store decided at (its own clock where it has one), Unix epoch ms; `Retry-After`
 * and reset values are computed against it.
 */
export type ConsumeResult =
  | { allowed: true; nowMs: number; windows: WindowUsage[] }
  | { allowed: false; reason: 'rate_limited'; nowMs: number; windows: WindowUsage[] }
  | { allowed: false; reason: 'banned'; nowMs: number; windows: WindowUsage[]; bannedUntilMs: number };

/**
 * What {@link RateLimitStore.peek} reads of one record, charging nothing.
 *
 * - `nowMs`: the time it was read at, Unix epoch ms (the store's own clock where it decides by one);
 * - `windows`: each window the record counts, as of `nowMs` (`used` 0 for a window whose period has ended), with
 *   the limit and length it was last charged with, shortest window first (then by name);
 * - `bans`: the live bans of the record's ban subjects (`''` for an anonymous record), by subject.
 *
 * A record that does not exist, or holds nothing live at `nowMs` (no current window, no live ban), reads as
 * `{ nowMs, windows: [], bans: [] }`.
 */
export interface RateLimitSnapshot {
  nowMs: number;
  windows: WindowUsage[];
  bans: Array<{ subject: string; bannedUntilMs: number }>;
}

/**
 * A rate-limit store: one atomic operation per request, never a get/set pair, plus the operator's `peek` and
 * `reset`.
 *
 * `consume` checks every window of `request` for `key` and the ban subject's ban, and either charges the
 * request's cost to all windows or to none; it also counts rejections toward the subject's ban and starts the
 * ban. It applies `decideConsume` (or a mirror of it) to the record. Implementations must be atomic per key
 * under concurrent calls, also across processes sharing the store, and must let every key expire (no key lives
 * forever).
 *
 * Every method answers with a promise, also for a store in process memory. A rejected promise (or an error
 * thrown) is a store failure, handled by the engine's failure policy (`onStoreFailure`: 503 by default).
 *
 * Keys are opaque strings chosen by the engine (`account:<accountId>` or `anon:<address>`); a store may add a
 * prefix of its own.
 */
export interface RateLimitStore {
  /**
   * Optional: the storage system it runs on, in OpenTelemetry `db.system.name` terms (`redis`, `postgresql`;
   * `memory` in process memory), reported on the `petstore:store` diagnostics channel; `custom` when absent.
   */
  readonly backend?: StoreBackend;
  consume(key: string, request: ConsumeRequest): Promise<ConsumeResult>;
  /**
   * The record of `key` as it stands at `nowMs` (Unix epoch ms; a store deciding by its own clock reads at that
   * clock and says so in the snapshot's `nowMs`), charging nothing and changing nothing: see
   * {@link RateLimitSnapshot}; it is `peekState` of the record.
   */
  peek(key: string, nowMs: number): Promise<RateLimitSnapshot>;
  /** Removes the record of `key`: its windows and every ban in it. Resolves whether or not it existed. */
  reset(key: string): Promise<void>;
  /**
   * Optional: a new, empty store of the same kind and bounds (same `maxKeys`, same clock), sharing nothing
   * with this one. When `rateLimit.anonymousStore` is not given, the engine takes one from `store` for callers
   * without a valid key, so a flood of client addresses cannot evict the counters of API keys from a bounded
   * store. A store without a bound on keys that many processes share (Redis) need not implement it: the
   * engine then uses `store` for both, under distinct keys.
   */
  newStore?(): RateLimitStore;
}

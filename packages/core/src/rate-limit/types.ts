/**
 * The rate-limit vocabulary shared by the engine and every {@link RateLimitStore}.
 */
import type { StoreBackend } from '../diagnostics.js';

/**
 * How a window counts (the rate-limit algorithm), chosen per plan:
 *
 * - `fixed` (the default): windows aligned to the Unix epoch, each counting from 0. Cheapest; a caller can use
 *   a whole window's quota at the end of one window and again at the start of the next (2 × `limit` within
 *   moments).
 * - `sliding`: the sliding-window approximation: the current epoch-aligned window's units plus the previous
 *   window's units weighted by how much of it still overlaps the last `windowMs`. Any interval of length `t <=
 *   windowMs` admits at most `limit + floor(limit × t / windowMs)` units.
 * - `gcra`: the generic cell rate algorithm (a leaky bucket): `limit` units per `windowMs` at a steady rate, with
 *   a burst of up to `limit` at once. Any interval of length `t` admits at most `limit + ceil(limit × t / windowMs)`
 *   units.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#algorithms
 */
export type RateLimitAlgorithm = 'fixed' | 'sliding' | 'gcra';

/** The algorithms, in the order the docs list them. */
export const RATE_LIMIT_ALGORITHMS: readonly RateLimitAlgorithm[] = Object.freeze(['fixed', 'sliding', 'gcra'] as const);

/**
 * One window of a quota: at most `limit` units per `windowMs` milliseconds, counted by `algorithm`. A request is
 * charged its cost in units (1 unless the operation costs more: `rateLimit.cost`).
 *
 * Fixed windows align to the Unix epoch: a window of `windowMs` starts at every multiple of `windowMs` since
 * 1970-01-01T00:00:00Z. A minute window starts at second :00 of every minute; a day window at 00:00 UTC. The
 * sliding window weighs the epoch-aligned windows; GCRA has no window boundaries.
 * `name` identifies the counter: usage is kept per name, so changing the `limit` (or the `algorithm`) of a name
 * (a plan change) keeps the usage already counted.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#windows
 */
export interface RateLimitWindow {
  /** The counter's name; unique within one request (`minute`, `day`). */
  name: string;
  /** Units admitted per window; a whole number ≥ 0. For `sliding` and `gcra`, `limit × windowMs` is at most 2^50. */
  limit: number;
  /** Window length in milliseconds; a whole number ≥ 1. */
  windowMs: number;
  /** How the window counts; absent means `fixed`. */
  algorithm?: RateLimitAlgorithm;
}

/** The largest `limit × windowMs` of a `sliding` or `gcra` window: keeps their whole-number arithmetic exact. */
export const MAX_LIMIT_TIMES_WINDOW_MS = 2 ** 50;

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
  /**
   * When the window has its whole quota back, Unix epoch ms: `fixed`, the end of the current window; `sliding`,
   * the end of the next window while the current one counts units, else the end of the current one; `gcra`, the
   * theoretical arrival time.
   */
  resetAtMs: number;
  /**
   * Only in a rejected result, on a `sliding` or `gcra` window with less than the cost left: when it next admits
   * the same cost if nothing else is charged meanwhile, Unix epoch ms. A fixed window admits again at `resetAtMs`.
   */
  retryAtMs?: number;
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
  /**
   * Optional: the algorithms its `consume` implements (see {@link RateLimitAlgorithm}); absent means `fixed`
   * only. The engine refuses, at creation, a plan whose algorithm its store does not list.
   */
  readonly algorithms?: readonly RateLimitAlgorithm[];
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

/**
 * The rate-limit vocabulary shared by the engine and every {@link RateLimitStore}.
 */

/**
 * One fixed window of a quota: at most `limit` requests per `windowMs` milliseconds.
 *
 * Windows align to the Unix epoch: a window of `windowMs` starts at every multiple of `windowMs` since
 * 1970-01-01T00:00:00Z. A minute window starts at second :00 of every minute; a day window at 00:00 UTC.
 * `name` identifies the counter: usage is kept per name, so changing the `limit` of a name (a plan change)
 * keeps the usage already counted.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#windows
 */
export interface RateLimitWindow {
  name: string;
  /** Requests admitted per window; a whole number ≥ 0. */
  limit: number;
  /** Window length in milliseconds; a whole number ≥ 1. */
  windowMs: number;
}

/**
 * Temporary ban: when `rejectedThreshold` requests of one key are rejected for exceeding
 * the limit within one fixed interval of `intervalMs` (epoch-aligned like windows), the key is banned for
 * `durationMs`, counted from the request that reached the threshold. Requests answered while banned are not
 * charged to any window and do not extend the ban.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#bans
 */
export interface BanPolicy {
  rejectedThreshold: number;
  intervalMs: number;
  durationMs: number;
}

/** One call of {@link RateLimitStore.consume}: charge one request to every window, all or none. */
export interface ConsumeRequest {
  windows: readonly RateLimitWindow[];
  /** The caller's current time, Unix epoch ms. A store may use its own clock instead and says so in the result. */
  nowMs: number;
  /** Ban policy; `undefined` turns bans off. */
  ban: BanPolicy | undefined;
}

/** The state of one window after a consume. */
export interface WindowUsage {
  name: string;
  limit: number;
  windowMs: number;
  /** Requests counted in the current window (after this request, when admitted). */
  used: number;
  /** `max(0, limit - used)`. */
  remaining: number;
  /** When the current window ends and its count resets, Unix epoch ms. */
  resetAtMs: number;
}

/**
 * The outcome of a consume.
 *
 * - `allowed: true`: every window had room and each was charged one request.
 * - `allowed: false, reason: 'rate_limited'`: at least one window was full; nothing was charged.
 * - `allowed: false, reason: 'banned'`: the key is banned until `bannedUntilMs`; nothing was charged.
 *
 * `nowMs` is the time the store decided at (its own clock where it has one), Unix epoch ms; `Retry-After`
 * and reset values are computed against it.
 */
export type ConsumeResult =
  | { allowed: true; nowMs: number; windows: WindowUsage[] }
  | { allowed: false; reason: 'rate_limited'; nowMs: number; windows: WindowUsage[] }
  | { allowed: false; reason: 'banned'; nowMs: number; windows: WindowUsage[]; bannedUntilMs: number };

/**
 * A rate-limit store: one atomic operation, never a get/set pair.
 *
 * `consume` checks every window of `request` for `key` and the key's ban, and either charges one request to
 * all windows or to none; it also counts rejections toward a ban and starts the ban. Implementations must be
 * atomic per key under concurrent calls, also across processes sharing the store, and must let every key
 * expire (no key lives forever).
 *
 * `consume` answers with a promise, also for a store in process memory. A rejected promise (or an error
 * thrown) is a store failure, handled by the engine's failure policy (`onStoreFailure`: 503 by default).
 *
 * Keys are opaque strings chosen by the engine (`key:<keyId>` or `anon:<address>`).
 */
export interface RateLimitStore {
  consume(key: string, request: ConsumeRequest): Promise<ConsumeResult>;
  /**
   * Optional: a new, empty store of the same kind and bounds (same `maxKeys`, same clock), sharing nothing
   * with this one. When `rateLimit.anonymousStore` is not given, the engine takes one from `store` for callers
   * without a valid key, so a flood of client addresses cannot evict the counters of API keys from a bounded
   * store. A store without a bound on keys that many processes share (Redis) need not implement it: the
   * engine then uses `store` for both, under distinct keys.
   */
  newStore?(): RateLimitStore;
}

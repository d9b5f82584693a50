import { decideConsume, type Clock, type RateLimitState, type RateLimitStore } from '@petstore/core';
import { LRUCache } from 'lru-cache';

/** Options of {@link memoryRateLimitStore}. */
export interface MemoryRateLimitStoreOptions {
  /**
   * Most keys tracked at once; past it the least recently used key is dropped (its counters restart).
   * Default 100,000 (about 36 MB of heap: some 360 bytes per key with two windows, measured by
   * `benchmarks/src/memory-bench.ts`). Size it above the number of keys active within your longest window,
   * and give anonymous callers their own store (`rateLimit.anonymousStore`) so a flood of addresses cannot
   * evict the counters of real keys.
   */
  maxKeys?: number;
  /**
   * Clock for entry expiry; pass the same clock as the engine's when tests move time. Default: the
   * process's monotonic clock.
   */
  clock?: Clock;
}

/** A {@link RateLimitStore} in this process's memory, with its current number of tracked keys. */
export interface MemoryRateLimitStore extends RateLimitStore {
  /** Keys currently held (expired entries count until they are read, evicted or purged). */
  readonly size: number;
  /**
   * Drops every expired entry now and answers how many were dropped. Optional: expired entries are
   * otherwise dropped when read or evicted, and never exceed `maxKeys`.
   */
  purgeExpired(): number;
  /** Remaining lifetime of a key's entry in ms; `undefined` when the store holds nothing for it. */
  remainingTtlMs(key: string): number | undefined;
}

/** Default of {@link MemoryRateLimitStoreOptions.maxKeys}. */
export const DEFAULT_MAX_KEYS = 100_000;

/**
 * A rate-limit store in process memory, on an LRU cache bounded by `maxKeys`.
 *
 * Each `consume` reads, decides (`decideConsume` from the core) and writes back in one synchronous step, so
 * it is atomic per key within the process. Every entry expires when its last window (or ban) ends, via the
 * cache's TTL: no timer per key, and no `setTimeout` limit on day- or month-long windows. State is per
 * instance; several processes do not share it (use a networked store for that).
 *
 * @throws TypeError when `maxKeys` is not a whole number ≥ 1.
 */
export function memoryRateLimitStore(options: MemoryRateLimitStoreOptions = {}): MemoryRateLimitStore {
  const maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
  if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
    throw new TypeError(`maxKeys must be a whole number >= 1, got ${String(maxKeys)}`);
  }
  const clock: Clock = options.clock ?? performance;
  // With `ttlResolution: 0` (no timer caching the time) the cache reads its `perf` clock on every expiry
  // check: on the get and again on the set of one consume, a native call each and together a sixth of a
  // consume's time. Instead each operation reads `clock` once (`tick`), and the cache sees that instant.
  let instantMs = 0;
  const tick = (): void => {
    instantMs = clock.now();
  };
  const cache = new LRUCache<string, RateLimitState>({
    max: maxKeys,
    ttlResolution: 0,
    perf: { now: () => instantMs },
  });
  // Option objects reused by every consume instead of a new one per call; the cache writes a `status` into
  // them, reset before each call so that diagnostics subscribers still get a fresh status per operation.
  const getOptions: LRUCache.GetOptions<string, RateLimitState, unknown> = { status: undefined };
  const setOptions: LRUCache.SetOptions<string, RateLimitState, unknown> = { ttl: 0, status: undefined };
  return {
    get size() {
      return cache.size;
    },
    remainingTtlMs(key) {
      tick();
      return cache.has(key) ? cache.getRemainingTTL(key) : undefined;
    },
    purgeExpired() {
      tick();
      const before = cache.size;
      cache.purgeStale();
      return before - cache.size;
    },
    async consume(key, request) {
      tick();
      getOptions.status = undefined;
      const decision = decideConsume(cache.get(key, getOptions), request);
      const ttl = decision.expiresAtMs - request.nowMs;
      if (ttl > 0) {
        setOptions.ttl = ttl;
        setOptions.status = undefined;
        cache.set(key, decision.state, setOptions);
      } else {
        cache.delete(key);
      }
      return decision.result;
    },
  };
}

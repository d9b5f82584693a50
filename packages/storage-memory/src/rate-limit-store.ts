import {
  decideConsume,
  peekState,
  RATE_LIMIT_ALGORITHMS,
  systemClock,
  type Clock,
  type RateLimitState,
  type RateLimitStore,
} from '@petstore/core';
import { LRUCache } from 'lru-cache';

/** Options of {@link memoryRateLimitStore}. */
export interface MemoryRateLimitStoreOptions {
  /**
   * Most keys tracked at once; past it the least recently used key is dropped (its counters restart).
   * Default 100,000 (the heap per tracked key with two windows is measured in BENCHMARKS.md, section "Memory
   * store"). Size it above the number of keys active within your longest window.
   * Passed as `rateLimit.store`, the engine takes a second store like it (`newStore()`, the same `maxKeys`)
   * for callers without a valid key, so a flood of client addresses cannot evict the counters of API keys.
   */
  maxKeys?: number;
  /**
   * The engine's clock (Unix epoch ms), read by `remainingTtlMs` and `purgeExpired` only: entries expire by
   * the time of the requests themselves. Pass the engine's clock when tests move time. Default: the system
   * clock.
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
  /**
   * A copy of the record held for `key` (a `RateLimitState`, as `decideConsume` left it), or `undefined` when the
   * store holds none. An entry past its expiry is returned until it is dropped (when read by a later consume,
   * evicted or purged); its contents are all ended by then. For tests that compare the store with the model
   * (`runRateLimitModelComparison` from `@petstore/core/testing`) and for diagnostics; `peek` is the operator's read.
   */
  readState(key: string): RateLimitState | undefined;
  /** A new, empty store with the same `maxKeys` and clock, sharing nothing with this one. */
  newStore(): MemoryRateLimitStore;
}

/** Default of {@link MemoryRateLimitStoreOptions.maxKeys}. */
export const DEFAULT_MAX_KEYS = 100_000;

/**
 * A rate-limit store in process memory, on an LRU cache bounded by `maxKeys`.
 *
 * Each `consume` reads, decides (`decideConsume` from the core) and writes back in one synchronous step before
 * it answers its promise, so it is atomic per key within the process. `peek` reads a record at the time it is
 * given (`peekState` from the core) without touching it; `reset` deletes it. Every entry expires when its last window (or ban) ends: no timer per key, and no
 * `setTimeout` limit on day- or month-long windows; an expired entry is dropped when read, evicted or purged. State is per
 * instance; several processes do not share it (use a networked store for that). It implements every algorithm
 * (`fixed`, `sliding`, `gcra`).
 *
 * @throws TypeError when `maxKeys` is not a whole number ≥ 1.
 */
export function memoryRateLimitStore(options: MemoryRateLimitStoreOptions = {}): MemoryRateLimitStore {
  const maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
  if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
    throw new TypeError(`maxKeys must be a whole number >= 1, got ${String(maxKeys)}`);
  }
  const clock: Clock = options.clock ?? systemClock;
  // The cache only bounds the number of keys (least recently used first); expiry is kept in each entry and
  // judged by the request's own time, so a consume reads no clock and, for a key already held, writes
  // nothing to the cache. An expired entry decides exactly as no entry would (its windows, rejections and
  // ban have all ended); it is only memory, dropped when read, evicted or purged.
  // maxSize, with a size of 1 per entry, bounds the entry count as `max` would, but allocates as entries come:
  // `max` makes lru-cache allocate its arrays for every entry when the cache is created (BENCHMARKS.md,
  // "Memory store").
  const cache = new LRUCache<string, Entry>({ maxSize: maxKeys, sizeCalculation: () => 1 });
  const isLive = (entry: Entry, nowMs: number) => entry.expiresAtMs > nowMs;
  return {
    backend: 'memory',
    algorithms: RATE_LIMIT_ALGORITHMS,
    get size() {
      return cache.size;
    },
    newStore: () => memoryRateLimitStore({ maxKeys, clock }),
    remainingTtlMs(key) {
      const entry = cache.peek(key);
      if (entry === undefined) return undefined;
      const nowMs = clock.now();
      if (isLive(entry, nowMs)) return entry.expiresAtMs - nowMs;
      cache.delete(key);
      return undefined;
    },
    readState(key) {
      const entry = cache.peek(key);
      return entry === undefined ? undefined : structuredClone(entry.state);
    },
    purgeExpired() {
      const nowMs = clock.now();
      const expired: string[] = [];
      for (const [key, entry] of cache.entries()) if (!isLive(entry, nowMs)) expired.push(key);
      for (const key of expired) cache.delete(key);
      return expired.length;
    },
    async consume(key, request) {
      // A new state per decision, from the core's one decision function: charging the held counters in place
      // would need a second copy of the decision, for little.
      const nowMs = request.nowMs;
      const held = cache.get(key);
      const entry = held !== undefined && isLive(held, nowMs) ? held : undefined;
      const decision = decideConsume(entry?.state, request);
      if (decision.expiresAtMs <= nowMs) {
        cache.delete(key);
      } else if (entry !== undefined) {
        entry.state = decision.state;
        entry.expiresAtMs = decision.expiresAtMs;
      } else {
        cache.set(key, { state: decision.state, expiresAtMs: decision.expiresAtMs });
      }
      return decision.result;
    },
    async peek(key, nowMs) {
      // cache.peek: an operator's read does not make a key recently used.
      const entry = cache.peek(key);
      return peekState(entry !== undefined && isLive(entry, nowMs) ? entry.state : undefined, nowMs);
    },
    async reset(key) {
      cache.delete(key);
    },
  };
}

/** What the store keeps per key. */
interface Entry {
  state: RateLimitState;
  /** When the state stops mattering, Unix epoch ms (the engine's clock). */
  expiresAtMs: number;
}

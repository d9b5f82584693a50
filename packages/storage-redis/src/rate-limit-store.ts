import { windowStartMs, type BanPolicy, type ConsumeRequest, type ConsumeResult, type RateLimitStore, type RateLimitWindow, type WindowUsage } from '@petstore/core';
import type { Cluster, Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import { createConsumeBatches, type ConsumeDecision, type PolicyArguments } from './consume-batches.js';
import { assertCallTimeoutMs, assertKeyPrefix, createDeadline, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_KEY_PREFIX, storeFailure } from './redis-call.js';

export { CONSUME_COMMAND } from './consume-batches.js';

/** Options of {@link redisRateLimitStore}. */
export interface RedisRateLimitStoreOptions {
  /**
   * A connected (or connecting) ioredis 5 client: a `Redis` (one server, or a Sentinel-managed primary) or a
   * `Cluster` (Redis Cluster; each consume touches one key, so it runs on the master of that key's slot, and
   * ioredis follows `MOVED`/`ASK` redirections). The store defines one script command on it
   * (`petstoreRateLimitConsume`) and otherwise leaves it alone; it never closes it. A client-level ioredis
   * `keyPrefix` is applied in front of this store's own `keyPrefix`.
   */
  client: Redis | Cluster;
  /** Prefix of every key this store writes. Default `petstore:`. */
  keyPrefix?: string;
  /**
   * Deadline of one consume in ms: past it the promise rejects with `service_unavailable` (cause: a
   * {@link RedisTimeoutError}; the engine's `onStoreFailure` policy decides what the caller gets). Default 1000
   * ({@link DEFAULT_CALL_TIMEOUT_MS}).
   */
  callTimeoutMs?: number;
  /**
   * Whose clock decides. `'server'` (default): the script reads Redis `TIME`, so app servers with skewed
   * clocks agree on windows and bans; `request.nowMs` is ignored and the result's `nowMs` is Redis time.
   * `'request'`: the script uses `request.nowMs` (tests that move time, e.g. the conformance suite).
   */
  time?: 'server' | 'request';
  /**
   * Keys known to be blocked are answered from this process's memory, without Redis, until the block ends:
   * a **banned** key until its ban ends, and a **rate-limited** key until the windows it exhausted reset —
   * the latter only when the request carries no ban policy, because with one every rejection must reach Redis
   * to count toward the ban (so a flooding key costs Redis at most `rejectedThreshold` calls before its ban
   * starts, and none while the ban lasts). The answers equal what Redis would answer: nothing changes in
   * Redis while a key is blocked, so `used` and `X-RateLimit-Reset` stay as they were and `Retry-After`
   * counts down on this process's clock (set to Redis's clock at the last answer, in `'server'` mode).
   *
   * `{ maxKeys }` bounds the memory (one small entry per blocked key; least recently used keys go first); `false`
   * turns it off, e.g. when an operator lifts bans by deleting keys in Redis (each process would otherwise
   * keep answering "banned" until the ban's end). Default `{ maxKeys: 10_000 }`.
   */
  blockCache?: { maxKeys: number } | false;
}

/** A {@link RateLimitStore} over Redis, which also tells where it keeps a key. */
export interface RedisRateLimitStore extends RateLimitStore {
  /**
   * At most one round trip: the consumes this store starts within one event-loop turn share one script call;
   * see {@link RateLimitStore.consume}.
   */
  consume(key: string, request: ConsumeRequest): Promise<ConsumeResult>;
  /**
   * The Redis key holding the state of store key `key`: `${keyPrefix}rl:${key}` (without a client-level
   * ioredis `keyPrefix`, which ioredis adds itself). For inspection, e.g. `PTTL` in tests.
   */
  redisKey(key: string): string;
}

/**
 * The Redis key that holds the rate-limit state of store key `key` (e.g. `key:<keyId>` or `anon:<address>`):
 * `${keyPrefix}rl:${key}`, a string value of n windows: one byte n, then 3 + 2n little-endian doubles
 * (rejection-interval start, rejection count, ban end, the n window starts, the n window counts; integers, times
 * in Unix epoch ms; a rejection count of 0 means none, a ban end of 0 means no ban), then the windows' names as a
 * JSON array in the same order. Packed, because the script then reads and writes it with one GET and one SET
 * per call (see rate-limit-script.ts for the measurements).
 *
 * The key always carries a TTL (to the latest window reset, ban end or rejection-interval end).
 */
export function rateLimitRedisKey(key: string, keyPrefix: string = DEFAULT_KEY_PREFIX): string {
  return `${keyPrefix}rl:${key}`;
}

/**
 * A rate-limit store in Redis. A consume runs in one Lua script call (`EVALSHA`, with ioredis's automatic
 * `EVAL` fallback when the server has not cached the script) that reads the key's state, checks every window
 * and the ban, charges all windows or none, counts a rejection toward a ban, starts the ban, and sets the
 * key's expiry — a mirror of `decideConsume` from `@petstore/core`, atomic across every process sharing the
 * Redis server. State of one key is one string value, see {@link rateLimitRedisKey}.
 *
 * The consumes this store starts within one turn of the event loop (the requests read in one poll phase) go
 * to Redis as ONE call, which decides them in the order they were started, each exactly as if it had come
 * alone; a consume made alone is one call at the end of its turn (`setImmediate`, as ioredis's
 * `enableAutoPipelining` waits). A call holds at most 64 consumes. On a `Cluster` client the consumes are
 * grouped per hash slot. This costs Redis and the app far less per request than one call per consume (measured:
 * BENCHMARKS.md, section "Scale-out: K app processes on one Redis"); under fake timers that fake `setImmediate`,
 * advance them for a consume to be sent.
 *
 * Why ioredis: `defineCommand` gives EVALSHA with EVAL fallback, it reconnects with backoff, it has
 * `commandTimeout` and offline-queue control, and it is the client `@fastify/rate-limit` and
 * `rate-limiter-flexible` accept, so one client can serve them all.
 *
 * Failures: `consume` rejects when Redis errors or does not answer within `callTimeoutMs` — with a
 * `PetstoreError('service_unavailable')` when Redis is unreachable, slow or temporarily refusing (loading,
 * failing over), else a plain Error; either has the original failure as `cause`. It never answers "allowed"
 * on a failure: the engine's `onStoreFailure` policy turns the rejection into 503 or fail-open. A consume that
 * timed out may still be applied by Redis later (one request charged without an answer).
 *
 * A key that holds another type of value (`WRONGTYPE`: the prefix collides with the host's own data) fails
 * its own consume with a plain Error (cause: the `ReplyError`) and nothing is written to it; the other
 * consumes of the same call are decided as usual. A call that fails as a whole (timeout, connection, a
 * transient error reply) fails every consume in it.
 *
 * Redis Cluster: pass an ioredis `Cluster` as `client`. A call carries only keys of one hash slot, so any key
 * layout works (no hash tag needed) and keys spread over every master. A `MOVED` or `ASK` redirection (a slot
 * moved or moving) is followed by ioredis and the call succeeds; `CLUSTERDOWN`, `TRYAGAIN` (a call whose keys
 * are split by a slot migration in progress), a failover or a slot without a master make the call fail or
 * time out, which rejects with `service_unavailable` as above.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#store-failures
 * @throws TypeError when `callTimeoutMs` is not a whole number ≥ 1 or `keyPrefix` is not a string. `consume`
 *   rejects with a TypeError on a request with non-integer numbers (`nowMs` in `'request'` mode, `limit`,
 *   `windowMs`, ban fields), which the core never sends.
 */
export function redisRateLimitStore(options: RedisRateLimitStoreOptions): RedisRateLimitStore {
  const { client, keyPrefix = DEFAULT_KEY_PREFIX, callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS, time = 'server' } = options;
  assertKeyPrefix(keyPrefix);
  assertCallTimeoutMs(callTimeoutMs);
  if (time !== 'server' && time !== 'request') throw new TypeError(`time must be 'server' or 'request', got ${String(time)}`);
  const blocked = createBlockCache(options.blockCache ?? { maxKeys: DEFAULT_BLOCK_CACHE_KEYS });
  const consumeInBatch = createConsumeBatches(client, time, createDeadline(callTimeoutMs));

  return {
    // Stubs for the store contract v2 (issue 21), replaced by the Redis part of that issue.
    async peek() {
      throw new Error('not implemented yet');
    },
    async reset() {
      throw new Error('not implemented yet');
    },
    redisKey: (key) => rateLimitRedisKey(key, keyPrefix),
    async consume(key, request) {
      if (time === 'request' && !Number.isSafeInteger(request.nowMs)) {
        throw new TypeError(`nowMs must be a whole number of ms, got ${String(request.nowMs)}`);
      }
      const policy = policyArguments(request.windows, request.ban);
      const local = blocked?.answer(key, policy, request, time);
      if (local !== undefined) return local;
      let decision: ConsumeDecision;
      try {
        decision = await consumeInBatch(rateLimitRedisKey(key, keyPrefix), policy, request.windows.length, request.nowMs);
      } catch (error) {
        throw storeFailure(error, 'consume', 'rate-limit store');
      }
      const result = resultOf(decision, request);
      blocked?.remember(key, policy, result, request);
      return result;
    },
  };
}

/** Default `blockCache.maxKeys`. */
const DEFAULT_BLOCK_CACHE_KEYS = 10_000;

interface BlockedKey {
  /** The policy the answer was for: a request under another policy goes to Redis. */
  policy: PolicyArguments;
  /** Until when (Redis clock in `'server'` mode, else the requests' clock) the key stays blocked. */
  untilMs: number;
  /** The answer Redis gave. */
  result: Extract<ConsumeResult, { allowed: false }>;
  /** Redis's clock minus this process's clock at that answer (`'server'` mode). */
  offsetMs: number;
}

function samePolicy(a: PolicyArguments, b: PolicyArguments): boolean {
  return a === b || (a[0] === b[0] && a[2] === b[2]);
}

/** The blocked keys of one store (see `blockCache`), or `undefined` when turned off. */
function createBlockCache(option: { maxKeys: number } | false) {
  if (option === false) return undefined;
  if (typeof option !== 'object' || option === null || !Number.isSafeInteger(option.maxKeys) || option.maxKeys < 1) {
    throw new TypeError(`blockCache must be { maxKeys } with a whole number >= 1, or false; got ${String(option && JSON.stringify(option))}`);
  }
  const keys = new LRUCache<string, BlockedKey>({ max: option.maxKeys });
  return {
    /** The answer for a blocked key, or `undefined` when Redis must decide. */
    answer(key: string, policy: PolicyArguments, request: ConsumeRequest, time: 'server' | 'request'): ConsumeResult | undefined {
      const entry = keys.get(key);
      if (entry === undefined) return undefined;
      const nowMs = time === 'server' ? Date.now() + entry.offsetMs : request.nowMs;
      if (!samePolicy(entry.policy, policy) || nowMs >= entry.untilMs || nowMs < entry.result.nowMs) {
        keys.delete(key);
        return undefined;
      }
      // Windows that reset meanwhile (not the blocking ones: those end no earlier than untilMs) read as empty.
      const windows = entry.result.windows.map((window) =>
        nowMs < window.resetAtMs ? window : { ...window, used: 0, remaining: window.limit, resetAtMs: windowStartMs(nowMs, window.windowMs) + window.windowMs },
      );
      return { ...entry.result, nowMs, windows };
    },
    /** Remembers a blocked answer, or forgets the key once Redis admits it. */
    remember(key: string, policy: PolicyArguments, result: ConsumeResult, request: ConsumeRequest): void {
      if (result.allowed) {
        keys.delete(key);
        return;
      }
      let untilMs: number;
      if (result.reason === 'banned') untilMs = result.bannedUntilMs;
      else if (request.ban === undefined) {
        // Admitted again once every exhausted window has reset.
        untilMs = Math.max(...result.windows.filter((window) => window.used >= window.limit).map((window) => window.resetAtMs));
      } else return; // each rejection counts toward the ban in Redis
      if (untilMs > result.nowMs) keys.set(key, { policy, untilMs, result, offsetMs: result.nowMs - Date.now() });
    },
  };
}

function assertWhole(value: number, what: string, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) throw new TypeError(`${what} must be a whole number >= ${min}, got ${String(value)}`);
}

/** Policies built so far, per windows array and ban policy (`NO_BAN` for none). */
const policyCache = new WeakMap<readonly RateLimitWindow[], WeakMap<object, PolicyArguments>>();
const NO_BAN = Object.freeze({});

/** The most windows one request may carry: the stored state counts them in one byte. */
const MAX_WINDOWS = 255;

/**
 * The policy arguments: the windows' signature (their names as JSON), the `struct` format of the stored
 * numbers, and the policy's numbers as a JSON array (n, ban threshold (0 for no ban), interval and duration, the
 * limits, the windowMs). Plain text: a binary argument puts ioredis in its buffer mode, which cost the app and
 * Redis more per call than the `cjson.decode` of text saves (measured when the layout was chosen; the script's
 * pieces as they are: BENCHMARKS.md, section "Redis CPU per decision").
 * Built once per frozen windows array and frozen ban policy (the engine hands out one per plan), so a
 * request builds no strings for it.
 */
function policyArguments(windows: readonly RateLimitWindow[], ban: BanPolicy | undefined): PolicyArguments {
  const banKey = ban ?? NO_BAN;
  const cached = policyCache.get(windows)?.get(banKey);
  if (cached !== undefined) return cached;
  if (ban !== undefined) {
    assertWhole(ban.rejectedThreshold, 'ban.rejectedThreshold', 1);
    assertWhole(ban.intervalMs, 'ban.intervalMs', 1);
    assertWhole(ban.durationMs, 'ban.durationMs', 1);
  }
  if (windows.length > MAX_WINDOWS) throw new TypeError(`at most ${MAX_WINDOWS} windows per request, got ${windows.length}`);
  const format = `<B${'d'.repeat(3 + 2 * windows.length)}`;
  const numbers = [windows.length, ban?.rejectedThreshold ?? 0, ban?.intervalMs ?? 0, ban?.durationMs ?? 0];
  for (const window of windows) {
    assertWhole(window.limit, `window "${window.name}" limit`, 0);
    assertWhole(window.windowMs, `window "${window.name}" windowMs`, 1);
  }
  numbers.push(...windows.map((window) => window.limit), ...windows.map((window) => window.windowMs));
  const policy: PolicyArguments = [JSON.stringify(windows.map((window) => window.name)), format, JSON.stringify(numbers)];
  const cacheable =
    Object.isFrozen(windows) && windows.every((window) => Object.isFrozen(window)) && Object.isFrozen(banKey);
  if (cacheable) {
    let byBan = policyCache.get(windows);
    if (byBan === undefined) policyCache.set(windows, (byBan = new WeakMap()));
    byBan.set(banKey, policy);
  }
  return policy;
}

function resultOf({ nowMs, outcome, bannedUntilMs, used }: ConsumeDecision, request: ConsumeRequest): ConsumeResult {
  const windows: WindowUsage[] = request.windows.map((window, index) => {
    const count = used[index] as number;
    // The script decided at nowMs, so each window is the one containing it.
    const resetAtMs = windowStartMs(nowMs, window.windowMs) + window.windowMs;
    return {
      name: window.name,
      limit: window.limit,
      windowMs: window.windowMs,
      used: count,
      remaining: Math.max(0, window.limit - count),
      resetAtMs,
    };
  });
  if (outcome === 0) return { allowed: true, nowMs, windows };
  if (outcome === 1) return { allowed: false, reason: 'rate_limited', nowMs, windows };
  return { allowed: false, reason: 'banned', nowMs, windows, bannedUntilMs };
}

import {
  MAX_LIMIT_TIMES_WINDOW_MS,
  peekState,
  RATE_LIMIT_ALGORITHMS,
  windowStartMs,
  type BanPolicy,
  type ConsumeRequest,
  type ConsumeResult,
  type RateLimitSnapshot,
  type RateLimitState,
  type RateLimitStore,
  type RateLimitAlgorithm,
  type RateLimitWindow,
  type WindowUsage,
} from '@petstore/core';
import { assertWhole, cachePerPolicy, storedKeyText } from '@petstore/internal';
import type { Cluster, Redis } from 'ioredis';
import { createBlockCache } from './block-cache.js';
import { createConsumeBatches, type ConsumeDecision, type PolicyArguments } from './consume-batches.js';
import { decodeRateLimitRecord } from './rate-limit-record.js';
import { PEEK_LUA } from './rate-limit-script.js';
import {
  assertCallTimeoutMs,
  assertKeyPrefix,
  createDeadline,
  DEFAULT_CALL_TIMEOUT_MS,
  DEFAULT_KEY_PREFIX,
  NotARecordError,
  storeFailure,
} from './redis-call.js';

export { DEFAULT_BLOCK_CACHE_MAX_AGE_MS, DEFAULT_BLOCK_CACHE_MAX_KEYS } from './block-cache.js';
export { CONSUME_COMMAND } from './consume-batches.js';

/** Name under which the peek script (`'server'` mode) is defined on the client (`client.defineCommand`). */
export const PEEK_COMMAND = 'petstoreRateLimitPeek';

/** Options of {@link redisRateLimitStore}. */
export interface RedisRateLimitStoreOptions {
  /**
   * A connected (or connecting) ioredis 5 client: a `Redis` (one server, or a Sentinel-managed primary) or a
   * `Cluster` (Redis Cluster; each consume touches one key, so it runs on the master of that key's slot, and
   * ioredis follows `MOVED`/`ASK` redirections). The store defines its script commands on it
   * (`petstoreRateLimitConsume`, and `petstoreRateLimitPeek` in `'server'` mode) and otherwise leaves it alone;
   * it never closes it. A client-level ioredis `keyPrefix` is applied in front of this store's own `keyPrefix`.
   */
  client: Redis | Cluster;
  /** Prefix of every key this store writes. Default `petstore:`. */
  keyPrefix?: string;
  /**
   * Deadline of one store call (consume, peek, reset) in ms: past it the promise rejects with
   * `service_unavailable` (cause: a {@link RedisTimeoutError}; for a consume, the engine's `onStoreFailure` policy
   * decides what the caller gets). A consume's script that Redis runs past this deadline charges nothing. Default
   * 1000 ({@link DEFAULT_CALL_TIMEOUT_MS}).
   */
  callTimeoutMs?: number;
  /**
   * Whose clock decides. `'server'` (default): the scripts read Redis `TIME`, so app servers with skewed
   * clocks agree on windows and bans; `request.nowMs` (and `peek`'s `nowMs`) is ignored and the answer's `nowMs`
   * is Redis time. `'request'`: the store uses the caller's `nowMs` (tests that move time, e.g. the conformance
   * suite and the model comparison).
   */
  time?: 'server' | 'request';
  /**
   * Callers known to be blocked are answered from this process's memory for at most `maxAgeMs`, then one
   * consume asks Redis again and its answer refreshes what is known (the caller's other requests meanwhile
   * wait for that answer):
   *
   * - a **banned** caller (ban subject) until its ban ends;
   * - a caller **refused for lack of room** without a ban policy: a request is answered from memory when its
   *   cost exceeds what is left in some fixed window that has not reset yet, or, in a sliding or gcra window
   *   (whose usage drains as time passes), when it costs at least as much as the refused request and that
   *   window's `retryAtMs` has not come (a cheaper request, or one after the window reset or its `retryAtMs`,
   *   goes to Redis). With a ban policy every refusal goes to Redis, where it counts toward the ban.
   *
   * So a {@link RedisRateLimitStore.reset} (or an operator's `DEL` of the key) made anywhere is obeyed by every
   * process within `maxAgeMs` plus one round trip, with no notification that could be lost, and a blocked
   * caller's flood costs each process at most one Redis call per `maxAgeMs`. While Redis is unreachable, a
   * refresh that fails is answered from memory as long as the block lasts, and tried again `maxAgeMs` later.
   * The answers are those Redis gave at the last refresh (a sliding or gcra window's usage as it was then), with
   * windows that reset since read as empty and
   * `nowMs` (so `Retry-After`) on this process's clock, set to Redis's clock at that answer in `'server'` mode; in
   * `'request'` mode the age is counted on the requests' clock.
   *
   * `maxKeys` (default {@link DEFAULT_BLOCK_CACHE_MAX_KEYS}) bounds the records remembered (least recently used
   * go first); `maxAgeMs` (default {@link DEFAULT_BLOCK_CACHE_MAX_AGE_MS}) is a whole number of ms ≥ 1. `false`
   * turns the cache off: every request goes to Redis.
   */
  blockCache?: { maxKeys?: number; maxAgeMs?: number } | false;
}

/** A {@link RateLimitStore} over Redis, which also tells where it keeps a record. */
export interface RedisRateLimitStore extends RateLimitStore {
  /**
   * At most one round trip: the consumes this store starts within one event-loop turn share one script call;
   * see {@link RateLimitStore.consume}.
   */
  consume(key: string, request: ConsumeRequest): Promise<ConsumeResult>;
  /**
   * One read (`GET`; in `'server'` mode a script reading `TIME` and the key), decided by `peekState` of
   * `@petstore/core` at Redis's clock (`'server'`, `nowMs` ignored) or at `nowMs` (`'request'`). Charges nothing
   * and leaves the block cache alone. See {@link RateLimitStore.peek}.
   *
   * Rejects with `service_unavailable` when Redis is unreachable or slower than `callTimeoutMs`; with a plain
   * Error when the key holds another type of value or a string that is not a record.
   */
  peek(key: string, nowMs: number): Promise<RateLimitSnapshot>;
  /**
   * Deletes the record's key (`DEL`: its windows and the bans of all its subjects) and forgets what this
   * process's block cache knew of it; other processes' caches ask Redis again within their `maxAgeMs`.
   * Resolves whether or not the key existed; rejects as {@link RedisRateLimitStore.peek} does.
   */
  reset(key: string): Promise<void>;
  /**
   * The Redis key holding the record of store key `key`: `${keyPrefix}rl:${key}` (without a client-level
   * ioredis `keyPrefix`, which ioredis adds itself). For inspection, e.g. `PTTL` in tests.
   */
  redisKey(key: string): string;
}

/**
 * The Redis key that holds the rate-limit record of store key `key` (`account:<accountId>` or
 * `anon:<address>`): `${keyPrefix}rl:${key}` (NUL, U+FFFD or a lone surrogate in a key written as U+FFFD and its
 * four hex digits, so distinct keys never share a record), one string value, packed (all integers little-endian;
 * the numbers are doubles, exact below 2^53, times in Unix epoch ms):
 *
 * 1. one byte n, the number of windows; a 4-byte unsigned length L;
 * 2. the n window starts, then the n window counts, 8 bytes each (`fixed`, `sliding`: the epoch-aligned window
 *    start and units counted; `gcra`: when last charged and the outstanding unit-milliseconds, units × windowMs);
 * 3. L bytes of JSON, `[[name, limit, windowMs], …]`: each window's name and the limit and length it was last
 *    charged with, in the order of the starts and counts, a `sliding` or `gcra` window's algorithm as a fourth
 *    element;
 * 3b. per `sliding` window, in window order: the units counted in the window before, 8 bytes (none for a record
 *    of fixed windows, which keeps the layout it always had);
 * 4. per ban subject that is banned or counting rejections (a key's `keyId`, `''` for an anonymous record):
 *    the start of its rejection interval and its rejection count (0 and 0: none), the end of its ban (0: none),
 *    8 bytes each; a 4-byte length; the subject's UTF-8 bytes.
 *
 * Packed, so the script reads and writes it with one GET and one SET per call. The key always carries a TTL (to the latest window reset, ban end
 * or rejection-interval end in it).
 */
export function rateLimitRedisKey(key: string, keyPrefix: string = DEFAULT_KEY_PREFIX): string {
  return `${keyPrefix}rl:${storedKeyText(key)}`;
}

/**
 * A rate-limit store in Redis. A consume runs in one Lua script call (`EVALSHA`, with ioredis's automatic
 * `EVAL` fallback when the server has not cached the script) that reads the record, checks every window and the
 * ban subject's ban, charges the cost to all windows or to none, counts a refusal toward the subject's ban,
 * starts the ban, prunes ended bans, and sets the key's expiry — a mirror of `decideConsume` from
 * `@petstore/core`, atomic across every process sharing the Redis server, for every algorithm (`fixed`, `sliding`,
 * `gcra`: `algorithms` lists all three, and a plan may change from one to another over a live record). One record
 * is one string value, see {@link rateLimitRedisKey}. `peek` is one read; `reset` one `DEL`.
 *
 * The consumes this store starts within one turn of the event loop (the requests read in one poll phase) go
 * to Redis as ONE call, which decides them in the order they were started, each exactly as if it had come
 * alone; a consume made alone is one call at the end of its turn (`setImmediate`, as ioredis's
 * `enableAutoPipelining` waits). A call holds at most 64 consumes. On a `Cluster` client the consumes are
 * grouped per hash slot. Under fake timers that fake `setImmediate`, advance them for a consume to be sent.
 *
 * Why ioredis: `defineCommand` gives EVALSHA with EVAL fallback, it reconnects with backoff, it has
 * `commandTimeout` and offline-queue control, and it is the client `@fastify/rate-limit` and
 * `rate-limiter-flexible` accept, so one client can serve them all.
 *
 * Failures: `consume` rejects when Redis errors or does not answer within `callTimeoutMs` — with a
 * `PetstoreError('service_unavailable')` when Redis is unreachable, slow or temporarily refusing (loading,
 * failing over), else a plain Error; either has the original failure as `cause`. It never answers "allowed"
 * on a failure: the engine's `onStoreFailure` policy turns the rejection into 503 or fail-open. A consume that
 * timed out is not charged: its call carries the deadline (on Redis's clock, from the offset the last reply
 * showed), and a script that Redis runs later (a paused or overloaded server, a call held in ioredis's offline
 * queue) reads and writes nothing. What is left is a script that runs just before the deadline whose answer
 * arrives after it: about one reply's travel.
 *
 * A key that holds another type of value (`WRONGTYPE`: the prefix collides with the host's own data), or a
 * string that is not a record (cause: `NotARecordError`), fails its own consume with a plain Error and nothing
 * is written to it; the other consumes of the same call are decided as usual. A call that fails as a whole
 * (timeout, connection, a transient error reply) fails every consume in it.
 *
 * Redis Cluster: pass an ioredis `Cluster` as `client`. A call carries only keys of one hash slot, so any key
 * layout works (no hash tag needed) and keys spread over every master. A `MOVED` or `ASK` redirection (a slot
 * moved or moving) is followed by ioredis and the call succeeds; `CLUSTERDOWN`, `TRYAGAIN` (a call whose keys
 * are split by a slot migration in progress), a failover or a slot without a master make the call fail or
 * time out, which rejects with `service_unavailable` as above.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#store-failures
 * @throws TypeError when `callTimeoutMs` is not a whole number ≥ 1, `keyPrefix` is not a string, `time` is
 *   neither `'server'` nor `'request'`, or `blockCache` is malformed. `consume` rejects with a TypeError on a
 *   request with non-integer numbers (`nowMs` in `'request'` mode, `cost`, `limit`, `windowMs`, ban fields) or
 *   a `banSubject` that is not a string, which the core never sends; `peek` on a `nowMs` that is not a whole
 *   number in `'request'` mode.
 */
export function redisRateLimitStore(options: RedisRateLimitStoreOptions): RedisRateLimitStore {
  const { client, keyPrefix = DEFAULT_KEY_PREFIX, callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS, time = 'server' } = options;
  assertKeyPrefix(keyPrefix);
  assertCallTimeoutMs(callTimeoutMs);
  if (time !== 'server' && time !== 'request') throw new TypeError(`time must be 'server' or 'request', got ${String(time)}`);
  const blocked = createBlockCache(options.blockCache ?? {}, time);
  const withDeadline = createDeadline(callTimeoutMs);
  const consumeInBatch = createConsumeBatches(client, time, callTimeoutMs, withDeadline);
  type PeekCall = (redisKey: string) => Promise<[Buffer, Buffer, Buffer | null]>;
  let peekScript: PeekCall | undefined;
  if (time === 'server') {
    client.defineCommand(PEEK_COMMAND, { numberOfKeys: 1, lua: PEEK_LUA });
    const defined = (client as unknown as Record<string, PeekCall>)[`${PEEK_COMMAND}Buffer`] as PeekCall;
    peekScript = (redisKey) => defined.call(client, redisKey);
  }

  /** One consume decided by Redis (in a batch). */
  async function decideInRedis(key: string, policy: PolicyArguments, request: ConsumeRequest): Promise<ConsumeResult> {
    let decision: ConsumeDecision;
    try {
      decision = await consumeInBatch(
        rateLimitRedisKey(key, keyPrefix),
        policy,
        request.windows.length,
        request.cost,
        request.banSubject,
        request.nowMs,
      );
    } catch (error) {
      throw storeFailure(error, 'consume', 'rate-limit store');
    }
    return resultOf(decision, request);
  }

  return {
    backend: 'redis',
    algorithms: RATE_LIMIT_ALGORITHMS,
    redisKey: (key) => rateLimitRedisKey(key, keyPrefix),
    async consume(key, request) {
      if (time === 'request' && !Number.isSafeInteger(request.nowMs)) {
        throw new TypeError(`nowMs must be a whole number of ms, got ${String(request.nowMs)}`);
      }
      assertWhole(request.cost, 'cost', 1);
      if (typeof request.banSubject !== 'string') throw new TypeError(`banSubject must be a string, got ${typeof request.banSubject}`);
      const policy = policyArguments(request.windows, request.ban);
      const ask = () => decideInRedis(key, policy, request);
      return blocked === undefined ? ask() : blocked.consume(key, policy, request, ask);
    },
    async peek(key, nowMs) {
      const redisKey = rateLimitRedisKey(key, keyPrefix);
      let value: Buffer | null;
      let atMs: number;
      try {
        if (peekScript !== undefined) {
          const [seconds, micros, stored] = await withDeadline(peekScript(redisKey));
          atMs = Number(seconds.toString()) * 1000 + Math.floor(Number(micros.toString()) / 1000);
          value = stored;
        } else {
          if (!Number.isSafeInteger(nowMs)) throw new TypeError(`nowMs must be a whole number of ms, got ${String(nowMs)}`);
          atMs = nowMs;
          value = await withDeadline(client.getBuffer(redisKey));
        }
      } catch (error) {
        if (error instanceof TypeError) throw error;
        throw storeFailure(error, 'peek', 'rate-limit store');
      }
      let state: RateLimitState | undefined;
      try {
        state = value === null ? undefined : decodeRateLimitRecord(value);
      } catch {
        throw storeFailure(new NotARecordError(redisKey), 'peek', 'rate-limit store');
      }
      return peekState(state, atMs);
    },
    async reset(key) {
      try {
        await withDeadline(client.del(rateLimitRedisKey(key, keyPrefix)));
      } catch (error) {
        throw storeFailure(error, 'reset', 'rate-limit store');
      } finally {
        blocked?.forget(key);
      }
    },
  };
}

/** The most windows one request may carry: the record counts them in one byte. */
const MAX_WINDOWS = 255;

/**
 * The policy arguments: the windows' signature (`[[name, limit, windowMs], …]` as JSON, stored in the record),
 * the `struct` format of the record's numbers, and the policy's numbers as a JSON array (n, ban threshold (0 for
 * no ban), interval and duration, the limits, the windowMs). Plain text: a binary argument puts ioredis in its
 * buffer mode, dearer per call than the script's `cjson.decode`. Built once per frozen windows array and ban
 * policy (the engine hands out one per plan), so a request builds no strings for it.
 */
const policyArguments = cachePerPolicy((windows: readonly RateLimitWindow[], ban: BanPolicy | undefined): PolicyArguments => {
  if (ban !== undefined) {
    assertWhole(ban.rejectedThreshold, 'ban.rejectedThreshold', 1);
    assertWhole(ban.intervalMs, 'ban.intervalMs', 1);
    assertWhole(ban.durationMs, 'ban.durationMs', 1);
  }
  if (windows.length > MAX_WINDOWS) throw new TypeError(`at most ${MAX_WINDOWS} windows per request, got ${windows.length}`);
  let fixedOnly = true;
  for (const window of windows) {
    if (typeof window.name !== 'string') throw new TypeError(`a window name must be a string, got ${typeof window.name}`);
    assertWhole(window.limit, `window "${window.name}" limit`, 0);
    assertWhole(window.windowMs, `window "${window.name}" windowMs`, 1);
    const algorithm = window.algorithm ?? 'fixed';
    if (!RATE_LIMIT_ALGORITHMS.includes(algorithm)) throw new TypeError(`window "${window.name}" algorithm must be one of ${RATE_LIMIT_ALGORITHMS.join(', ')}, got ${String(algorithm)}`);
    if (algorithm !== 'fixed') {
      fixedOnly = false;
      // The script's unit-milliseconds are exact below 2^53 (the engine refuses larger at creation).
      if (window.limit * window.windowMs > MAX_LIMIT_TIMES_WINDOW_MS) {
        throw new TypeError(`window "${window.name}": limit × windowMs must be at most ${MAX_LIMIT_TIMES_WINDOW_MS} for ${algorithm}`);
      }
    }
  }
  // A fixed window's entry is [name, limit, windowMs], as before sliding and gcra existed; theirs name them.
  const signature = JSON.stringify(
    windows.map((window) =>
      window.algorithm === undefined || window.algorithm === 'fixed' ? [window.name, window.limit, window.windowMs] : [window.name, window.limit, window.windowMs, window.algorithm],
    ),
  );
  const format = `<BI4${'d'.repeat(2 * windows.length)}`;
  const numbers = [windows.length, ban?.rejectedThreshold ?? 0, ban?.intervalMs ?? 0, ban?.durationMs ?? 0];
  numbers.push(...windows.map((window) => window.limit), ...windows.map((window) => window.windowMs));
  if (!fixedOnly) numbers.push(...windows.map((window) => ALGORITHM_CODES[window.algorithm ?? 'fixed']));
  return [signature, format, JSON.stringify(numbers), fixedOnly ? 1 : 3];
});

/** The script's code of each algorithm (the policy's numbers carry them when a window is not fixed). */
const ALGORITHM_CODES: Record<RateLimitAlgorithm, number> = { fixed: 0, sliding: 1, gcra: 2 };

function resultOf({ nowMs, outcome, bannedUntilMs, used }: ConsumeDecision, request: ConsumeRequest): ConsumeResult {
  const perWindow = used.length / Math.max(1, request.windows.length);
  const windows: WindowUsage[] = request.windows.map((window, index) => {
    if (perWindow === 3) {
      // A policy with a sliding or gcra window: the script reports each window's used, reset and retry.
      const count = used[3 * index] as number;
      const usage: WindowUsage = {
        name: window.name,
        limit: window.limit,
        windowMs: window.windowMs,
        used: count,
        remaining: Math.max(0, window.limit - count),
        resetAtMs: used[3 * index + 1] as number,
      };
      const retryAtMs = used[3 * index + 2] as number;
      if (retryAtMs !== -1) usage.retryAtMs = retryAtMs;
      return usage;
    }
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

import { windowStartMs, type BanPolicy, type ConsumeRequest, type ConsumeResult, type RateLimitStore, type RateLimitWindow, type WindowUsage } from '@petstore/core';
import type { Redis } from 'ioredis';
import { assertKeyPrefix, assertTimeoutMs, DEFAULT_KEY_PREFIX, DEFAULT_TIMEOUT_MS, storeFailure, createDeadline } from './redis-call.js';
import { CONSUME_LUA } from './rate-limit-script.js';

/** Name under which the consume script is defined on the client (`client.defineCommand`). */
export const CONSUME_COMMAND = 'petstoreRateLimitConsume';

/** Options of {@link redisRateLimitStore}. */
export interface RedisRateLimitStoreOptions {
  /**
   * A connected (or connecting) ioredis 5 client. The store defines one script command on it
   * (`petstoreRateLimitConsume`) and otherwise leaves it alone; it never closes it. A client-level ioredis
   * `keyPrefix` is applied in front of this store's own `keyPrefix`.
   */
  client: Redis;
  /** Prefix of every key this store writes. Default `petstore:`. */
  keyPrefix?: string;
  /**
   * Deadline of one consume in ms: past it the promise rejects (the engine's `onStoreFailure` policy decides
   * what the caller gets). Default 1000.
   */
  timeoutMs?: number;
  /**
   * Whose clock decides. `'server'` (default): the script reads Redis `TIME`, so app servers with skewed
   * clocks agree on windows and bans; `request.nowMs` is ignored and the result's `nowMs` is Redis time.
   * `'request'`: the script uses `request.nowMs` (tests that move time, e.g. the conformance suite).
   */
  time?: 'server' | 'request';
}

/** A {@link RateLimitStore} over Redis, which also tells where it keeps a key. */
export interface RedisRateLimitStore extends RateLimitStore {
  /** One script call (one round trip); see {@link RateLimitStore.consume}. */
  consume(key: string, request: ConsumeRequest): Promise<ConsumeResult>;
  /**
   * The Redis key holding the state of store key `key`: `${keyPrefix}rl:${key}` (without a client-level
   * ioredis `keyPrefix`, which ioredis adds itself). For inspection, e.g. `PTTL` in tests.
   */
  redisKey(key: string): string;
}

/**
 * The Redis key that holds the rate-limit state of store key `key` (e.g. `key:<keyId>` or `anon:<address>`):
 * `${keyPrefix}rl:${key}`, a hash with these fields (integers in decimal, times in Unix epoch ms):
 *
 * - `w:<window name>:s` and `w:<window name>:c`: the start and count of each window;
 * - `rej:s` and `rej:c`: the start and count of rejections toward a ban in the current ban interval;
 * - `ban`: the end of a ban, while one is or was in force;
 * - `sig`: the window names last written.
 *
 * The key always carries a TTL (to the latest window reset, ban end or rejection-interval end).
 */
export function rateLimitRedisKey(key: string, keyPrefix: string = DEFAULT_KEY_PREFIX): string {
  return `${keyPrefix}rl:${key}`;
}

type ConsumeReply = [outcome: number, nowMs: number, bannedUntilMs: number, ...usage: number[]];
type ConsumeCommand = (redisKey: string, ...args: string[]) => Promise<ConsumeReply>;

/**
 * A rate-limit store in Redis: each `consume` is ONE command (`EVALSHA` of a Lua script, with ioredis's
 * automatic `EVAL` fallback when the server has not cached it) that reads the key's state, checks every
 * window and the ban, charges all windows or none, counts a rejection toward a ban, starts the ban, and sets
 * the key's expiry — a mirror of `decideConsume` from `@petstore/core`, atomic across every process sharing
 * the Redis server. State of one key is one hash, see {@link rateLimitRedisKey}.
 *
 * Why ioredis: `defineCommand` gives EVALSHA with EVAL fallback, it reconnects with backoff, it has
 * `commandTimeout` and offline-queue control, and it is the client `@fastify/rate-limit` and
 * `rate-limiter-flexible` accept, so one client can serve them all.
 *
 * Failures: `consume` rejects when Redis errors or does not answer within `timeoutMs` — with a
 * `PetstoreError('service_unavailable')` when Redis is unreachable, slow or temporarily refusing (loading,
 * failing over), else a plain Error; either has the original failure as `cause`. It never answers "allowed"
 * on a failure: the engine's `onStoreFailure` policy turns the rejection into 503 or fail-open. A consume that
 * timed out may still be applied by Redis later (one request charged without an answer).
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#store-failures
 * @throws TypeError when `timeoutMs` is not a whole number ≥ 1 or `keyPrefix` is not a string. `consume`
 *   rejects with a TypeError on a request with non-integer numbers (`nowMs` in `'request'` mode, `limit`,
 *   `windowMs`, ban fields), which the core never sends.
 */
export function redisRateLimitStore(options: RedisRateLimitStoreOptions): RedisRateLimitStore {
  const { client, keyPrefix = DEFAULT_KEY_PREFIX, timeoutMs = DEFAULT_TIMEOUT_MS, time = 'server' } = options;
  assertKeyPrefix(keyPrefix);
  assertTimeoutMs(timeoutMs);
  if (time !== 'server' && time !== 'request') throw new TypeError(`time must be 'server' or 'request', got ${String(time)}`);
  client.defineCommand(CONSUME_COMMAND, { numberOfKeys: 1, lua: CONSUME_LUA });
  const consumeCommand = (client as unknown as Record<string, ConsumeCommand>)[CONSUME_COMMAND] as ConsumeCommand;
  const withDeadline = createDeadline(timeoutMs);

  return {
    redisKey: (key) => rateLimitRedisKey(key, keyPrefix),
    async consume(key, request) {
      const [timeArgument, policy] = scriptArguments(request, time);
      let reply: ConsumeReply;
      try {
        reply = await withDeadline(consumeCommand.call(client, rateLimitRedisKey(key, keyPrefix), timeArgument, policy));
      } catch (error) {
        throw storeFailure(error, 'consume', 'rate-limit store');
      }
      return resultFromReply(reply, request);
    },
  };
}

function assertWhole(value: number, what: string, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) throw new TypeError(`${what} must be a whole number >= ${min}, got ${String(value)}`);
}

/** ARGV of the consume script (see rate-limit-script.ts): the time, then the policy as JSON. */
function scriptArguments(request: ConsumeRequest, time: 'server' | 'request'): [string, string] {
  if (time === 'request' && !Number.isSafeInteger(request.nowMs)) {
    throw new TypeError(`nowMs must be a whole number of ms, got ${String(request.nowMs)}`);
  }
  return [time === 'request' ? String(request.nowMs) : 'server', policyArgument(request.windows, request.ban)];
}

/** Policies built so far, per windows array and ban policy (`NO_BAN` for none). */
const policyCache = new WeakMap<readonly RateLimitWindow[], WeakMap<object, string>>();
const NO_BAN = Object.freeze({});

/**
 * The policy argument: ban enabled, threshold, interval and duration, the windows' signature, then each
 * window's start field, count field, limit and windowMs, as a JSON array. Built once per frozen windows array
 * and frozen ban policy (the engine hands out one per plan), so a request builds no strings for it.
 */
function policyArgument(windows: readonly RateLimitWindow[], ban: BanPolicy | undefined): string {
  const banKey = ban ?? NO_BAN;
  const cached = policyCache.get(windows)?.get(banKey);
  if (cached !== undefined) return cached;
  if (ban !== undefined) {
    assertWhole(ban.rejectedThreshold, 'ban.rejectedThreshold', 1);
    assertWhole(ban.intervalMs, 'ban.intervalMs', 1);
    assertWhole(ban.durationMs, 'ban.durationMs', 1);
  }
  const policy: (string | number)[] = [
    ban === undefined ? 0 : 1,
    ban?.rejectedThreshold ?? 0,
    ban?.intervalMs ?? 0,
    ban?.durationMs ?? 0,
    JSON.stringify(windows.map((window) => window.name)),
  ];
  for (const window of windows) {
    assertWhole(window.limit, `window "${window.name}" limit`, 0);
    assertWhole(window.windowMs, `window "${window.name}" windowMs`, 1);
    policy.push(`w:${window.name}:s`, `w:${window.name}:c`, window.limit, window.windowMs);
  }
  const built = JSON.stringify(policy);
  const cacheable =
    Object.isFrozen(windows) && windows.every((window) => Object.isFrozen(window)) && Object.isFrozen(banKey);
  if (cacheable) {
    let byBan = policyCache.get(windows);
    if (byBan === undefined) policyCache.set(windows, (byBan = new WeakMap()));
    byBan.set(banKey, built);
  }
  return built;
}

function resultFromReply(reply: ConsumeReply, request: ConsumeRequest): ConsumeResult {
  const [outcome, nowMs, bannedUntilMs] = reply;
  const windows: WindowUsage[] = request.windows.map((window, index) => {
    const used = reply[3 + index] as number;
    // The script decided at nowMs, so each window is the one containing it.
    const resetAtMs = windowStartMs(nowMs, window.windowMs) + window.windowMs;
    return {
      name: window.name,
      limit: window.limit,
      windowMs: window.windowMs,
      used,
      remaining: Math.max(0, window.limit - used),
      resetAtMs,
    };
  });
  if (outcome === 0) return { allowed: true, nowMs, windows };
  if (outcome === 1) return { allowed: false, reason: 'rate_limited', nowMs, windows };
  return { allowed: false, reason: 'banned', nowMs, windows, bannedUntilMs };
}

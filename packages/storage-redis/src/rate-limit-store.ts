import type { BanPolicy, ConsumeRequest, ConsumeResult, RateLimitStore, RateLimitWindow, WindowUsage } from '@petstore/core';
import type { Redis } from 'ioredis';
import { assertKeyPrefix, assertTimeoutMs, DEFAULT_KEY_PREFIX, DEFAULT_TIMEOUT_MS, storeFailure, withDeadline } from './redis-call.js';
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

  return {
    redisKey: (key) => rateLimitRedisKey(key, keyPrefix),
    async consume(key, request) {
      const args = scriptArguments(request, time);
      let reply: ConsumeReply;
      try {
        reply = await withDeadline(consumeCommand.call(client, rateLimitRedisKey(key, keyPrefix), ...args), timeoutMs);
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

/** ARGV of the consume script; see rate-limit-script.ts. */
function scriptArguments(request: ConsumeRequest, time: 'server' | 'request'): string[] {
  if (time === 'request' && !Number.isSafeInteger(request.nowMs)) {
    throw new TypeError(`nowMs must be a whole number of ms, got ${String(request.nowMs)}`);
  }
  return [
    time,
    time === 'request' ? String(request.nowMs) : '0',
    ...banArguments(request.ban),
    ...windowArguments(request.windows),
  ];
}

const NO_BAN_ARGUMENTS: readonly string[] = Object.freeze(['0', '0', '0', '0']);
const banArgumentsCache = new WeakMap<BanPolicy, readonly string[]>();

/** Ban enabled, threshold, interval and duration; built once per frozen policy object. */
function banArguments(ban: BanPolicy | undefined): readonly string[] {
  if (ban === undefined) return NO_BAN_ARGUMENTS;
  const cached = banArgumentsCache.get(ban);
  if (cached !== undefined) return cached;
  assertWhole(ban.rejectedThreshold, 'ban.rejectedThreshold', 1);
  assertWhole(ban.intervalMs, 'ban.intervalMs', 1);
  assertWhole(ban.durationMs, 'ban.durationMs', 1);
  const built = ['1', String(ban.rejectedThreshold), String(ban.intervalMs), String(ban.durationMs)];
  if (Object.isFrozen(ban)) banArgumentsCache.set(ban, built);
  return built;
}

const windowArgumentsCache = new WeakMap<readonly RateLimitWindow[], readonly string[]>();

/**
 * The windows' signature, then each window's start field, count field, limit and windowMs. Built once per
 * frozen windows array (the engine hands out one per plan), so a request builds no strings for them.
 */
function windowArguments(windows: readonly RateLimitWindow[]): readonly string[] {
  const cached = windowArgumentsCache.get(windows);
  if (cached !== undefined) return cached;
  const built = [JSON.stringify(windows.map((window) => window.name))];
  for (const window of windows) {
    assertWhole(window.limit, `window "${window.name}" limit`, 0);
    assertWhole(window.windowMs, `window "${window.name}" windowMs`, 1);
    built.push(`w:${window.name}:s`, `w:${window.name}:c`, String(window.limit), String(window.windowMs));
  }
  if (Object.isFrozen(windows) && windows.every((window) => Object.isFrozen(window))) windowArgumentsCache.set(windows, built);
  return built;
}

function resultFromReply(reply: ConsumeReply, request: ConsumeRequest): ConsumeResult {
  const [outcome, nowMs, bannedUntilMs] = reply;
  const windows: WindowUsage[] = request.windows.map((window, index) => {
    const used = reply[3 + 2 * index] as number;
    const resetAtMs = reply[4 + 2 * index] as number;
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

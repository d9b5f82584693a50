import {
  DAY_MS,
  MINUTE_MS,
  createRateLimiter,
  decideConsume,
  isPetstoreError,
  type BanPolicy,
  type ConsumeRequest,
  type ConsumeResult,
  type RateLimitState,
  type RateLimitWindow,
} from '@petstore/core';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisRateLimitStore, rateLimitRedisKey, type RedisRateLimitStoreOptions } from './rate-limit-store.js';
import { closedPort, connect, monitorCommands, skipRedis, track, uniquePrefix } from './test-support/redis.js';

const T0 = Date.UTC(2026, 0, 1);
const BAN: BanPolicy = { rejectedThreshold: 3, intervalMs: MINUTE_MS, durationMs: 10 * MINUTE_MS };
const minuteAndDay = (perMinute: number, perDay: number): RateLimitWindow[] => [
  { name: 'minute', limit: perMinute, windowMs: MINUTE_MS },
  { name: 'day', limit: perDay, windowMs: DAY_MS },
];
const at = (nowMs: number, windows: RateLimitWindow[], ban?: BanPolicy): ConsumeRequest => ({ windows, nowMs, ban });
const used = (result: ConsumeResult, name: string) => result.windows.find((window) => window.name === name)?.used;
const outcome = (result: ConsumeResult) => (result.allowed ? 'allowed' : result.reason);

function newStore(options: Partial<RedisRateLimitStoreOptions> = {}) {
  const client = options.client ?? connect();
  const keyPrefix = options.keyPrefix ?? uniquePrefix();
  return { client, keyPrefix, store: redisRateLimitStore({ client, keyPrefix, ...options }) };
}


describe.skipIf(skipRedis)('redisRateLimitStore against Redis', () => {
  it('admits exactly the quota under a burst of 500 parallel consumes', async () => {
    const { store } = newStore({ time: 'request' });
    const results = await Promise.all(Array.from({ length: 500 }, () => store.consume('key:burst', at(T0, minuteAndDay(60, 1000)))));
    expect(results.filter((result) => result.allowed)).toHaveLength(60);
    expect(results.filter((result) => !result.allowed).every((result) => outcome(result) === 'rate_limited')).toBe(true);
    const next = await store.consume('key:burst', at(T0 + MINUTE_MS, minuteAndDay(60, 1000)));
    expect(used(next, 'day')).toBe(61);
  });

  it('admits exactly the quota of a burst spread over several clients (processes)', async () => {
    const keyPrefix = uniquePrefix();
    const stores = Array.from({ length: 4 }, () => newStore({ keyPrefix, time: 'request' }).store);
    const results = await Promise.all(
      Array.from({ length: 400 }, (_, i) => stores[i % 4]!.consume('key:shared', at(T0, minuteAndDay(25, 1000)))),
    );
    expect(results.filter((result) => result.allowed)).toHaveLength(25);
  });

  it('charges the minute and day windows all or nothing', async () => {
    const { store } = newStore({ time: 'request' });
    const windows = minuteAndDay(2, 3);
    expect(outcome(await store.consume('key:aon', at(T0, windows)))).toBe('allowed');
    expect(outcome(await store.consume('key:aon', at(T0 + 1, windows)))).toBe('allowed');
    const minuteFull = await store.consume('key:aon', at(T0 + 2, windows));
    expect(outcome(minuteFull)).toBe('rate_limited');
    expect(used(minuteFull, 'day')).toBe(2);
    const nextMinute = await store.consume('key:aon', at(T0 + MINUTE_MS, windows));
    expect(outcome(nextMinute)).toBe('allowed');
    expect(used(nextMinute, 'day')).toBe(3);
    const dayFull = await store.consume('key:aon', at(T0 + 2 * MINUTE_MS, windows));
    expect(outcome(dayFull)).toBe('rate_limited');
    expect(dayFull.windows).toEqual([
      { name: 'minute', limit: 2, windowMs: MINUTE_MS, used: 0, remaining: 2, resetAtMs: T0 + 3 * MINUTE_MS },
      { name: 'day', limit: 3, windowMs: DAY_MS, used: 3, remaining: 0, resetAtMs: T0 + DAY_MS },
    ]);
  });

  it('starts a ban at the threshold, holds it without charging or extending it, and ends it', async () => {
    const { store } = newStore({ time: 'request' });
    const windows = minuteAndDay(1, 100);
    expect(outcome(await store.consume('key:ban', at(T0, windows, BAN)))).toBe('allowed');
    const reasons = [];
    for (let i = 1; i <= 3; i++) reasons.push(outcome(await store.consume('key:ban', at(T0 + i, windows, BAN))));
    expect(reasons).toEqual(['rate_limited', 'rate_limited', 'banned']);
    const banEnd = T0 + 3 + BAN.durationMs;
    for (const nowMs of [T0 + 4, T0 + 5 * MINUTE_MS, banEnd - 1]) {
      const during = await store.consume('key:ban', at(nowMs, windows, BAN));
      expect(during).toMatchObject({ allowed: false, reason: 'banned', bannedUntilMs: banEnd, nowMs });
      expect(used(during, 'day')).toBe(1);
    }
    const after = await store.consume('key:ban', at(banEnd, windows, BAN));
    expect(outcome(after)).toBe('allowed');
    expect(used(after, 'day')).toBe(2);
  });

  it('keeps usage per window name across a plan change and drops windows no longer requested', async () => {
    const { client, store } = newStore({ time: 'request' });
    for (let i = 0; i < 3; i++) await store.consume('key:plan', at(T0, minuteAndDay(5, 10)));
    const upgraded = await store.consume('key:plan', at(T0 + 1, minuteAndDay(50, 100)));
    expect(upgraded.windows.map((window) => [window.used, window.remaining])).toEqual([
      [4, 46],
      [4, 96],
    ]);
    await store.consume('key:plan', at(T0 + 2, [{ name: 'day', limit: 100, windowMs: DAY_MS }]));
    expect(await client.hgetall(store.redisKey('key:plan'))).toEqual({
      'w:day:s': String(Math.floor(T0 / DAY_MS) * DAY_MS),
      'w:day:c': '5',
      sig: '["day"]',
    });
  });

  it('keeps one hash per key, in the documented layout', async () => {
    const { client, keyPrefix, store } = newStore({ time: 'request' });
    expect(store.redisKey('key:k1')).toBe(`${keyPrefix}rl:key:k1`);
    expect(rateLimitRedisKey('anon:192.0.2.1', keyPrefix)).toBe(`${keyPrefix}rl:anon:192.0.2.1`);
    const windows = minuteAndDay(1, 100);
    await store.consume('key:k1', at(T0 + 5, windows, BAN));
    await store.consume('key:k1', at(T0 + 6, windows, BAN));
    expect(await client.hgetall(store.redisKey('key:k1'))).toEqual({
      sig: '["minute","day"]',
      'w:minute:s': `${T0}`,
      'w:minute:c': '1',
      'w:day:s': `${T0}`,
      'w:day:c': '1',
      'rej:s': `${T0}`,
      'rej:c': '1',
    });
    await store.consume('key:k1', at(T0 + 7, windows, BAN));
    await store.consume('key:k1', at(T0 + 8, windows, BAN));
    expect(await client.hgetall(store.redisKey('key:k1'))).toEqual({
      sig: '["minute","day"]',
      'w:minute:s': `${T0}`,
      'w:minute:c': '1',
      'w:day:s': `${T0}`,
      'w:day:c': '1',
      ban: String(T0 + 8 + BAN.durationMs),
    });
    expect(await client.keys(`${keyPrefix}*`)).toEqual([`${keyPrefix}rl:key:k1`]);
  });

  it('decides on Redis time in server mode, whatever nowMs the caller sends', async () => {
    const { store } = newStore(); // time: 'server' is the default
    const year2000 = Date.UTC(2000, 0, 1);
    const before = Date.now();
    const result = await store.consume('key:server-time', at(year2000, minuteAndDay(5, 10)));
    const after = Date.now();
    expect(result.nowMs).toBeGreaterThan(before - 5000);
    expect(result.nowMs).toBeLessThan(after + 5000);
    const minute = result.windows[0]!;
    expect(minute.resetAtMs).toBe(Math.floor(result.nowMs / MINUTE_MS) * MINUTE_MS + MINUTE_MS);
    expect(minute.resetAtMs).toBeGreaterThan(result.nowMs);
    expect(result.windows[1]!.resetAtMs).toBe(Math.floor(result.nowMs / DAY_MS) * DAY_MS + DAY_MS);
  });

  it('always sets a TTL, and restores it on the next consume after it was lost', async () => {
    const { client, store } = newStore();
    const key = store.redisKey('key:ttl');
    const first = await store.consume('key:ttl', at(0, minuteAndDay(10, 100)));
    const dayEnd = first.windows[1]!.resetAtMs;
    const ttl = await client.pttl(key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(dayEnd - first.nowMs);
    await client.persist(key);
    expect(await client.pttl(key)).toBe(-1);
    const second = await store.consume('key:ttl', at(0, minuteAndDay(10, 100)));
    expect(used(second, 'minute')).toBeGreaterThanOrEqual(1); // 2, or 1 if a minute began in between
    expect(await client.pttl(key)).toBeGreaterThan(0);
    // Also on answers that write nothing: a banned key gets its TTL back too.
    const banned = newStore({ client, time: 'request' }).store;
    const bannedKey = banned.redisKey('key:banned');
    const now = Date.now();
    for (let i = 0; i < 4; i++) await banned.consume('key:banned', at(now, [{ name: 'minute', limit: 1, windowMs: MINUTE_MS }], BAN));
    await client.persist(bannedKey);
    const held = await banned.consume('key:banned', at(now + 1, [{ name: 'minute', limit: 1, windowMs: MINUTE_MS }], BAN));
    expect(outcome(held)).toBe('banned');
    const banTtl = await client.pttl(bannedKey);
    expect(banTtl).toBeGreaterThan(BAN.durationMs - 5000);
    expect(banTtl).toBeLessThanOrEqual(BAN.durationMs);
  });

  it('sends exactly one Redis command per consume (counted with MONITOR)', async () => {
    const { client, store } = newStore();
    await client.ping();
    const info = String(await client.call('CLIENT', 'INFO'));
    const address = /\baddr=(\S+)/.exec(info)?.[1];
    expect(address).toBeDefined();
    const fromStore: string[] = [];
    const insideScript: string[] = [];
    const sentinel = `sentinel-${Math.random()}`;
    let sawSentinel: () => void = () => {};
    const sentinelSeen = new Promise<void>((resolve) => (sawSentinel = resolve));
    await monitorCommands(({ source, args }) => {
      const command = String(args[0]).toLowerCase();
      if (source === address) fromStore.push(command);
      else if (source === 'lua' && insideScript.length < 100) insideScript.push(command);
      if (command === 'echo' && args[1] === sentinel) sawSentinel();
    });
    for (let i = 0; i < 5; i++) await store.consume('key:count', at(0, minuteAndDay(3, 100), BAN));
    await connect().echo(sentinel);
    await sentinelSeen;
    // The first call on a connection sends the script (EVAL); later calls send only its SHA1 (EVALSHA).
    expect(fromStore).toEqual(['eval', 'evalsha', 'evalsha', 'evalsha', 'evalsha']);
    expect(insideScript).toContain('time');
    expect(insideScript).toContain('pexpire');
  });

  it('mirrors decideConsume exactly: results, stored state and expiry, over a random run', async () => {
    const { client, store } = newStore({ time: 'request' });
    const reference = new Map<string, RateLimitState>();
    let seed = 20260101;
    const random = () => {
      // mulberry32: a small deterministic PRNG, so a failing step can be replayed
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
    const plans: RateLimitWindow[][] = [
      minuteAndDay(2, 5),
      minuteAndDay(3, 8),
      [{ name: 'minute', limit: 1, windowMs: MINUTE_MS }],
      [{ name: 'day', limit: 4, windowMs: DAY_MS }],
      [{ name: 'minute', limit: 0, windowMs: MINUTE_MS }, { name: 'hour', limit: 3, windowMs: 60 * MINUTE_MS }],
    ];
    const bans: (BanPolicy | undefined)[] = [
      BAN,
      BAN,
      undefined,
      { rejectedThreshold: 2, intervalMs: 2 * MINUTE_MS, durationMs: 3 * MINUTE_MS },
    ];
    let nowMs = T0;
    const seen: Record<string, number> = { allowed: 0, rate_limited: 0, banned: 0 };
    for (let step = 0; step < 600; step++) {
      nowMs +=
        random() < 0.03
          ? pick([45 * MINUTE_MS, DAY_MS / 2])
          : pick([0, 0, 0, 0, 0, 0, 0, 0, 1000, 1000, 1000, 7000, 20_000, MINUTE_MS, 4 * MINUTE_MS]);
      // Keep every expiry ≥ 5 s away in real time, so Redis never drops a key the reference still holds.
      if (nowMs % MINUTE_MS > 54_000) nowMs = Math.ceil(nowMs / MINUTE_MS) * MINUTE_MS;
      const keyIndex = Math.floor(random() * 3);
      const key = ['key:a', 'key:b', 'anon:c'][keyIndex]!;
      // Mostly the key's own ban policy; sometimes another one (a configuration change).
      const request = at(nowMs, pick(plans), random() < 0.9 ? bans[keyIndex] : pick(bans));
      const decision = decideConsume(reference.get(key), request);
      reference.set(key, decision.state);
      const result = await store.consume(key, request);
      expect(result, `step ${step}`).toEqual(decision.result);
      seen[outcome(result)]! += 1;
      const stored = await client.hgetall(store.redisKey(key));
      expect(stored, `state at step ${step}`).toEqual(hashOf(decision.state));
      const ttl = await client.pttl(store.redisKey(key));
      const expected = decision.expiresAtMs - nowMs;
      expect(ttl, `ttl at step ${step}`).toBeLessThanOrEqual(expected);
      expect(ttl, `ttl at step ${step}`).toBeGreaterThan(expected - 2000);
    }
    for (const count of Object.values(seen)) expect(count).toBeGreaterThan(50); // every branch was exercised
  });

  it("works behind the core engine, with the engine's clock ignored in server mode", async () => {
    const { store } = newStore();
    const limiter = createRateLimiter({ store, clock: { now: () => 0 }, ban: false });
    const principal = { keyId: 'k', accountId: 'a', plan: 'free' as const };
    const decision = await limiter.consume({ principal });
    expect(decision.allowed).toBe(true);
    expect(decision.headers['x-ratelimit-limit']).toBe('60');
    expect(decision.headers['x-ratelimit-remaining']).toBe('59');
    expect(Number(decision.headers['x-ratelimit-reset']) * 1000).toBeGreaterThan(Date.now());
  });
});

describe('redisRateLimitStore when Redis fails', () => {
  it('rejects, with the client error as cause, when Redis is unreachable', async () => {
    const client = track(new Redis({ port: await closedPort(), host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 }));
    const store = redisRateLimitStore({ client });
    const failure = await store.consume('key:x', at(T0, minuteAndDay(1, 1))).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Error);
    expect(isPetstoreError(failure) && failure.code).toBe('service_unavailable');
    expect((failure as Error).cause).toBeInstanceOf(Error);
  });

  it('rejects within timeoutMs when the client keeps waiting for an unreachable server', async () => {
    // Default ioredis options: the command sits in the offline queue while the client reconnects.
    const client = track(new Redis({ port: await closedPort(), host: '127.0.0.1' }));
    const store = redisRateLimitStore({ client, timeoutMs: 200 });
    const started = Date.now();
    const failure = await store.consume('key:x', at(T0, minuteAndDay(1, 1))).catch((error: unknown) => error);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(isPetstoreError(failure) && failure.code).toBe('service_unavailable');
    expect(((failure as Error).cause as Error).name).toBe('RedisTimeoutError');
  });

  it("turns into the engine's fail-closed 503 with Retry-After", async () => {
    const client = track(new Redis({ port: await closedPort(), host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 }));
    const limiter = createRateLimiter({ store: redisRateLimitStore({ client }), clock: { now: () => T0 } });
    const failure = await limiter.consume({ clientAddress: '192.0.2.1' }).catch((error: unknown) => error);
    expect(isPetstoreError(failure) && [failure.code, failure.retryAfterSeconds]).toEqual(['service_unavailable', 5]);
  });

  it('refuses invalid options and requests', async () => {
    const client = track(new Redis({ lazyConnect: true }));
    expect(() => redisRateLimitStore({ client, timeoutMs: 0 })).toThrow(TypeError);
    expect(() => redisRateLimitStore({ client, time: 'local' as never })).toThrow(TypeError);
    const store = redisRateLimitStore({ client, time: 'request' });
    await expect(store.consume('key:x', at(T0 + 0.5, minuteAndDay(1, 1)))).rejects.toThrow(TypeError);
    await expect(store.consume('key:x', at(T0, [{ name: 'm', limit: 1, windowMs: 0 }]))).rejects.toThrow(TypeError);
  });
});

/** The Redis hash the script should hold for a reference state (see rate-limit-script.ts). */
function hashOf(state: RateLimitState): Record<string, string> {
  // The signature names the windows last written, which are the state's counters, in request order.
  const hash: Record<string, string> = { sig: JSON.stringify(Object.keys(state.counters)) };
  for (const [name, counter] of Object.entries(state.counters)) {
    hash[`w:${name}:s`] = String(counter.startMs);
    hash[`w:${name}:c`] = String(counter.count);
  }
  if (state.rejected) {
    hash['rej:s'] = String(state.rejected.startMs);
    hash['rej:c'] = String(state.rejected.count);
  }
  if (state.bannedUntilMs > 0) hash.ban = String(state.bannedUntilMs);
  return hash;
}

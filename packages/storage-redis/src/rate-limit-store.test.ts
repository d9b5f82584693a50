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
import { afterEach, describe, expect, it, vi } from 'vitest';
import { redisRateLimitStore, rateLimitRedisKey, type RedisRateLimitStoreOptions } from './rate-limit-store.js';
import {
  closedPort,
  connect,
  countCommands,
  expiresAtMs,
  monitorCommands,
  readRateLimitState,
  redisNowMs,
  skipRedis,
  track,
  uniquePrefix,
  type StoredRateLimitState,
} from '../test-support/redis.js';

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
  const client = (options.client ?? connect()) as Redis; // these tests run on one server
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
    expect(await readRateLimitState(client, store.redisKey('key:plan'))).toEqual({
      names: ['day'],
      counters: { day: { startMs: Math.floor(T0 / DAY_MS) * DAY_MS, count: 5 } },
      bannedUntilMs: 0,
    });
  });

  it('keeps one value per key, in the documented layout', async () => {
    const { client, keyPrefix, store } = newStore({ time: 'request' });
    expect(store.redisKey('key:k1')).toBe(`${keyPrefix}rl:key:k1`);
    expect(rateLimitRedisKey('anon:192.0.2.1', keyPrefix)).toBe(`${keyPrefix}rl:anon:192.0.2.1`);
    const windows = minuteAndDay(1, 100);
    await store.consume('key:k1', at(T0 + 5, windows, BAN));
    await store.consume('key:k1', at(T0 + 6, windows, BAN));
    expect(await readRateLimitState(client, store.redisKey('key:k1'))).toEqual({
      names: ['minute', 'day'],
      counters: { minute: { startMs: T0, count: 1 }, day: { startMs: T0, count: 1 } },
      rejected: { startMs: T0, count: 1 },
      bannedUntilMs: 0,
    });
    // Byte for byte: n, rejection start and count, ban end, the starts, the counts, then the names.
    const packed = Buffer.alloc(1 + 8 * 7);
    packed.writeUInt8(2, 0);
    [T0, 1, 0, T0, T0, 1, 1].forEach((number, i) => packed.writeDoubleLE(number, 1 + 8 * i));
    expect(await client.getBuffer(store.redisKey('key:k1'))).toEqual(Buffer.concat([packed, Buffer.from('["minute","day"]')]));
    await store.consume('key:k1', at(T0 + 7, windows, BAN));
    await store.consume('key:k1', at(T0 + 8, windows, BAN));
    expect(await readRateLimitState(client, store.redisKey('key:k1'))).toEqual({
      names: ['minute', 'day'],
      counters: { minute: { startMs: T0, count: 1 }, day: { startMs: T0, count: 1 } },
      bannedUntilMs: T0 + 8 + BAN.durationMs,
    });
    expect(await client.keys(`${keyPrefix}*`)).toEqual([`${keyPrefix}rl:key:k1`]);
  });

  it('decides on Redis time in server mode, whatever nowMs the caller sends', async () => {
    const { client, store } = newStore(); // time: 'server' is the default
    const year2000 = Date.UTC(2000, 0, 1);
    const before = await redisNowMs(client);
    const result = await store.consume('key:server-time', at(year2000, minuteAndDay(5, 10)));
    const after = await redisNowMs(client);
    expect(result.nowMs).toBeGreaterThanOrEqual(before);
    expect(result.nowMs).toBeLessThanOrEqual(after);
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
    const banned = newStore({ client, time: 'request', blockCache: false }).store; // the script itself
    const bannedKey = banned.redisKey('key:banned');
    const now = Date.now();
    for (let i = 0; i < 4; i++) await banned.consume('key:banned', at(now, [{ name: 'minute', limit: 1, windowMs: MINUTE_MS }], BAN));
    await client.persist(bannedKey);
    const before = await redisNowMs(client);
    const held = await banned.consume('key:banned', at(now + 1, [{ name: 'minute', limit: 1, windowMs: MINUTE_MS }], BAN));
    const after = await redisNowMs(client);
    expect(outcome(held)).toBe('banned');
    // PEXPIRE to the ban's end: durationMs - 1 after the request's time (now + 1), set on Redis's clock.
    const banExpiry = await expiresAtMs(client, bannedKey);
    expect(banExpiry).toBeGreaterThanOrEqual(before + BAN.durationMs - 1);
    expect(banExpiry).toBeLessThanOrEqual(after + BAN.durationMs - 1);
  });

  it('sends exactly one Redis command per consume made alone (counted with MONITOR)', async () => {
    const { client, store } = newStore();
    const redisKey = store.redisKey('key:count');
    const seen = await watchCommands(client, [redisKey]);
    for (let i = 0; i < 5; i++) await store.consume('key:count', at(0, minuteAndDay(3, 100), BAN));
    await seen.settled();
    // The first call on a connection sends the script (EVAL); later calls send only its SHA1 (EVALSHA).
    expect(seen.fromClient.map(([command]) => command)).toEqual(['eval', 'evalsha', 'evalsha', 'evalsha', 'evalsha']);
    // Inside the script, each consume makes three calls: TIME, GET and one SET with the expiry.
    expect(seen.insideScript.map(([command]) => command)).toEqual(['time', 'get', 'set', 'time', 'get', 'set', 'time', 'get', 'set', 'time', 'get', 'set', 'time', 'get', 'set']);
  });

  it('mirrors decideConsume exactly: results, stored state and expiry, over a random run', async () => {
    // Without the block cache, so every step runs the script (the cache has its own random run below).
    const { client, store } = newStore({ time: 'request', blockCache: false });
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
      const stored = await readRateLimitState(client, store.redisKey(key));
      expect(stored, `state at step ${step}`).toEqual(storedOf(decision.state));
      const ttl = await client.pttl(store.redisKey(key));
      const expected = decision.expiresAtMs - nowMs;
      expect(ttl, `ttl at step ${step}`).toBeLessThanOrEqual(expected);
      expect(ttl, `ttl at step ${step}`).toBeGreaterThan(expected - 2000);
    }
    for (const count of Object.values(seen)) expect(count).toBeGreaterThan(50); // every branch was exercised
  });

  it('decides the consumes started in one turn in one call, each exactly as if it came alone, over a random run', async () => {
    // Groups of parallel consumes (one script call each): mixed keys, policies, times and repeats of a key.
    const { client, store } = newStore({ time: 'request', blockCache: false });
    const commands = await countCommands(client);
    const reference = new Map<string, RateLimitState>();
    let seed = 99;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const plans = [minuteAndDay(3, 7), [{ name: 'minute', limit: 2, windowMs: MINUTE_MS }], minuteAndDay(5, 9)];
    const bans = [BAN, undefined, { rejectedThreshold: 2, intervalMs: MINUTE_MS, durationMs: 2 * MINUTE_MS }];
    let nowMs = T0;
    let groups = 0;
    const seen: Record<string, number> = { allowed: 0, rate_limited: 0, banned: 0 };
    for (let group = 0; group < 120; group++) {
      nowMs += [0, 1000, 7000, 20_000, MINUTE_MS, 3 * MINUTE_MS][Math.floor(random() * 6)]!;
      if (nowMs % MINUTE_MS > 50_000) nowMs = Math.ceil(nowMs / MINUTE_MS) * MINUTE_MS;
      const size = 1 + Math.floor(random() * 12);
      const requests = Array.from({ length: size }, (_, i) => {
        const keyIndex = Math.floor(random() * 4);
        const key = ['key:a', 'key:b', 'key:c', 'anon:d'][keyIndex]!;
        const policy = random() < 0.9 ? keyIndex % 3 : Math.floor(random() * 3);
        // Consumes of one turn may carry different times (the engine reads its clock per request).
        return { key, request: at(nowMs + i, plans[policy]!, bans[policy]) };
      });
      const results = await Promise.all(requests.map(({ key, request }) => store.consume(key, request)));
      groups += 1;
      requests.forEach(({ key, request }, i) => {
        const decision = decideConsume(reference.get(key), request);
        reference.set(key, decision.state);
        expect(results[i], `group ${group}, consume ${i}`).toEqual(decision.result);
        seen[outcome(decision.result)]! += 1;
      });
      for (const key of new Set(requests.map(({ key }) => key))) {
        expect(await readRateLimitState(client, store.redisKey(key)), `state of ${key} after group ${group}`).toEqual(storedOf(reference.get(key)!));
      }
    }
    for (const count of Object.values(seen)) expect(count).toBeGreaterThan(30); // every branch was exercised
    // One script call per group, plus the state reads of this test.
    const reads = commands.count - groups;
    expect(reads).toBeLessThan(5 * groups);
    expect(reads).toBeGreaterThanOrEqual(groups);
  });

  it('sends one command for the consumes of one turn: one TIME, and one GET and one SET per key (counted with MONITOR)', async () => {
    const { client, store } = newStore();
    const keys = ['key:one', 'key:two'].map((key) => store.redisKey(key));
    const seen = await watchCommands(client, keys);
    const windows = minuteAndDay(3, 100);
    const results = await Promise.all(['key:one', 'key:two', 'key:one', 'key:one', 'key:one', 'key:two'].map((key) => store.consume(key, at(0, windows, BAN))));
    expect(results.map(outcome)).toEqual(['allowed', 'allowed', 'allowed', 'allowed', 'rate_limited', 'allowed']);
    expect(results.map((result) => used(result, 'minute'))).toEqual([1, 1, 2, 3, 3, 2]);
    await seen.settled();
    expect(seen.fromClient.map(([command, , numberOfKeys]) => `${command} ${numberOfKeys}`)).toEqual(['eval 6']);
    expect(seen.insideScript.map(([command, key]) => (command === 'time' ? 'time' : `${command} ${keys.indexOf(key as string)}`))).toEqual([
      'time',
      'get 0',
      'get 1',
      'set 0',
      'set 1',
    ]);
  });

  it('holds at most 64 consumes in one command', async () => {
    const { client, store } = newStore({ time: 'request' });
    const commands = await countCommands(client);
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => store.consume(`key:${i % 7}`, at(T0, minuteAndDay(1000, 1000)))));
    expect(results.every((result) => result.allowed)).toBe(true);
    expect(commands.count).toBe(4); // 64 + 64 + 64 + 8
    expect(results.filter((result) => used(result, 'minute') === 1)).toHaveLength(7);
  });

  it('fails only the consume whose key holds another type of value, and writes nothing to that key', async () => {
    const { client, store } = newStore({ time: 'request' });
    await client.hset(store.redisKey('key:foreign'), 'field', 'value');
    const [good, bad, alsoGood] = await Promise.allSettled([
      store.consume('key:fine', at(T0, minuteAndDay(5, 10))),
      store.consume('key:foreign', at(T0, minuteAndDay(5, 10))),
      store.consume('key:fine', at(T0 + 1, minuteAndDay(5, 10))),
    ]);
    expect(good.status === 'fulfilled' && used(good.value, 'minute')).toBe(1);
    expect(alsoGood.status === 'fulfilled' && used(alsoGood.value, 'minute')).toBe(2);
    expect(bad.status).toBe('rejected');
    const failure = (bad as PromiseRejectedResult).reason as Error;
    expect(isPetstoreError(failure)).toBe(false); // a configuration fault, not an outage
    expect(String((failure.cause as Error).message)).toMatch(/^WRONGTYPE/);
    expect(await client.hgetall(store.redisKey('key:foreign'))).toEqual({ field: 'value' });
    expect(await client.pttl(store.redisKey('key:foreign'))).toBe(-1);
  });

  it("works behind the core engine, with the engine's clock ignored in server mode", async () => {
    const { client, store } = newStore();
    const limiter = createRateLimiter({ store, clock: { now: () => 0 }, ban: false });
    const principal = { keyId: 'k', accountId: 'a', plan: 'free' as const };
    const before = await redisNowMs(client);
    const decision = await limiter.consume({ principal });
    const after = await redisNowMs(client);
    expect(decision.allowed).toBe(true);
    expect(decision.headers['x-ratelimit-limit']).toBe('60');
    expect(decision.headers['x-ratelimit-remaining']).toBe('59');
    // The end of the minute Redis decided in (not of the engine's minute 0), in whole seconds.
    const resetMs = Number(decision.headers['x-ratelimit-reset']) * 1000;
    expect(resetMs).toBeGreaterThan(before);
    expect(resetMs).toBeLessThanOrEqual(Math.floor(after / MINUTE_MS) * MINUTE_MS + MINUTE_MS);
  });
});

/**
 * What Redis runs from now on, seen with MONITOR: the commands `client` sends (name in lower case, then its
 * arguments), and the calls scripts make on `keys` or to TIME (other test files' scripts run on this server
 * too; TIME only this file's server-time stores call). `settled()` waits until MONITOR has shown everything
 * sent before it.
 */
async function watchCommands(client: Redis, keys: string[]) {
  await client.ping();
  const address = /\baddr=(\S+)/.exec(String(await client.call('CLIENT', 'INFO')))?.[1];
  expect(address).toBeDefined();
  const fromClient: string[][] = [];
  const insideScript: string[][] = [];
  const sentinel = `sentinel-${Math.random()}`;
  let sawSentinel: () => void = () => {};
  const sentinelSeen = new Promise<void>((resolve) => (sawSentinel = resolve));
  await monitorCommands(({ source, args }) => {
    const call = [String(args[0]).toLowerCase(), ...args.slice(1)];
    const [command, first] = call;
    if (source === address) fromClient.push(call);
    else if (source === 'lua' && (command === 'time' || keys.includes(first as string)) && insideScript.length < 100) insideScript.push(call);
    if (command === 'echo' && first === sentinel) sawSentinel();
  });
  return {
    fromClient,
    insideScript,
    async settled() {
      await connect().echo(sentinel);
      await sentinelSeen;
    },
  };
}

describe.skipIf(skipRedis)('redisRateLimitStore block cache', () => {
  const perMinute = (limit: number): RateLimitWindow[] => Object.freeze([Object.freeze({ name: 'minute', limit, windowMs: MINUTE_MS })]) as RateLimitWindow[];

  it('answers a banned key from memory: 10,000 requests cost Redis one call, with the answers Redis gives', async () => {
    const { client, keyPrefix, store } = newStore(); // Redis time, as in production
    const windows = perMinute(1);
    const ban = Object.freeze({ ...BAN });
    let last = await store.consume('key:flood', at(0, windows, ban));
    while (outcome(last) !== 'banned') last = await store.consume('key:flood', at(0, windows, ban));
    const banned = last as Extract<ConsumeResult, { reason: 'banned' }>;
    const commands = await countCommands(client);
    const flood = await Promise.all(Array.from({ length: 10_000 }, () => store.consume('key:flood', at(0, windows, ban))));
    expect(commands.count).toBeLessThanOrEqual(1);
    expect(new Set(flood.map(outcome))).toEqual(new Set(['banned']));
    expect(new Set(flood.map((result) => (result as typeof banned).bannedUntilMs))).toEqual(new Set([banned.bannedUntilMs]));
    for (const result of flood) expect(result.nowMs).toBeGreaterThanOrEqual(banned.nowMs - 5);
    // What Redis itself answers for the key is the same ban.
    const fromRedis = await newStore({ client, keyPrefix, blockCache: false }).store.consume('key:flood', at(0, windows, ban));
    expect(fromRedis).toMatchObject({ allowed: false, reason: 'banned', bannedUntilMs: banned.bannedUntilMs });
  });

  it('answers a rate-limited key without a ban policy from memory until its window resets, with Reset unchanged', async () => {
    const { client, store } = newStore({ time: 'request' });
    const windows = perMinute(2);
    const commands = await countCommands(client);
    await store.consume('key:limited', at(T0, windows));
    await store.consume('key:limited', at(T0 + 1, windows));
    const first = await store.consume('key:limited', at(T0 + 2, windows));
    expect(outcome(first)).toBe('rate_limited');
    expect(commands.count).toBe(3);
    const later = await store.consume('key:limited', at(T0 + 30_000, windows));
    expect(commands.count).toBe(3); // from memory
    expect(later).toEqual({ ...first, nowMs: T0 + 30_000 });
    expect(later.windows[0]!.resetAtMs).toBe(T0 + MINUTE_MS);
    const next = await store.consume('key:limited', at(T0 + MINUTE_MS, windows));
    expect(commands.count).toBe(4); // the window reset: Redis decides again
    expect(outcome(next)).toBe('allowed');
  });

  it('sends every rejection to Redis while a ban policy counts them, until the ban starts', async () => {
    const { client, store } = newStore({ time: 'request' });
    const windows = perMinute(1);
    const commands = await countCommands(client);
    const outcomes: string[] = [];
    for (let i = 0; i < 10; i++) outcomes.push(outcome(await store.consume('key:counted', at(T0 + i, windows, BAN))));
    expect(outcomes).toEqual(['allowed', 'rate_limited', 'rate_limited', 'banned', 'banned', 'banned', 'banned', 'banned', 'banned', 'banned']);
    expect(commands.count).toBe(4); // 1 admitted + 3 rejections (the 3rd starts the ban); the ban is then known
  });

  it('gives exactly the answers of a store without it, over a random run', async () => {
    const client = connect();
    const cached = newStore({ client, time: 'request' }).store;
    const direct = newStore({ client, time: 'request', blockCache: false }).store;
    const commands = await countCommands(client);
    let seed = 7;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const plans = [perMinute(2), Object.freeze(minuteAndDay(3, 6).map((window) => Object.freeze(window))) as RateLimitWindow[]];
    const bans = [undefined, Object.freeze({ rejectedThreshold: 2, intervalMs: MINUTE_MS, durationMs: 2 * MINUTE_MS })];
    let nowMs = T0;
    let steps = 0;
    for (let step = 0; step < 400; step++) {
      nowMs += [0, 0, 0, 0, 0, 1000, 5000, 20_000, MINUTE_MS][Math.floor(random() * 9)]!;
      const index = Math.floor(random() * 3);
      const key = `key:${index}`;
      // Mostly the key's own policy (key:2 has a ban policy); sometimes another (a plan change).
      const own = random() < 0.9;
      const request = at(nowMs, plans[own ? index % 2 : Math.floor(random() * 2)]!, bans[own ? Number(index === 2) : Math.floor(random() * 2)]);
      const expected = await direct.consume(key, request);
      expect(await cached.consume(key, request), `step ${step}`).toEqual(expected);
      steps += 1;
    }
    // The direct store sent one command per step; the cached one answered many steps from memory.
    const fromMemory = 2 * steps - commands.count;
    expect(fromMemory).toBeGreaterThanOrEqual(40);
  });

  it('is bounded by maxKeys, and off with false', async () => {
    const { client, store } = newStore({ time: 'request', blockCache: { maxKeys: 2 } });
    const windows = perMinute(0); // every request is rate limited
    for (const key of ['key:a', 'key:b', 'key:c']) await store.consume(key, at(T0, windows));
    const commands = await countCommands(client);
    await store.consume('key:c', at(T0 + 1, windows));
    await store.consume('key:b', at(T0 + 1, windows));
    expect(commands.count).toBe(0);
    await store.consume('key:a', at(T0 + 1, windows)); // evicted: the least recently used of three
    expect(commands.count).toBe(1);
    const off = newStore({ client, time: 'request', blockCache: false }).store;
    for (let i = 0; i < 3; i++) await off.consume('key:a', at(T0 + 2, windows));
    expect(commands.count).toBe(4);
    expect(() => newStore({ client, blockCache: { maxKeys: 0 } })).toThrow(TypeError);
    expect(() => newStore({ client, blockCache: true as never })).toThrow(TypeError);
  });
});

describe('redisRateLimitStore when Redis fails', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('rejects, with the client error as cause, when Redis is unreachable', async () => {
    const client = track(new Redis({ port: await closedPort(), host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 }));
    const store = redisRateLimitStore({ client });
    const failure = await store.consume('key:x', at(T0, minuteAndDay(1, 1))).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(Error);
    expect(isPetstoreError(failure) && failure.code).toBe('service_unavailable');
    expect((failure as Error).cause).toBeInstanceOf(Error);
  });

  it('rejects at callTimeoutMs when the client keeps waiting for an unreachable server', async () => {
    // Default ioredis options: the command sits in the offline queue while the client reconnects (20 retries per
    // command). The store's deadline, on fake timers, answers first: exactly when callTimeoutMs has passed.
    const port = await closedPort();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const client = track(new Redis({ port, host: '127.0.0.1' }));
    const store = redisRateLimitStore({ client, callTimeoutMs: 200 });
    const settled = vi.fn();
    const failure = store.consume('key:x', at(T0, minuteAndDay(1, 1))).catch((error: unknown) => error).finally(settled);
    await new Promise((resolve) => setImmediate(resolve)); // the batch goes out at the end of this turn
    await vi.advanceTimersByTimeAsync(199);
    expect(settled).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(isPetstoreError(await failure) && (await failure as Error & { code: string }).code).toBe('service_unavailable');
    expect(((await failure) as Error).cause).toMatchObject({ name: 'RedisTimeoutError', callTimeoutMs: 200 });
  });

  it("turns into the engine's fail-closed 503 with Retry-After", async () => {
    const client = track(new Redis({ port: await closedPort(), host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 }));
    const limiter = createRateLimiter({ store: redisRateLimitStore({ client }), clock: { now: () => T0 } });
    const failure = await limiter.consume({ clientAddress: '192.0.2.1' }).catch((error: unknown) => error);
    expect(isPetstoreError(failure) && [failure.code, failure.retryAfterSeconds]).toEqual(['service_unavailable', 5]);
  });

  it('refuses invalid options and requests', async () => {
    const client = track(new Redis({ lazyConnect: true }));
    expect(() => redisRateLimitStore({ client, callTimeoutMs: 0 })).toThrow(/^callTimeoutMs must be a whole number of milliseconds >= 1, got 0$/);
    expect(() => redisRateLimitStore({ client, keyPrefix: 7 as never })).toThrow(/^keyPrefix must be a string/);
    expect(() => redisRateLimitStore({ client, time: 'local' as never })).toThrow(/^time must be/);
    const store = redisRateLimitStore({ client, time: 'request' });
    await expect(store.consume('key:x', at(T0 + 0.5, minuteAndDay(1, 1)))).rejects.toThrow(TypeError);
    await expect(store.consume('key:x', at(T0, [{ name: 'm', limit: 1, windowMs: 0 }]))).rejects.toThrow(TypeError);
  });
});

/** The state the script should hold for a reference state (see rateLimitRedisKey). */
function storedOf(state: RateLimitState): StoredRateLimitState {
  // The names are the windows last written, which are the state's counters, in request order.
  const stored: StoredRateLimitState = {
    names: Object.keys(state.counters),
    counters: Object.fromEntries(Object.entries(state.counters).map(([name, counter]) => [name, { startMs: counter.startMs, count: counter.count }])),
    bannedUntilMs: state.bannedUntilMs,
  };
  if (state.rejected) stored.rejected = { startMs: state.rejected.startMs, count: state.rejected.count };
  return stored;
}

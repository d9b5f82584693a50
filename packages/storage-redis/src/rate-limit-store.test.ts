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
import { redisRateLimitStore, rateLimitRedisKey, type RedisRateLimitStore, type RedisRateLimitStoreOptions } from './rate-limit-store.js';
import {
  closedPort,
  connect,
  countCommands,
  expiresAtMs,
  monitorCommands,
  readRateLimitState,
  redisNowMs,
  skipRedis,
  GUARD_CALL_TIMEOUT_MS,
  track,
  uniquePrefix,
} from '../test-support/redis.js';
import { isRedisServerInstalled, startRedisServer } from './testing/redis-server.js';

const T0 = Date.UTC(2026, 0, 1);
const BAN: BanPolicy = { rejectedThreshold: 3, intervalMs: MINUTE_MS, durationMs: 10 * MINUTE_MS };
const minuteAndDay = (perMinute: number, perDay: number): RateLimitWindow[] => [
  { name: 'minute', limit: perMinute, windowMs: MINUTE_MS },
  { name: 'day', limit: perDay, windowMs: DAY_MS },
];
const at = (nowMs: number, windows: RateLimitWindow[], ban?: BanPolicy, more: { cost?: number; banSubject?: string } = {}): ConsumeRequest => ({
  windows,
  nowMs,
  ban,
  cost: more.cost ?? 1,
  banSubject: more.banSubject ?? 'k1',
});
const used = (result: ConsumeResult, name: string) => result.windows.find((window) => window.name === name)?.used;
const outcome = (result: ConsumeResult) => (result.allowed ? 'allowed' : result.reason);

/**
 * `promise`, or a failure naming `what` once `ms` of real time passed: a guard that turns a hand-off that never
 * settles into a failure within seconds instead of a hung run (not a measurement: a settled round takes far less).
 */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

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

  it('charges a cost to every window or to none: a cost above what is left is refused and charges nothing', async () => {
    const { client, store } = newStore({ time: 'request' });
    const windows = minuteAndDay(10, 12);
    expect(used(await store.consume('account:c', at(T0, windows, undefined, { cost: 7 })), 'minute')).toBe(7);
    const refused = await store.consume('account:c', at(T0 + 1, windows, undefined, { cost: 4 }));
    expect(refused).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(refused.windows.map((window) => [window.used, window.remaining])).toEqual([
      [7, 3],
      [7, 5],
    ]);
    expect(outcome(await store.consume('account:c', at(T0 + 2, windows, undefined, { cost: 3 })))).toBe('allowed');
    // The next minute has room for 5, the day only for 2.
    const dayShort = await store.consume('account:c', at(T0 + MINUTE_MS, windows, undefined, { cost: 3 }));
    expect(dayShort).toMatchObject({ allowed: false, reason: 'rate_limited' });
    expect(used(dayShort, 'minute')).toBe(0);
    expect(used(dayShort, 'day')).toBe(10);
    expect((await readRateLimitState(client, store.redisKey('account:c')))?.counters).toEqual({
      minute: { startMs: T0 + MINUTE_MS, count: 0, limit: 10, windowMs: MINUTE_MS },
      day: { startMs: T0, count: 10, limit: 12, windowMs: DAY_MS },
    });
  });

  it('bans the key that earned the ban, not the other keys of its account, which share its windows', async () => {
    const { client, store } = newStore({ time: 'request' });
    const windows = minuteAndDay(2, 100);
    const as = (banSubject: string, nowMs: number) => store.consume('account:shared', at(nowMs, windows, BAN, { banSubject }));
    expect(outcome(await as('k1', T0))).toBe('allowed');
    expect(outcome(await as('k2', T0 + 1))).toBe('allowed');
    expect([await as('k1', T0 + 2), await as('k1', T0 + 3), await as('k2', T0 + 4), await as('k1', T0 + 5)].map(outcome)).toEqual([
      'rate_limited',
      'rate_limited',
      'rate_limited',
      'banned',
    ]);
    expect(outcome(await as('k1', T0 + MINUTE_MS))).toBe('banned');
    const other = await as('k2', T0 + MINUTE_MS);
    expect(outcome(other)).toBe('allowed'); // a new minute: k2 is charged, k1 still banned
    expect(used(other, 'day')).toBe(3);
    expect(await readRateLimitState(client, store.redisKey('account:shared'))).toEqual({
      counters: {
        minute: { startMs: T0 + MINUTE_MS, count: 1, limit: 2, windowMs: MINUTE_MS },
        day: { startMs: T0, count: 3, limit: 100, windowMs: DAY_MS },
      },
      // k2's rejection of the first minute has ended (interval of a minute) and is gone; k1's ban stays.
      bans: { k1: { rejected: undefined, bannedUntilMs: T0 + 5 + BAN.durationMs } },
    });
  });

  it('keeps usage per window name across a plan change (when the length is the same) and drops windows no longer requested', async () => {
    const { client, store } = newStore({ time: 'request' });
    for (let i = 0; i < 3; i++) await store.consume('account:plan', at(T0, minuteAndDay(5, 10)));
    const upgraded = await store.consume('account:plan', at(T0 + 1, minuteAndDay(50, 100)));
    expect(upgraded.windows.map((window) => [window.used, window.remaining])).toEqual([
      [4, 46],
      [4, 96],
    ]);
    // A "minute" that is now an hour long counts afresh; the day keeps its count; "minute" of before is gone.
    await store.consume('account:plan', at(T0 + 2, [{ name: 'day', limit: 100, windowMs: DAY_MS }, { name: 'minute', limit: 9, windowMs: 60 * MINUTE_MS }]));
    expect(await readRateLimitState(client, store.redisKey('account:plan'))).toEqual({
      counters: {
        day: { startMs: T0, count: 5, limit: 100, windowMs: DAY_MS },
        minute: { startMs: T0, count: 1, limit: 9, windowMs: 60 * MINUTE_MS },
      },
      bans: {},
    });
    await store.consume('account:plan', at(T0 + 3, [{ name: 'day', limit: 100, windowMs: DAY_MS }]));
    expect(await readRateLimitState(client, store.redisKey('account:plan'))).toEqual({
      counters: { day: { startMs: T0, count: 6, limit: 100, windowMs: DAY_MS } },
      bans: {},
    });
  });

  it('keeps one value per record, in the documented layout', async () => {
    const { client, keyPrefix, store } = newStore({ time: 'request' });
    expect(store.redisKey('account:a1')).toBe(`${keyPrefix}rl:account:a1`);
    expect(rateLimitRedisKey('anon:192.0.2.1', keyPrefix)).toBe(`${keyPrefix}rl:anon:192.0.2.1`);
    const windows = minuteAndDay(1, 100);
    await store.consume('account:a1', at(T0 + 5, windows, BAN, { cost: 1, banSubject: 'k1' }));
    await store.consume('account:a1', at(T0 + 6, windows, BAN, { banSubject: 'k1' }));
    await store.consume('account:a1', at(T0 + 7, windows, BAN, { banSubject: 'kë2' }));
    // Byte for byte: n, the signature's length, the starts, the counts, the signature, then per ban subject its
    // rejection start and count, its ban end, the subject's length and the subject.
    const signature = Buffer.from('[["minute",1,60000],["day",100,86400000]]');
    const head = Buffer.alloc(5 + 8 * 4);
    head.writeUInt8(2, 0);
    head.writeUInt32LE(signature.length, 1);
    [T0, T0, 1, 1].forEach((number, i) => head.writeDoubleLE(number, 5 + 8 * i));
    const subject = (name: string, rejectedStartMs: number, rejectedCount: number, bannedUntilMs: number) => {
      const bytes = Buffer.from(name, 'utf8');
      const entry = Buffer.alloc(28);
      [rejectedStartMs, rejectedCount, bannedUntilMs].forEach((number, i) => entry.writeDoubleLE(number, 8 * i));
      entry.writeUInt32LE(bytes.length, 24);
      return Buffer.concat([entry, bytes]);
    };
    expect(await client.getBuffer(store.redisKey('account:a1'))).toEqual(
      Buffer.concat([head, signature, subject('k1', T0, 1, 0), subject('kë2', T0, 1, 0)]),
    );
    await store.consume('account:a1', at(T0 + 8, windows, BAN, { banSubject: 'k1' }));
    await store.consume('account:a1', at(T0 + 9, windows, BAN, { banSubject: 'k1' }));
    expect(await readRateLimitState(client, store.redisKey('account:a1'))).toEqual({
      counters: {
        minute: { startMs: T0, count: 1, limit: 1, windowMs: MINUTE_MS },
        day: { startMs: T0, count: 1, limit: 100, windowMs: DAY_MS },
      },
      bans: {
        k1: { rejected: undefined, bannedUntilMs: T0 + 9 + BAN.durationMs },
        'kë2': { rejected: { startMs: T0, count: 1 }, bannedUntilMs: 0 },
      },
    });
    expect(await client.keys(`${keyPrefix}*`)).toEqual([`${keyPrefix}rl:account:a1`]);
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

  it('decides the consumes started in one turn in one call, each exactly as if it came alone, over a random run', async () => {
    // Groups of parallel consumes (one script call each): mixed records, subjects, policies, costs, times and
    // repeats of a record. (Runs of single consumes, peeks and resets against the model: conformance.test.ts.)
    const { client, store } = newStore({ time: 'request', blockCache: false });
    const commands = await countCommands(client);
    const reference = new Map<string, RateLimitState>();
    let seed = 99;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const plans = [minuteAndDay(6, 14), [{ name: 'minute', limit: 4, windowMs: MINUTE_MS }], minuteAndDay(9, 18)];
    const bans = [BAN, undefined, { rejectedThreshold: 2, intervalMs: MINUTE_MS, durationMs: 2 * MINUTE_MS }];
    const records = [
      { key: 'account:a', subjects: ['k1', 'k2', 'k3'] },
      { key: 'account:b', subjects: ['k4'] },
      { key: 'account:c', subjects: ['k5', 'k6'] },
      { key: 'anon:d', subjects: [''] },
    ];
    let nowMs = T0;
    let groups = 0;
    const seen: Record<string, number> = { allowed: 0, rate_limited: 0, banned: 0 };
    for (let group = 0; group < 120; group++) {
      nowMs += [0, 1000, 7000, 20_000, MINUTE_MS, 3 * MINUTE_MS][Math.floor(random() * 6)]!;
      // Keep every expiry ≥ 10 s of real time away, so Redis never drops a record the reference still holds.
      if (nowMs % MINUTE_MS > 50_000) nowMs = Math.ceil(nowMs / MINUTE_MS) * MINUTE_MS;
      const size = 1 + Math.floor(random() * 12);
      const requests = Array.from({ length: size }, (_, i) => {
        const index = Math.floor(random() * records.length);
        const { key, subjects } = records[index]!;
        const policy = random() < 0.9 ? index % 3 : Math.floor(random() * 3);
        const banSubject = subjects[Math.floor(random() * subjects.length)]!;
        const cost = [1, 1, 1, 2, 3][Math.floor(random() * 5)]!;
        // Consumes of one turn may carry different times (the engine reads its clock per request).
        return { key, request: at(nowMs + i, plans[policy]!, bans[policy], { cost, banSubject }) };
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
        expect(await readRateLimitState(client, store.redisKey(key)), `record of ${key} after group ${group}`).toEqual(reference.get(key));
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

  it('fails only the consume whose key holds a string that is not a record, and leaves that string alone', async () => {
    const { client, store } = newStore({ time: 'request' });
    // Another program's string, and a record cut short.
    await client.set(store.redisKey('account:text'), 'hello');
    await store.consume('account:cut', at(T0, minuteAndDay(5, 10)));
    const whole = (await client.getBuffer(store.redisKey('account:cut')))!;
    await client.set(store.redisKey('account:cut'), whole.subarray(0, whole.length - 1));
    const [text, cut, fine] = await Promise.allSettled([
      store.consume('account:text', at(T0, minuteAndDay(5, 10))),
      store.consume('account:cut', at(T0, minuteAndDay(5, 10))),
      store.consume('account:fine', at(T0, minuteAndDay(5, 10))),
    ]);
    expect(fine.status === 'fulfilled' && used(fine.value, 'minute')).toBe(1);
    for (const failed of [text, cut]) {
      expect(failed.status).toBe('rejected');
      const failure = (failed as PromiseRejectedResult).reason as Error;
      expect(isPetstoreError(failure)).toBe(false); // a configuration fault, not an outage
      expect(failure.cause).toMatchObject({ name: 'NotARecordError' });
    }
    expect(await client.get(store.redisKey('account:text'))).toBe('hello');
    expect(await client.getBuffer(store.redisKey('account:cut'))).toEqual(whole.subarray(0, whole.length - 1));
    await expect(store.peek('account:text', T0)).rejects.toMatchObject({ cause: { name: 'NotARecordError' } });
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
  // MONITOR logs a script call, then the calls its script makes (source `lua`, no client address): Redis runs one
  // script at a time, so the `lua` lines after one of this client's calls are its script's, and a TIME of another
  // test's script on the shared server is not counted.
  let inOwnScript = false;
  await monitorCommands(({ source, args }) => {
    const call = [String(args[0]).toLowerCase(), ...args.slice(1)];
    const [command, first] = call;
    if (source !== 'lua') inOwnScript = source === address;
    if (source === address) fromClient.push(call);
    else if (inOwnScript && (command === 'time' || keys.includes(first as string)) && insideScript.length < 100) insideScript.push(call);
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

describe.skipIf(skipRedis)('redisRateLimitStore peek and reset', () => {
  it('peeks with one GET, charging and changing nothing: windows as of now, the live bans', async () => {
    const { client, store } = newStore({ time: 'request' });
    const key = store.redisKey('account:p');
    const windows = minuteAndDay(2, 10);
    for (const banSubject of ['k1', 'k1', 'k2', 'k2', 'k2', 'k2']) await store.consume('account:p', at(T0 + 10, windows, BAN, { banSubject }));
    const before = await client.getBuffer(key);
    const ttlBefore = await expiresAtMs(client, key);
    const seen = await watchCommands(client, [key]);
    const snapshot = await store.peek('account:p', T0 + 20);
    await seen.settled();
    expect(seen.fromClient).toEqual([['get', key]]);
    expect(snapshot).toEqual({
      nowMs: T0 + 20,
      windows: [
        { name: 'minute', limit: 2, windowMs: MINUTE_MS, used: 2, remaining: 0, resetAtMs: T0 + MINUTE_MS },
        { name: 'day', limit: 10, windowMs: DAY_MS, used: 2, remaining: 8, resetAtMs: T0 + DAY_MS },
      ],
      bans: [{ subject: 'k2', bannedUntilMs: T0 + 10 + BAN.durationMs }],
    });
    expect(await client.getBuffer(key)).toEqual(before);
    expect(await expiresAtMs(client, key)).toBe(ttlBefore);
    // Later: the minute has reset, the ban still runs; after the ban and the day, nothing is live.
    expect((await store.peek('account:p', T0 + MINUTE_MS)).windows.map((window) => window.used)).toEqual([0, 2]);
    expect(await store.peek('account:p', T0 + DAY_MS)).toEqual({ nowMs: T0 + DAY_MS, windows: [], bans: [] });
    expect(await store.peek('account:none', T0)).toEqual({ nowMs: T0, windows: [], bans: [] });
  });

  it('peeks at Redis time in server mode, in one call that reads TIME and the key', async () => {
    const { client, store } = newStore();
    const key = store.redisKey('account:server');
    const consumed = await store.consume('account:server', at(0, minuteAndDay(5, 10), undefined, { cost: 2 }));
    const seen = await watchCommands(client, [key]);
    const before = await redisNowMs(client);
    const snapshot = await store.peek('account:server', Date.UTC(2000, 0, 1));
    const after = await redisNowMs(client);
    await seen.settled();
    // One call of the peek script (EVAL: its first use on this connection); TIME is this test's redisNowMs.
    expect(seen.fromClient.map(([command]) => command).filter((command) => command !== 'time')).toEqual(['eval']);
    expect(seen.insideScript.map(([command]) => command)).toEqual(['time', 'get']);
    expect(snapshot.nowMs).toBeGreaterThanOrEqual(before);
    expect(snapshot.nowMs).toBeLessThanOrEqual(after);
    // The same windows as the consume left them (2 used), unless a minute began in between.
    const minute = snapshot.windows[0]!;
    expect(minute.resetAtMs).toBe(Math.floor(snapshot.nowMs / MINUTE_MS) * MINUTE_MS + MINUTE_MS);
    expect(minute.used).toBe(minute.resetAtMs === consumed.windows[0]!.resetAtMs ? 2 : 0);
    expect(snapshot.windows[1]!.used).toBe(snapshot.windows[1]!.resetAtMs === consumed.windows[1]!.resetAtMs ? 2 : 0);
  });

  it('resets with one DEL: the windows and every ban of the record, nothing of other records', async () => {
    const { client, store } = newStore({ time: 'request', blockCache: false });
    const windows = minuteAndDay(1, 10);
    for (const banSubject of ['k1', 'k1', 'k1', 'k1', 'k2', 'k2', 'k2']) await store.consume('account:r', at(T0, windows, BAN, { banSubject }));
    await store.consume('account:other', at(T0, windows, BAN));
    expect((await store.peek('account:r', T0)).bans.map((ban) => ban.subject)).toEqual(['k1', 'k2']);
    const seen = await watchCommands(client, [store.redisKey('account:r')]);
    await store.reset('account:r');
    await seen.settled();
    expect(seen.fromClient).toEqual([['del', store.redisKey('account:r')]]);
    expect(await client.exists(store.redisKey('account:r'))).toBe(0);
    expect(await store.peek('account:r', T0)).toEqual({ nowMs: T0, windows: [], bans: [] });
    // Neither key is banned any more: k1 is admitted, k2 refused for the minute k1 just used (not for a ban).
    const after = [await store.consume('account:r', at(T0 + 1, windows, BAN, { banSubject: 'k1' })), await store.consume('account:r', at(T0 + 2, windows, BAN, { banSubject: 'k2' }))];
    expect(after.map(outcome)).toEqual(['allowed', 'rate_limited']);
    expect(used(await store.consume('account:other', at(T0 + 1, windows, BAN)), 'day')).toBe(1);
    await store.reset('account:never-there'); // resolves all the same
  });
});

describe.skipIf(skipRedis)('redisRateLimitStore block cache', () => {
  const perMinute = (limit: number): RateLimitWindow[] => Object.freeze([Object.freeze({ name: 'minute', limit, windowMs: MINUTE_MS })]) as RateLimitWindow[];
  const ban = Object.freeze({ ...BAN });

  afterEach(() => {
    vi.useRealTimers();
  });

  /** Consumes as `banSubject` until `store` answers "banned" (Redis's answer, which the store then knows). */
  async function banned(store: RedisRateLimitStore, key: string, windows: RateLimitWindow[], banSubject = 'k1') {
    let last = await store.consume(key, at(0, windows, ban, { banSubject }));
    while (outcome(last) !== 'banned') last = await store.consume(key, at(0, windows, ban, { banSubject }));
    return last as Extract<ConsumeResult, { reason: 'banned' }>;
  }

  it('answers a banned key from memory and asks Redis at most once per maxAgeMs (1 s), whatever the flood', async () => {
    // Redis time, as in production; this process's clock (Date) moved by fake timers.
    vi.useFakeTimers({ toFake: ['Date'] });
    const { client, keyPrefix, store } = newStore();
    const windows = perMinute(1);
    const first = await banned(store, 'account:flood', windows);
    const commands = await countCommands(client);
    // The consumes that wait for a refresh's answer: bounded, so a hand-off that never settles fails fast.
    const flood = () => within(Promise.all(Array.from({ length: 500 }, () => store.consume('account:flood', at(0, windows, ban)))), 2000, 'a flood');
    const answers = await flood();
    expect(commands.count).toBe(0);
    // For 10 s, 500 parallel requests every 100 ms: one call per second (the others wait for its answer).
    for (let tick = 1; tick <= 100; tick++) {
      vi.advanceTimersByTime(100);
      const round = await flood();
      answers.push(...round);
      expect(commands.count, `after ${tick * 100} ms`).toBe(Math.floor(tick / 10));
      // Retry-After counts down: between two answers of Redis, nowMs moves with this process's clock.
      if (tick === 5) expect(new Set(round.map((result) => result.nowMs))).toEqual(new Set([answers[0]!.nowMs + 500]));
    }
    expect(answers).toHaveLength(50_500);
    expect(new Set(answers.map(outcome))).toEqual(new Set(['banned']));
    expect(new Set(answers.map((result) => (result as typeof first).bannedUntilMs))).toEqual(new Set([first.bannedUntilMs]));
    // What Redis itself answers for the key is the same ban.
    const fromRedis = await newStore({ client, keyPrefix, blockCache: false }).store.consume('account:flood', at(0, windows, ban));
    expect(fromRedis).toMatchObject({ allowed: false, reason: 'banned', bannedUntilMs: first.bannedUntilMs });
  });

  it('obeys a reset made on another instance within one second: banned on both, reset on one, admitted on both', async () => {
    // Redis time, as in production; this process's clock (Date), which the cache counts maxAgeMs on, moved by fake timers.
    vi.useFakeTimers({ toFake: ['Date'] });
    const keyPrefix = uniquePrefix();
    const one = newStore({ client: connect(), keyPrefix });
    const two = newStore({ client: connect(), keyPrefix });
    const windows = perMinute(2);
    await banned(one.store, 'account:lifted', windows);
    expect(outcome(await two.store.consume('account:lifted', at(0, windows, ban)))).toBe('banned'); // Redis told two
    const [callsOne, callsTwo] = [await countCommands(one.client), await countCommands(two.client)];
    for (const { store } of [one, two]) expect(outcome(await store.consume('account:lifted', at(0, windows, ban)))).toBe('banned');
    expect([callsOne.count, callsTwo.count]).toEqual([0, 0]); // both answer from memory
    // The worst case for two: the reset lands right after its last answer from Redis.
    await one.store.reset('account:lifted'); // one DEL, and instance one forgets the ban at once
    expect(outcome(await one.store.consume('account:lifted', at(0, windows, ban)))).toBe('allowed');
    expect(callsOne.count).toBe(2);
    // Instance two answers from memory for the rest of its second: at most maxAgeMs (1 s) after the reset.
    vi.advanceTimersByTime(999);
    expect(outcome(await two.store.consume('account:lifted', at(0, windows, ban)))).toBe('banned');
    expect(callsTwo.count).toBe(0);
    vi.advanceTimersByTime(1); // one second after the reset: two asks Redis, which no longer holds the ban
    expect(outcome(await two.store.consume('account:lifted', at(0, windows, ban)))).toBe('allowed');
    expect(callsTwo.count).toBe(1);
    // The two admissions were charged in Redis: a third request is refused for the minute they used, not banned.
    expect(outcome(await one.store.consume('account:lifted', at(0, windows, ban)))).toBe('rate_limited');
    expect(await one.store.peek('account:lifted', 0)).toMatchObject({ windows: [{ used: 2, remaining: 0 }], bans: [] });
  });

  it('answers a caller refused without a ban policy from memory only when its cost exceeds what is left, until the window resets', async () => {
    const { client, store } = newStore({ time: 'request' });
    const windows = perMinute(5);
    const commands = await countCommands(client);
    const consume = (nowMs: number, cost: number) => store.consume('account:costs', at(nowMs, windows, undefined, { cost }));
    expect(outcome(await consume(T0, 3))).toBe('allowed');
    const refused = await consume(T0 + 1, 3);
    expect(outcome(refused)).toBe('rate_limited');
    expect(commands.count).toBe(2);
    expect(await consume(T0 + 2, 3)).toEqual({ ...refused, nowMs: T0 + 2 }); // 2 left: from memory
    expect(await consume(T0 + 3, 4)).toEqual({ ...refused, nowMs: T0 + 3 });
    expect(commands.count).toBe(2);
    expect(outcome(await consume(T0 + 4, 2))).toBe('allowed'); // it fits: Redis decides, and charges it
    expect(commands.count).toBe(3);
    const full = await consume(T0 + 5, 1);
    expect(full.windows[0]).toMatchObject({ used: 5, remaining: 0, resetAtMs: T0 + MINUTE_MS });
    expect(await consume(T0 + 6, 1)).toEqual({ ...full, nowMs: T0 + 6 });
    expect(commands.count).toBe(4);
    // At most maxAgeMs (1 s, on the requests' clock here) from memory, then Redis is asked again.
    expect(await consume(T0 + 5 + 999, 1)).toEqual({ ...full, nowMs: T0 + 5 + 999 });
    expect(commands.count).toBe(4);
    expect(outcome(await consume(T0 + 5 + 1000, 1))).toBe('rate_limited');
    expect(commands.count).toBe(5);
    expect(outcome(await consume(T0 + MINUTE_MS, 5))).toBe('allowed'); // the window reset: Redis decides again
    expect(commands.count).toBe(6);
  });

  it('sends every rejection to Redis while a ban policy counts them, until the ban starts', async () => {
    const { client, store } = newStore({ time: 'request' });
    const windows = perMinute(1);
    const commands = await countCommands(client);
    const outcomes: string[] = [];
    for (let i = 0; i < 10; i++) outcomes.push(outcome(await store.consume('account:counted', at(T0 + i, windows, BAN))));
    expect(outcomes).toEqual(['allowed', 'rate_limited', 'rate_limited', 'banned', 'banned', 'banned', 'banned', 'banned', 'banned', 'banned']);
    expect(commands.count).toBe(4); // 1 admitted + 3 rejections (the 3rd starts the ban); the ban is then known
  });

  it('keeps the bans of one account apart: a banned key answered from memory, its account-mates by Redis', async () => {
    // Answers from memory for up to 10 minutes of the requests' clock here, so the minutes below need no refresh.
    const { client, store } = newStore({ time: 'request', blockCache: { maxAgeMs: 10 * MINUTE_MS } });
    const windows = perMinute(3);
    const consume = (banSubject: string, nowMs: number) => store.consume('account:team', at(nowMs, windows, BAN, { banSubject }));
    for (let i = 0; i < 3; i++) await consume('k1', T0); // the minute is used up
    for (let i = 0; i < 3; i++) await consume('k1', T0 + 1); // k1 is banned
    const commands = await countCommands(client);
    expect(outcome(await consume('k1', T0 + 2))).toBe('banned');
    expect(commands.count).toBe(0);
    expect(outcome(await consume('k2', T0 + 2))).toBe('rate_limited'); // k2 is not banned: Redis counts it
    expect(commands.count).toBe(1);
    // The next minute k2 is admitted; k1's answer from memory shows the windows as k2's charge left them.
    expect(outcome(await consume('k2', T0 + MINUTE_MS))).toBe('allowed');
    const fromMemory = await consume('k1', T0 + MINUTE_MS + 1);
    expect(commands.count).toBe(2);
    expect(fromMemory).toMatchObject({ reason: 'banned', windows: [{ used: 1, remaining: 2, resetAtMs: T0 + 2 * MINUTE_MS }] });
  });

  it('answers a known block from memory while Redis is unreachable, and asks again maxAgeMs later', async () => {
    const client = connect({ enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    await client.connect();
    const { store } = newStore({ client, time: 'request' });
    const windows = perMinute(1);
    for (let i = 0; i < 4; i++) await store.consume('account:outage', at(T0, windows, BAN));
    client.disconnect(); // Redis is gone for this store
    const unavailable = await store.consume('account:unknown', at(T0 + 2000, windows, BAN)).catch((error: unknown) => error);
    expect(isPetstoreError(unavailable) && unavailable.code).toBe('service_unavailable');
    // Past maxAgeMs: the refresh fails, and the ban this process knows answers.
    expect(await store.consume('account:outage', at(T0 + 2000, windows, BAN))).toMatchObject({ reason: 'banned', nowMs: T0 + 2000 });
    expect(await store.consume('account:outage', at(T0 + 2500, windows, BAN))).toMatchObject({ reason: 'banned', nowMs: T0 + 2500 });
    // Once the ban has ended there is nothing to answer from memory: the failure goes to the engine's policy.
    const after = await store.consume('account:outage', at(T0 + BAN.durationMs, windows, BAN)).catch((error: unknown) => error);
    expect(isPetstoreError(after) && after.code).toBe('service_unavailable');
  });

  it('gives exactly the answers of a store without it, over a random run (one process: costs, keys of one account, resets)', async () => {
    const client = connect();
    const cached = newStore({ client, time: 'request' }).store;
    const direct = newStore({ client, time: 'request', blockCache: false }).store;
    const commands = await countCommands(client);
    let seed = 7;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const plans = [perMinute(4), Object.freeze(minuteAndDay(6, 12).map((window) => Object.freeze(window))) as RateLimitWindow[]];
    const bans = [undefined, Object.freeze({ rejectedThreshold: 2, intervalMs: MINUTE_MS, durationMs: 2 * MINUTE_MS })];
    const records = [
      { key: 'account:a', subjects: ['k1', 'k2'] },
      { key: 'account:b', subjects: ['k3'] },
      { key: 'anon:c', subjects: [''] },
    ];
    let nowMs = T0;
    let steps = 0;
    for (let step = 0; step < 500; step++) {
      nowMs += [0, 0, 0, 0, 0, 300, 1000, 5000, 20_000, MINUTE_MS][Math.floor(random() * 10)]!;
      const index = Math.floor(random() * 3);
      const { key, subjects } = records[index]!;
      if (random() < 0.02) {
        await Promise.all([cached.reset(key), direct.reset(key)]);
        continue;
      }
      // Mostly the record's own policy (anon:c has a ban policy); sometimes another (a plan change).
      const own = random() < 0.9;
      const request = at(nowMs, plans[own ? index % 2 : Math.floor(random() * 2)]!, bans[own ? Number(index === 2) : Math.floor(random() * 2)], {
        cost: [1, 1, 2, 3][Math.floor(random() * 4)]!,
        banSubject: subjects[Math.floor(random() * subjects.length)]!,
      });
      const expected = await direct.consume(key, request);
      expect(await cached.consume(key, request), `step ${step}`).toEqual(expected);
      steps += 1;
    }
    // The direct store sent one command per step; the cached one answered many steps from memory.
    const fromMemory = 2 * steps - (commands.count - 2 * (500 - steps));
    expect(fromMemory).toBeGreaterThanOrEqual(40);
  });

  for (const algorithm of ['sliding', 'gcra'] as const) {
    it(`refuses from memory only what Redis refuses, for ${algorithm} windows whose usage drains, over a random run`, async () => {
      const client = connect();
      // Answers kept for 10 minutes: in one process only the block's own end may send a blocked caller to Redis.
      const cached = newStore({ client, time: 'request', blockCache: { maxAgeMs: 10 * MINUTE_MS } }).store;
      const direct = newStore({ client, time: 'request', blockCache: false }).store;
      const commands = await countCommands(client);
      let seed = 11;
      const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
      const frozen = (windows: RateLimitWindow[]) => Object.freeze(windows.map((window) => Object.freeze({ ...window, algorithm }))) as RateLimitWindow[];
      const plans = [frozen(perMinute(4)), frozen(minuteAndDay(6, 12))];
      const records = [
        { key: 'account:a', subjects: ['k1', 'k2'] },
        { key: 'anon:c', subjects: [''] },
      ];
      let nowMs = T0;
      for (let step = 0; step < 400; step++) {
        nowMs += [0, 0, 0, 0, 1, 250, 999, 5000, 15_000, MINUTE_MS][Math.floor(random() * 10)]!;
        const index = Math.floor(random() * 2);
        const { key, subjects } = records[index]!;
        if (random() < 0.02) {
          await Promise.all([cached.reset(key), direct.reset(key)]);
          continue;
        }
        const request = at(nowMs, plans[random() < 0.9 ? index : Math.floor(random() * 2)]!, undefined, {
          cost: [1, 1, 2, 3][Math.floor(random() * 4)]!,
          banSubject: subjects[Math.floor(random() * subjects.length)]!,
        });
        // An answer from memory keeps the usage Redis last reported (it drains meanwhile): the outcome must match.
        const expected = await direct.consume(key, request);
        expect(outcome(await cached.consume(key, request)), `step ${step}`).toBe(outcome(expected));
      }
      // Some steps were answered from memory (the direct store sends one command per consume or reset).
      expect(commands.count).toBeLessThan(2 * 400 - 40);
    });
  }

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
  });

  it('refuses a malformed blockCache', () => {
    const client = connect({ lazyConnect: true });
    expect(() => newStore({ client, blockCache: { maxKeys: 0 } })).toThrow(/^blockCache.maxKeys must be a whole number >= 1, got 0$/);
    expect(() => newStore({ client, blockCache: { maxAgeMs: 0 } })).toThrow(/^blockCache.maxAgeMs must be a whole number of ms >= 1, got 0$/);
    expect(() => newStore({ client, blockCache: { maxAgeMs: 0.5 } })).toThrow(TypeError);
    expect(() => newStore({ client, blockCache: true as never })).toThrow(/^blockCache must be/);
    expect(() => newStore({ client, blockCache: { maxAgeMs: 250 } })).not.toThrow();
  });
});

describe.skipIf(skipRedis)('redisRateLimitStore keys', () => {
  it('keeps keys with NUL, lone surrogates or U+FFFD apart (UTF-8 would turn each lone surrogate into U+FFFD)', async () => {
    const { store, client, keyPrefix } = newStore({ time: 'request', blockCache: false });
    const windows = minuteAndDay(5, 10);
    const keys = ['anon:bad\0caller', 'anon:\uD800', 'anon:\uDC00', 'anon:\uFFFD', 'anon:\uFFFDD800', 'anon:\uD83D\uDE00'];
    // One turn: one script call for all of them.
    const results = await Promise.all(keys.map((key) => store.consume(key, at(T0, windows))));
    expect(results.map(outcome)).toEqual(keys.map(() => 'allowed'));
    for (const key of keys) expect(used(await store.consume(key, at(T0, windows)), 'minute')).toBe(2);
    // Keys of well-formed text are kept as they are; the others with the unit escaped.
    expect(store.redisKey('anon:\uD83D\uDE00')).toBe(`${keyPrefix}rl:anon:\uD83D\uDE00`);
    expect(store.redisKey('anon:\uD800')).toBe(`${keyPrefix}rl:anon:\uFFFDD800`);
    expect(await client.exists(...keys.map((key) => store.redisKey(key)))).toBe(keys.length);
  });
});

describe.skipIf(skipRedis)('redisRateLimitStore batches and TTLs', () => {
  it("sets a batched key's TTL from its last consume: a minute window's consume, then an hour window's, in one call", async () => {
    const { store, client } = newStore({ time: 'request', blockCache: false });
    const minute = [{ name: 'minute', limit: 5, windowMs: MINUTE_MS }];
    const hour = [{ name: 'hour', limit: 5, windowMs: 60 * MINUTE_MS }];
    // One turn: one call, the key read once and written once, with the record the hour's consume left.
    const results = await Promise.all([store.consume('key:ttl', at(T0, minute)), store.consume('key:ttl', at(T0 + 1, hour))]);
    expect(results.map(outcome)).toEqual(['allowed', 'allowed']);
    const pttl = await client.pttl(store.redisKey('key:ttl'));
    // The record holds the hour window only, which ends an hour after T0 (minus the time the test took since).
    expect(pttl).toBeGreaterThan(59 * MINUTE_MS);
    expect(pttl).toBeLessThanOrEqual(60 * MINUTE_MS - 1);
  });
});

describe('redisRateLimitStore when Redis fails', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('rejects, with the client error as cause, when Redis is unreachable: consume, peek and reset', async () => {
    const client = track(new Redis({ port: await closedPort(), host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 }));
    for (const time of ['server', 'request'] as const) {
      const store = redisRateLimitStore({ client, time, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
      for (const call of [() => store.consume('key:x', at(T0, minuteAndDay(1, 1))), () => store.peek('key:x', T0), () => store.reset('key:x')]) {
        const failure = await call().then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(failure).toBeInstanceOf(Error);
        expect(isPetstoreError(failure) && failure.code).toBe('service_unavailable');
        expect((failure as Error).cause).toBeInstanceOf(Error);
      }
    }
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

  it.skipIf(!isRedisServerInstalled())('charges nothing for consumes answered 503 while Redis was paused, when their scripts run later', async () => {
    // A server of its own, stopped (SIGSTOP) while consumes wait for it past callTimeoutMs, then continued: their
    // scripts run then, past the deadline they carry, and must charge nothing (used units == admitted units).
    const server = await startRedisServer();
    const client = track(new Redis(server.url));
    const pid = Number(/^process_id:(\d+)/m.exec(await client.info('server'))?.[1]);
    expect(pid).toBeGreaterThan(0);
    try {
      const store = redisRateLimitStore({ client, callTimeoutMs: 100, blockCache: false });
      const windows = minuteAndDay(100, 1000);
      // Admitted, through a store on the same client with time to spare (the script loaded, the connection up:
      // on a busy machine that can take longer than 100 ms); the 100 ms store is used only while Redis is stopped.
      const patient = redisRateLimitStore({ client, callTimeoutMs: GUARD_CALL_TIMEOUT_MS, blockCache: false });
      expect((await patient.consume('anon:paused', at(T0, windows))).allowed).toBe(true);
      process.kill(pid, 'SIGSTOP');
      const first = [1, 2, 3].map(() => store.consume('anon:paused', at(T0, windows)));
      await new Promise((resolve) => setImmediate(resolve)); // a second batch, from the next turn
      const failures = await Promise.all(
        [...first, ...[1, 2].map(() => store.consume('anon:paused', at(T0, windows)))].map((call) =>
          call.then(() => expect.fail('expected the consume to fail'), (error: unknown) => error),
        ),
      );
      for (const failure of failures) {
        expect(isPetstoreError(failure) && failure.code).toBe('service_unavailable');
        expect((failure as Error).cause).toMatchObject({ name: 'RedisTimeoutError' });
      }
      process.kill(pid, 'SIGCONT');
      // Redis runs one connection's commands in order: this peek runs after the five paused scripts.
      const snapshot = await patient.peek('anon:paused', T0);
      expect(snapshot.windows.map((window) => [window.name, window.used])).toEqual([
        ['minute', 1],
        ['day', 1],
      ]);
    } finally {
      process.kill(pid, 'SIGCONT');
      await server.stop();
    }
  });

  it('sends a batch once more when Redis answers that its deadline passed while the caller still waits (clocks that disagree)', async () => {
    // This process's clock an hour behind Redis's: the first call's deadline reads as long past on Redis, which
    // charges nothing and shows its clock; the batch goes again with that offset and is decided once.
    const { store, client, keyPrefix } = newStore({ blockCache: false });
    const redisNow = await redisNowMs(client);
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(redisNow - 3_600_000);
    const results = await Promise.all([store.consume('key:skewed', at(T0, minuteAndDay(5, 5))), store.consume('key:skewed', at(T0, minuteAndDay(5, 5)))]);
    expect(results.map((result) => [outcome(result), used(result, 'minute')])).toEqual([
      ['allowed', 1],
      ['allowed', 2],
    ]);
    vi.setSystemTime(redisNow + 3_600_000); // an hour ahead: the deadline is late, never early
    expect(used(await store.consume('key:skewed', at(T0, minuteAndDay(5, 5))), 'minute')).toBe(3);
    expect((await readRateLimitState(client, rateLimitRedisKey('key:skewed', keyPrefix)))?.counters.minute?.count).toBe(3);
  });

  it("turns into the engine's fail-closed 503 with Retry-After", async () => {
    const client = track(new Redis({ port: await closedPort(), host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 0 }));
    const limiter = createRateLimiter({ store: redisRateLimitStore({ client, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }), clock: { now: () => T0 } });
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
    await expect(store.consume('key:x', at(T0, minuteAndDay(1, 1), undefined, { cost: 0 }))).rejects.toThrow(/^cost must be a whole number >= 1, got 0$/);
    await expect(store.consume('key:x', at(T0, minuteAndDay(1, 1), undefined, { cost: 1.5 }))).rejects.toThrow(TypeError);
    await expect(store.consume('key:x', at(T0, minuteAndDay(1, 1), undefined, { banSubject: 7 as never }))).rejects.toThrow(/^banSubject must be a string/);
    await expect(store.peek('key:x', T0 + 0.5)).rejects.toThrow(TypeError);
  });
});

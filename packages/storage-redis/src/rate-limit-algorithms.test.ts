/**
 * The consume script's sliding and gcra windows against `decideConsume` of `@petstore/core` (the model), case by
 * case: windows crossed with costs above 1, counters converted from one algorithm to another, `retryAtMs`, `peek`,
 * the record's layout and its TTL. The seeded model comparison (conformance.test.ts) covers the same at random.
 */
import {
  decideConsume,
  peekState,
  type BanPolicy,
  type ConsumeRequest,
  type ConsumeResult,
  type RateLimitAlgorithm,
  type RateLimitState,
  type RateLimitWindow,
} from '@petstore/core';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisRateLimitStore } from './rate-limit-store.js';
import {
  connect,
  expiresAtMs,
  keepKeysAnHourLonger,
  patchConsumeScript,
  readRateLimitState,
  redisNowMs,
  skipRedis,
  uniquePrefix,
} from '../test-support/redis.js';

const W = 10_000;
/** A window start: 2026-01-01T00:00:00Z is a multiple of 10 s. */
const T0 = Date.UTC(2026, 0, 1);
const BAN: BanPolicy = { rejectedThreshold: 3, intervalMs: 60_000, durationMs: 120_000 };

function windowsOf(algorithm: RateLimitAlgorithm, limit = 10): readonly RateLimitWindow[] {
  const each = (window: RateLimitWindow) => Object.freeze(algorithm === 'fixed' ? window : { ...window, algorithm });
  return Object.freeze([each({ name: 'short', limit, windowMs: W }), each({ name: 'long', limit: 4 * limit, windowMs: 6 * W })]);
}

function request(windows: readonly RateLimitWindow[], nowMs: number, cost: number, ban?: BanPolicy, banSubject = 'k1'): ConsumeRequest {
  return { windows, nowMs, cost, ban, banSubject };
}

/**
 * A store deciding at the requests' time, no block cache (the script itself), and the model beside it. The keys
 * are kept an hour longer than the script asks (`keepKeysAnHourLonger`; not for `ttl`): Redis counts a TTL on its
 * own clock, so a record that ends 1 ms after a request's time could be gone before the next step at that time.
 */
function pair(ttl: 'asked' | 'longer' = 'longer') {
  const connected = connect() as Redis;
  const client = ttl === 'longer' ? patchConsumeScript(connected, keepKeysAnHourLonger) : connected;
  const store = redisRateLimitStore({ client, keyPrefix: uniquePrefix(), time: 'request', blockCache: false });
  const model = new Map<string, { state: RateLimitState; expiresAtMs: number }>();
  const modelAt = (key: string, nowMs: number) => {
    const record = model.get(key);
    return record !== undefined && record.expiresAtMs > nowMs ? record.state : undefined;
  };
  return {
    client,
    store,
    /** Consumes on both; the store's answer and record must be the model's. Returns the answer. */
    async consume(key: string, consume: ConsumeRequest): Promise<ConsumeResult> {
      const decision = decideConsume(modelAt(key, consume.nowMs), consume);
      model.set(key, { state: decision.state, expiresAtMs: decision.expiresAtMs });
      const actual = await store.consume(key, consume);
      expect(actual).toEqual(decision.result);
      // A record with nothing live left is not kept (the model's expiry is now).
      expect(await readRateLimitState(client, store.redisKey(key))).toEqual(decision.expiresAtMs > consume.nowMs ? decision.state : undefined);
      return actual;
    },
    /** `peek` on the store equals `peekState` of the model's record. */
    async peek(key: string, nowMs: number) {
      const snapshot = await store.peek(key, nowMs);
      expect(snapshot).toEqual(peekState(modelAt(key, nowMs), nowMs));
      return snapshot;
    },
  };
}

const outcome = (result: ConsumeResult) => (result.allowed ? 'allowed' : result.reason);

describe.skipIf(skipRedis)('redisRateLimitStore: sliding and gcra windows against decideConsume', () => {
  for (const algorithm of ['fixed', 'sliding', 'gcra'] as const) {
    it(`decides ${algorithm} windows as the model does across window boundaries, with costs above 1`, async () => {
      const { consume } = pair();
      // 7 and 28 units do not divide 10 s and 60 s: retries and drains fall between whole ms, where rounding shows.
      const windows = windowsOf(algorithm, 7);
      const steps: Array<[offsetMs: number, cost: number]> = [
        [1_000, 3], [2_000, 4], [2_001, 4], [9_999, 2], [W, 3], [W + 1, 5], [12_500, 4], [15_000, 2],
        [19_999, 6], [2 * W, 1], [25_000, 5], [25_000, 5], [33_333, 3], [6 * W - 1, 7], [6 * W, 9], [7 * W + 4_321, 2],
      ];
      const outcomes: string[] = [];
      for (const [offsetMs, cost] of steps) outcomes.push(outcome(await consume('account:cross', request(windows, T0 + offsetMs, cost))));
      // The run refuses and admits: a run that never refused would prove little.
      expect(outcomes).toContain('allowed');
      expect(outcomes).toContain('rate_limited');
    });
  }

  it('weights the previous sliding window by the part of it still in view, and says when a refused cost fits', async () => {
    const { consume } = pair();
    const windows = [{ name: 'short', limit: 10, windowMs: W, algorithm: 'sliding' as const }];
    expect(outcome(await consume('anon:s', request(windows, T0 + 1_000, 8)))).toBe('allowed');
    // A quarter into the next window, 8 × 3/4 = 6 units are still held: 4 left, a cost of 5 waits until the weight
    // falls to 5 units, at 10 s − 50,000 / 8 ms = 3,750 ms into the window.
    const refused = await consume('anon:s', request(windows, T0 + W + 2_500, 5));
    expect(refused).toMatchObject({ allowed: false, windows: [{ used: 6, remaining: 4, resetAtMs: T0 + 2 * W, retryAtMs: T0 + W + 3_750 }] });
    expect(outcome(await consume('anon:s', request(windows, T0 + W + 3_749, 5)))).toBe('rate_limited');
    expect(await consume('anon:s', request(windows, T0 + W + 3_750, 5))).toMatchObject({
      allowed: true,
      windows: [{ used: 10, remaining: 0, resetAtMs: T0 + 3 * W }],
    });
  });

  it('drains a gcra window at limit per window and says when a refused cost fits', async () => {
    const { consume } = pair();
    const windows = [{ name: 'short', limit: 10, windowMs: W, algorithm: 'gcra' as const }];
    expect(await consume('anon:g', request(windows, T0 + 500, 10))).toMatchObject({ allowed: true, windows: [{ used: 10, resetAtMs: T0 + 500 + W }] });
    // One unit drains every windowMs / limit = 1,000 ms.
    expect(await consume('anon:g', request(windows, T0 + 1_000, 2))).toMatchObject({ allowed: false, windows: [{ used: 10, retryAtMs: T0 + 2_500 }] });
    expect(outcome(await consume('anon:g', request(windows, T0 + 2_499, 2)))).toBe('rate_limited');
    expect(await consume('anon:g', request(windows, T0 + 2_500, 2))).toMatchObject({ allowed: true, windows: [{ used: 10, remaining: 0 }] });
  });

  it('reads a gcra counter charged ahead of now (another instance’s clock) at its own time', async () => {
    const { consume } = pair();
    const windows = windowsOf('gcra', 7);
    await consume('account:ahead', request(windows, T0 + 5_000, 3));
    for (const [offsetMs, cost] of [[1_000, 2], [4_000, 3], [5_000, 1], [6_000, 4]] as const) {
      await consume('account:ahead', request(windows, T0 + offsetMs, cost));
    }
  });

  it('converts a live counter when the plan changes algorithm, never freeing units already used', async () => {
    const { consume, peek } = pair();
    const sequence: Array<[RateLimitAlgorithm, number, number]> = [
      ['fixed', 1_000, 6],
      ['gcra', 2_000, 1], // 6 units held: 7 used in gcra
      ['sliding', 4_321, 2],
      ['gcra', 9_999, 3],
      ['fixed', W + 1, 2],
      ['sliding', W + 2, 4],
      ['fixed', 17_000, 1],
      ['gcra', 17_001, 1],
      ['sliding', 2 * W + 7, 5],
      ['fixed', 3 * W, 9],
    ];
    for (const [algorithm, offsetMs, cost] of sequence) {
      await consume('account:change', request(windowsOf(algorithm), T0 + offsetMs, cost, BAN));
      await peek('account:change', T0 + offsetMs + 1);
    }
    // Hand-checked: 6 fixed units, read by gcra at 2 s, are 6 × 10 s of unit-ms, plus the unit charged.
    const { store, client } = pair();
    await store.consume('account:one', request(windowsOf('fixed'), T0 + 1_000, 6));
    await store.consume('account:one', request(windowsOf('gcra'), T0 + 2_000, 1));
    expect((await readRateLimitState(client, store.redisKey('account:one')))?.counters['short']).toEqual({
      startMs: T0 + 2_000,
      count: 7 * W,
      limit: 10,
      windowMs: W,
      algorithm: 'gcra',
    });
  });

  it('reports retryAtMs only in refusals, for sliding and gcra windows short of the cost, also while banned', async () => {
    const { consume } = pair();
    for (const algorithm of ['sliding', 'gcra'] as const) {
      const windows = windowsOf(algorithm, 2);
      const key = `account:retry-${algorithm}`;
      const answers: ConsumeResult[] = [];
      for (let i = 0; i < 6; i++) answers.push(await consume(key, request(windows, T0 + 100 * i, 1, BAN)));
      expect(answers.map(outcome)).toEqual(['allowed', 'allowed', 'rate_limited', 'rate_limited', 'banned', 'banned']);
      expect(answers.slice(0, 2).every((answer) => answer.windows.every((window) => window.retryAtMs === undefined))).toBe(true);
      // Refused and banned: the short window (2 used of 2) says when; the long one (2 of 8) has room.
      for (const answer of answers.slice(2)) {
        expect(answer.windows[0]?.retryAtMs).toBeGreaterThan(answer.nowMs);
        expect(answer.windows[1]?.retryAtMs).toBeUndefined();
      }
    }
    // A fixed window never carries it.
    const fixed = await consume('account:retry-fixed', request(windowsOf('fixed', 1), T0, 2));
    expect(fixed.windows.map((window) => window.retryAtMs)).toEqual([undefined, undefined]);
    // Nor does a cost above the limit (it never fits).
    const never = await consume('account:retry-never', request(windowsOf('gcra', 2), T0, 3));
    expect(never.windows[0]).not.toHaveProperty('retryAtMs');
  });

  it('peeks each counter by the algorithm that wrote it, as the model does, and an ended one as nothing', async () => {
    const { consume, peek } = pair();
    await consume('account:peek', request(windowsOf('sliding'), T0 + 3_000, 7));
    await consume('account:peek', request(windowsOf('gcra'), T0 + 3_000, 2));
    for (const offsetMs of [3_000, 3_001, 9_999, W, 15_000, 2 * W, 10 * W]) await peek('account:peek', T0 + offsetMs);
    await consume('anon:peek', request(windowsOf('sliding'), T0 + 1, 3));
    for (const offsetMs of [W - 1, W, W + 5_000, 2 * W - 1, 2 * W, 6 * W + 1, 12 * W]) await peek('anon:peek', T0 + offsetMs);
    // 3 units of the window before, half of it still in view: 2 (rounded up).
    expect((await peek('anon:peek', T0 + W + 5_000)).windows[0]).toMatchObject({ name: 'short', used: 2 });
    expect((await peek('anon:peek', T0 + 12 * W)).windows).toEqual([]);
  });

  for (const algorithm of ['sliding', 'gcra'] as const) {
    it(`keeps a ${algorithm} record until the model's expiry (its counters' ends), set on Redis's clock`, async () => {
      const { client, store } = pair('asked');
      const key = `account:ttl-${algorithm}`;
      const consumeRequest = request(windowsOf(algorithm), T0 + 2_500, 3);
      const { expiresAtMs: modelExpiry } = decideConsume(undefined, consumeRequest);
      // sliding: the long window's start + 2 windows; gcra: its reset, 3 units draining at 40 per 60 s.
      expect(modelExpiry).toBe(algorithm === 'sliding' ? T0 + 12 * W : T0 + 2_500 + Math.ceil((3 * 6 * W) / 40));
      const before = await redisNowMs(client);
      await store.consume(key, consumeRequest);
      const after = await redisNowMs(client);
      const expiry = await expiresAtMs(client, store.redisKey(key));
      const ttlMs = modelExpiry - consumeRequest.nowMs;
      expect(expiry).toBeGreaterThanOrEqual(before + ttlMs);
      expect(expiry).toBeLessThanOrEqual(after + ttlMs + 1);
    });
  }

  it('keeps a sliding window’s previous count after the signature, and fixed windows exactly as before', async () => {
    const { client, store } = pair();
    const windows = [
      { name: 'a', limit: 5, windowMs: W, algorithm: 'sliding' as const },
      { name: 'b', limit: 5, windowMs: W, algorithm: 'gcra' as const },
      { name: 'c', limit: 5, windowMs: W },
    ];
    await store.consume('anon:layout', request(windows, T0 + 1_000, 2));
    await store.consume('anon:layout', request(windows, T0 + W + 1_000, 1));
    const value = (await client.getBuffer(store.redisKey('anon:layout'))) as Buffer;
    const signature = '[["a",5,10000,"sliding"],["b",5,10000,"gcra"],["c",5,10000]]';
    // Starts, then counts: sliding (this window, 1 unit), gcra (when last charged; 2 units at 1 s drained at 5
    // unit-ms per ms for 10 s, then 1 unit charged: 10,000 unit-ms), fixed (this window, 1 unit).
    const numbers = [T0 + W, T0 + W + 1_000, T0 + W, 1, W, 1];
    const expected = Buffer.alloc(5 + 8 * 6 + signature.length + 8);
    expected.writeUInt8(3, 0);
    expected.writeUInt32LE(signature.length, 1);
    numbers.forEach((number, i) => expected.writeDoubleLE(number, 5 + 8 * i));
    expected.write(signature, 5 + 48, 'utf8');
    expected.writeDoubleLE(2, 5 + 48 + signature.length); // a's previous count
    expect(value.equals(expected), `${value.toString('hex')}\n${expected.toString('hex')}`).toBe(true);
    // Fixed windows alone: no algorithm in the signature, nothing after it.
    await store.consume('anon:fixed', request([{ name: 'c', limit: 5, windowMs: W }], T0 + 1_000, 2));
    const fixed = (await client.getBuffer(store.redisKey('anon:fixed'))) as Buffer;
    expect(fixed.length).toBe(5 + 16 + '[["c",5,10000]]'.length);
    expect(fixed.toString('utf8', 21)).toBe('[["c",5,10000]]');
  });
});

import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY, backoffDelayMs, parseRetryAfter, resolveRetryOptions, type RetryOptions } from './retry.js';
import { errorAnswer, fakeTime, nodeFetchSystemError, rateLimitHeaders, undiciConnectError, type ScriptStep, rejection, scriptedClient as setup } from '../test-support/scripted-fetch.js';

const ok: ScriptStep = { status: 200, headers: rateLimitHeaders(2, 1, 1_800_000_060), body: [] };
const created: ScriptStep = { status: 201, body: { id: 1, name: 'Dogs' } };
const rateLimited = (retryAfter: string) => errorAnswer(429, 'rate_limited', { 'retry-after': retryAfter });
const unavailable = (retryAfter?: string) =>
  errorAnswer(503, 'service_unavailable', retryAfter === undefined ? {} : { 'retry-after': retryAfter });



describe('Retry-After', () => {
  it('waits exactly the Retry-After seconds before the retry, then succeeds', async () => {
    const { client, time, sentAt } = setup([rateLimited('3'), ok], { random: () => 0.999 });
    await expect(client.listCategories()).resolves.toEqual([]);
    expect(time.sleeps).toEqual([3000]);
    expect(sentAt()).toEqual([0, 3000]);
  });

  it('never retries sooner than Retry-After, even when the jittered backoff is shorter or longer', async () => {
    const short = setup([rateLimited('2'), rateLimited('2'), rateLimited('1'), ok], { random: () => 0.999 });
    await short.client.listCategories();
    // retry 0: max(2000, 499); retry 1: max(2000, 999); retry 2: max(1000, 1998)
    expect(short.time.sleeps).toEqual([2000, 2000, 1998]);
    const long = setup([rateLimited('1'), ok], { random: () => 0.5, retry: { baseDelayMs: 5000 } });
    await long.client.listCategories();
    expect(long.time.sleeps).toEqual([2500]);
  });

  it('reads the HTTP-date form', async () => {
    const at = new Date(fakeTime().now() + 4000).toUTCString(); // the fake clock starts on a whole second
    const { client, time } = setup([rateLimited(at), ok]);
    await client.listCategories();
    expect(time.sleeps).toEqual([4000]);
  });

  it('retries a 429 on POST: the server refuses before creating anything', async () => {
    const { client, requests, time } = setup([rateLimited('1'), created]);
    await expect(client.createCategory({ name: 'Dogs' })).resolves.toEqual({ id: 1, name: 'Dogs' });
    expect(requests).toHaveLength(2);
    expect(time.sleeps).toEqual([1000]);
  });
});

describe('exponential backoff with full jitter', () => {
  it('doubles the ceiling on each retry up to the cap', async () => {
    const { client, time } = setup([unavailable(), unavailable(), unavailable(), unavailable(), ok], {
      random: () => 0.999,
      retry: { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 300 },
    });
    await client.listCategories();
    expect(time.sleeps).toEqual([99, 199, 299, 299]);
  });

  it('draws every wait in [0, min(cap, base × 2^n)) with the real Math.random', async () => {
    const script = Array.from({ length: 8 }, () => unavailable());
    const { client, time } = setup(script, { retry: { maxAttempts: 8, baseDelayMs: 100, maxDelayMs: 1000, maxElapsedMs: 1e9 } });
    await rejection(client.listCategories());
    expect(time.sleeps).toHaveLength(7);
    time.sleeps.forEach((ms, n) => {
      expect(ms).toBeGreaterThanOrEqual(0);
      expect(ms).toBeLessThan(Math.min(1000, 100 * 2 ** n));
    });
  });

  it('backoffDelayMs is full jitter: 0 at random 0, just under the ceiling at random → 1', () => {
    const retry = resolveRetryOptions({ baseDelayMs: 500, maxDelayMs: 8000 });
    expect(backoffDelayMs(0, retry, () => 0)).toBe(0);
    expect(backoffDelayMs(2, retry, () => 0.9999)).toBe(1999);
    expect(backoffDelayMs(10, retry, () => 0.9999)).toBe(7999);
  });
});

describe('bounds', () => {
  it('sends at most maxAttempts requests and reports them on the error', async () => {
    const { client, requests, time } = setup([unavailable('1')], { retry: { maxAttempts: 3 } });
    const error = await rejection(client.listCategories());
    expect(requests).toHaveLength(3);
    expect(time.sleeps).toHaveLength(2);
    expect(error).toMatchObject({ code: 'service_unavailable', status: 503, attempts: 3, retryAfterSeconds: 1 });
  });

  it('defaults to 4 attempts within 30 s', async () => {
    expect(DEFAULT_RETRY).toEqual({ maxAttempts: 4, maxElapsedMs: 30_000, baseDelayMs: 500, maxDelayMs: 8000 });
    const { client, requests } = setup([unavailable()]);
    expect((await rejection(client.listCategories())).attempts).toBe(4);
    expect(requests).toHaveLength(4);
  });

  it('maxAttempts 1 turns retries off', async () => {
    const { client, requests } = setup([rateLimited('1'), ok], { retry: { maxAttempts: 1 } });
    expect(await rejection(client.listCategories())).toMatchObject({ code: 'rate_limited', attempts: 1 });
    expect(requests).toHaveLength(1);
  });

  it('throws at once, without sleeping, when Retry-After is beyond the remaining budget', async () => {
    const { client, requests, time } = setup([rateLimited('45'), ok]);
    const error = await rejection(client.listCategories());
    expect(error).toMatchObject({ code: 'rate_limited', status: 429, retryAfterSeconds: 45, attempts: 1 });
    expect(time.sleeps).toEqual([]);
    expect(requests).toHaveLength(1);
  });

  it('counts time already spent (waits and slow answers) against the budget', async () => {
    const slow = { ...rateLimited('2'), takesMs: 500 };
    // 500 (answer) + 2000 (wait) + 500 (answer) = 3000 spent; the next 2000 wait would end at 5000 > 4000.
    const { client, requests, time } = setup([slow, slow, ok], { retry: { maxElapsedMs: 4000 } });
    const error = await rejection(client.listCategories());
    expect(error.attempts).toBe(2);
    expect(time.sleeps).toEqual([2000]);
    expect(requests).toHaveLength(2);
  });

  it('a wait that ends exactly at the budget is not made: no time would be left for the next attempt', async () => {
    const { client, requests, time } = setup([rateLimited('3'), ok], { retry: { maxElapsedMs: 3000 } });
    expect(await rejection(client.listCategories())).toMatchObject({ code: 'rate_limited', attempts: 1 });
    expect(time.sleeps).toEqual([]);
    expect(requests).toHaveLength(1);
  });

  it('a wait that ends just before the budget does is made', async () => {
    const { client, time } = setup([rateLimited('3'), ok], { retry: { maxElapsedMs: 3001 } });
    await expect(client.listCategories()).resolves.toEqual([]);
    expect(time.sleeps).toEqual([3000]);
  });

  it('gives up with the last error, sending nothing more, when a wait overruns the budget (a late timer)', async () => {
    const time = fakeTime();
    const lateSleep = async (ms: number) => time.advance(ms + 50);
    const { client, requests } = setup([rateLimited('3'), ok], { retry: { maxElapsedMs: 3030 }, now: time.now, sleep: lateSleep });
    expect(await rejection(client.listCategories())).toMatchObject({ code: 'rate_limited', attempts: 1 });
    expect(requests).toHaveLength(1);
  });

  it('never retries a ban', async () => {
    const { client, requests, time } = setup([errorAnswer(429, 'temporarily_banned', { 'retry-after': '1' }), ok]);
    const error = await rejection(client.listCategories());
    expect(error).toMatchObject({ code: 'temporarily_banned', status: 429, retryAfterSeconds: 1, attempts: 1 });
    expect(requests).toHaveLength(1);
    expect(time.sleeps).toEqual([]);
  });

  it.each([
    [400, 'validation_failed'],
    [401, 'unauthorized'],
    [404, 'not_found'],
    [500, 'internal_error'],
    [507, 'storage_full'],
  ])('never retries %i %s', async (status, code) => {
    const { client, requests } = setup([errorAnswer(status, code), ok]);
    expect(await rejection(client.listCategories())).toMatchObject({ code, status, attempts: 1 });
    expect(requests).toHaveLength(1);
  });

  it('rejects invalid settings', () => {
    expect(() => resolveRetryOptions({ maxAttempts: 0 })).toThrow(RangeError);
    expect(() => resolveRetryOptions({ maxAttempts: 1.5 })).toThrow(RangeError);
    expect(() => resolveRetryOptions({ maxElapsedMs: -1 })).toThrow(RangeError);
    expect(() => resolveRetryOptions({ maxElapsedMs: 0 })).toThrow(/retry\.maxElapsedMs/);
    expect(() => resolveRetryOptions({ baseDelayMs: Number.NaN })).toThrow(RangeError);
    expect(resolveRetryOptions({ maxAttempts: undefined })).toEqual(DEFAULT_RETRY);
  });

  it('refuses a setting it does not know, naming it, rather than ignoring it', () => {
    const misspelt = { maxAttempt: 1 } as unknown as RetryOptions;
    expect(() => resolveRetryOptions(misspelt)).toThrow(TypeError);
    expect(() => resolveRetryOptions(misspelt)).toThrow(/retry\.maxAttempt\b/);
    expect(() => setup([ok], { retry: { retryUnsafe: true } as unknown as RetryOptions })).toThrow(/retry\.retryUnsafe/);
  });
});

describe('which failures are retried', () => {
  it('retries a 503 for GET, honouring its Retry-After', async () => {
    const { client, requests, time } = setup([unavailable('5'), ok]);
    await expect(client.listCategories()).resolves.toEqual([]);
    expect(requests).toHaveLength(2);
    expect(time.sleeps).toEqual([5000]);
  });

  it('retries a 503 for a create, honouring its Retry-After: the Idempotency-Key makes a repeat a replay', async () => {
    const { client, requests, time } = setup([unavailable('5'), created]);
    await expect(client.createCategory({ name: 'Dogs' })).resolves.toEqual({ id: 1, name: 'Dogs' });
    expect(requests).toHaveLength(2);
    expect(time.sleeps).toEqual([5000]);
  });

  it.each([
    ['global fetch (undici)', undiciConnectError('ECONNREFUSED')],
    ['node-fetch', nodeFetchSystemError('ECONNREFUSED')],
    ['happy eyeballs', new TypeError('fetch failed', { cause: new AggregateError([undiciConnectError('ECONNREFUSED').cause, nodeFetchSystemError('ECONNREFUSED')]) })],
  ])('retries a create whose connection was refused (%s)', async (_, refused) => {
    const { client, requests, time } = setup([{ reject: refused }, created], { random: () => 0.5 });
    await expect(client.createCategory({ name: 'Dogs' })).resolves.toEqual({ id: 1, name: 'Dogs' });
    expect(requests).toHaveLength(2);
    expect(time.sleeps).toEqual([250]);
  });

  it('retries a create whose answer body could not be read', async () => {
    const { client, requests } = setup([{ status: 503, bodyError: new TypeError('terminated') }, created]);
    await expect(client.createCategory({ name: 'Dogs' })).resolves.toEqual({ id: 1, name: 'Dogs' });
    expect(requests).toHaveLength(2);
  });

  it('retries any network error for GET', async () => {
    const { client, requests } = setup([{ reject: undiciConnectError('ECONNRESET') }, { reject: new TypeError('fetch failed') }, ok]);
    await expect(client.listCategories()).resolves.toEqual([]);
    expect(requests).toHaveLength(3);
  });

  it('retries a create after a dropped connection, and never after a 500', async () => {
    const dropped = setup([{ reject: undiciConnectError('ECONNRESET') }, created]);
    await expect(dropped.client.createCategory({ name: 'Dogs' })).resolves.toMatchObject({ id: 1 });
    expect(dropped.requests).toHaveLength(2);
    const failed = setup([errorAnswer(500, 'internal_error'), created]);
    expect(await rejection(failed.client.createCategory({ name: 'Dogs' }))).toMatchObject({ code: 'internal_error', attempts: 1 });
    expect(failed.requests).toHaveLength(1);
  });
});

describe('parseRetryAfter', () => {
  const nowMs = Date.UTC(2026, 0, 1, 12, 0, 0);
  it('reads delay-seconds and HTTP-dates; ignores anything else', () => {
    expect(parseRetryAfter('120', nowMs)).toEqual({ delayMs: 120_000, seconds: 120 });
    expect(parseRetryAfter(' 1 ', nowMs)).toEqual({ delayMs: 1000, seconds: 1 });
    expect(parseRetryAfter('Thu, 01 Jan 2026 12:00:30 GMT', nowMs)).toEqual({ delayMs: 30_000, seconds: 30 });
    expect(parseRetryAfter('Thu, 01 Jan 2026 11:00:00 GMT', nowMs)).toEqual({ delayMs: 0, seconds: 0 });
    for (const bad of [null, '', '-1', '1.5', 'soon']) expect(parseRetryAfter(bad, nowMs)).toBeUndefined();
  });
});

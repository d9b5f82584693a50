import { afterEach, describe, expect, it, vi } from 'vitest';
import { createPetstoreClient, type PetstoreClientOptions } from './client.js';
import { PetstoreClientError, isPetstoreClientError } from './errors.js';
import { errorAnswer, rateLimitHeaders, scriptedFetch, type ScriptStep, rejection, scriptedClient as setup } from '../test-support/scripted-fetch.js';

const dogs = { id: 1, name: 'Dogs', description: 'Canine breeds' };

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('operations', () => {
  it('listCategories sends GET /categories with the bearer key and returns the array', async () => {
    const { client, requests } = setup([{ status: 200, body: [dogs] }]);
    await expect(client.listCategories()).resolves.toEqual([dogs]);
    expect(requests).toHaveLength(1);
    expect(requests[0]?.url).toBe('http://api.test/v1/categories');
    expect(requests[0]?.init).toEqual({
      method: 'GET',
      headers: { authorization: 'Bearer secret-key', accept: 'application/json' },
      signal: expect.any(AbortSignal),
    });
  });

  it('createCategory sends POST /categories with a JSON body and an Idempotency-Key, and returns the created Category', async () => {
    const { client, requests } = setup([{ status: 201, body: dogs }]);
    await expect(client.createCategory({ name: 'Dogs', description: 'Canine breeds' })).resolves.toEqual(dogs);
    expect(requests[0]?.init).toEqual({
      method: 'POST',
      headers: {
        authorization: 'Bearer secret-key',
        accept: 'application/json',
        'content-type': 'application/json',
        'idempotency-key': expect.stringMatching(/^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$/),
      },
      body: '{"name":"Dogs","description":"Canine breeds"}',
      signal: expect.any(AbortSignal),
    });
  });

  it('accepts a baseUrl with a trailing slash', async () => {
    const { client, requests } = setup([{ status: 200, body: [] }], { baseUrl: 'http://api.test/v1/' });
    await client.listCategories();
    expect(requests[0]?.url).toBe('http://api.test/v1/categories');
  });

  it('uses the global fetch by default', async () => {
    const server = scriptedFetch([{ status: 200, body: [dogs] }]);
    vi.stubGlobal('fetch', server.fetch);
    const client = createPetstoreClient({ baseUrl: 'http://api.test/v1', apiKey: 'k' });
    await expect(client.listCategories()).resolves.toEqual([dogs]);
    expect(server.requests).toHaveLength(1);
  });

  it('rejects bad options with TypeError', () => {
    expect(() => createPetstoreClient({ baseUrl: '/v1', apiKey: 'k' })).toThrow(TypeError);
    expect(() => createPetstoreClient({ baseUrl: 'http://api.test/v1', apiKey: '' })).toThrow(TypeError);
  });

  it('refuses an option it does not know, naming it, rather than ignoring it', () => {
    const options = { baseUrl: 'http://api.test/v1', apiKey: 'k', timeoutMs: 100 } as PetstoreClientOptions;
    expect(() => createPetstoreClient(options)).toThrow(TypeError);
    expect(() => createPetstoreClient(options)).toThrow(/unknown option\(s\) timeoutMs;/);
  });
});

describe('errors', () => {
  it('carry the Error body code and message, the HTTP status and the attempts', async () => {
    const { client } = setup([errorAnswer(401, 'unauthorized', { 'www-authenticate': 'Bearer realm="petstore"' })]);
    const error = await rejection(client.listCategories());
    expect(error).toBeInstanceOf(PetstoreClientError);
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('PetstoreClientError');
    expect(error.code).toBe('unauthorized');
    expect(error.status).toBe(401);
    expect(error.message).toBe('unauthorized message');
    expect(error.attempts).toBe(1);
    expect(error.retryAfterSeconds).toBeUndefined();
  });

  it('carry retryAfterSeconds when the answer had Retry-After', async () => {
    const { client } = setup([errorAnswer(429, 'temporarily_banned', { 'retry-after': '900' })]);
    expect(await rejection(client.listCategories())).toMatchObject({ code: 'temporarily_banned', status: 429, retryAfterSeconds: 900 });
  });

  it('a validation error on create is thrown as is', async () => {
    const { client } = setup([errorAnswer(400, 'validation_failed')]);
    expect(await rejection(client.createCategory({ name: '' }))).toMatchObject({ code: 'validation_failed', status: 400, attempts: 1 });
  });

  it('a network failure is network_error with status 0 and the cause, without the API key', async () => {
    const cause = new TypeError('fetch failed', { cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) });
    const { client } = setup([{ reject: cause }], { retry: { maxAttempts: 1 } });
    const error = await rejection(client.listCategories());
    expect(error).toMatchObject({ code: 'network_error', status: 0, attempts: 1 });
    expect(error.cause).toBe(cause);
    expect(error.message).toContain('ECONNRESET');
    expect(error.message).not.toContain('secret-key');
  });

  it.each([
    ['HTML from a proxy', { status: 502, headers: { 'content-type': 'text/html' }, body: '<h1>Bad Gateway</h1>' }],
    ['JSON that is not an Error body', { status: 500, body: { error: 'boom' } }],
    ['an empty body', { status: 404 }],
  ])('an error answer without an Error body (%s) is invalid_response, not retried', async (_, step: ScriptStep) => {
    const { client, requests } = setup([step, { status: 200, body: [] }]);
    const error = await rejection(client.listCategories());
    expect(error.code).toBe('invalid_response');
    expect(error.status).toBe('status' in step ? step.status : 0);
    expect(error.attempts).toBe(1);
    expect(requests).toHaveLength(1);
  });

  it.each([
    ['not JSON', 'oops'],
    ['not an array', { id: 1 }],
    ['array of non-categories', [{ name: 'no id' }]],
  ])('a success whose body is %s is invalid_response', async (_, body) => {
    const { client } = setup([{ status: 200, body }]);
    expect(await rejection(client.listCategories())).toMatchObject({ code: 'invalid_response', status: 200 });
  });

  it('a 201 whose body is not a Category is invalid_response', async () => {
    const { client } = setup([{ status: 201, body: [] }]);
    expect(await rejection(client.createCategory({ name: 'Dogs' }))).toMatchObject({ code: 'invalid_response', status: 201 });
  });

  it('isPetstoreClientError recognises a copy from the other build by name and code, and nothing else', () => {
    const otherCopy = Object.assign(new Error('x'), { name: 'PetstoreClientError', code: 'rate_limited', status: 429, attempts: 1 });
    expect(isPetstoreClientError(otherCopy)).toBe(true);
    expect(isPetstoreClientError(new PetstoreClientError('network_error', 'x', { status: 0, attempts: 1 }))).toBe(true);
    expect(isPetstoreClientError(Object.assign(new Error('x'), { name: 'PetstoreError', code: 'rate_limited', status: 429 }))).toBe(false);
    expect(isPetstoreClientError({ name: 'PetstoreClientError', code: 'x', status: 0, attempts: 1 })).toBe(false);
    expect(isPetstoreClientError(undefined)).toBe(false);
  });
});

describe('lastRateLimit', () => {
  it('is undefined before the first answer, then follows every answer, errors and retries included', async () => {
    const { client } = setup([
      { status: 200, headers: rateLimitHeaders(60, 59, 1_800_000_060), body: [] },
      errorAnswer(401, 'unauthorized', rateLimitHeaders(30, 29, 1_800_000_060)),
      errorAnswer(429, 'rate_limited', { ...rateLimitHeaders(60, 0, 1_800_000_060), 'retry-after': '1' }),
      { status: 201, headers: rateLimitHeaders(60, 58, 1_800_000_120), body: dogs },
    ]);
    expect(client.lastRateLimit).toBeUndefined();
    await client.listCategories();
    expect(client.lastRateLimit).toEqual({ limit: 60, remaining: 59, resetAtSeconds: 1_800_000_060 });
    await rejection(client.listCategories());
    expect(client.lastRateLimit).toEqual({ limit: 30, remaining: 29, resetAtSeconds: 1_800_000_060 });
    await client.createCategory({ name: 'Dogs' }); // 429 (remaining 0), then 201
    expect(client.lastRateLimit).toEqual({ limit: 60, remaining: 58, resetAtSeconds: 1_800_000_120 });
  });

  it('shows the 429 state when the retry is given up', async () => {
    const { client } = setup([errorAnswer(429, 'rate_limited', { ...rateLimitHeaders(2, 0, 1_800_000_060), 'retry-after': '60' })]);
    await rejection(client.listCategories());
    expect(client.lastRateLimit).toEqual({ limit: 2, remaining: 0, resetAtSeconds: 1_800_000_060 });
  });

  it('keeps the last values when an answer carries none (a 503 from an unreachable rate-limit store)', async () => {
    const { client } = setup([
      { status: 200, headers: rateLimitHeaders(60, 10, 1_800_000_060), body: [] },
      errorAnswer(503, 'service_unavailable', { 'retry-after': '5' }),
    ]);
    await client.listCategories();
    await rejection(client.createCategory({ name: 'Dogs' }));
    expect(client.lastRateLimit).toEqual({ limit: 60, remaining: 10, resetAtSeconds: 1_800_000_060 });
  });

  it('is kept per client', async () => {
    const first = setup([{ status: 200, headers: rateLimitHeaders(60, 59, 1_800_000_060), body: [] }]);
    const second = setup([{ status: 200, body: [] }]);
    await first.client.listCategories();
    await second.client.listCategories();
    expect(first.client.lastRateLimit?.remaining).toBe(59);
    expect(second.client.lastRateLimit).toBeUndefined();
  });
});

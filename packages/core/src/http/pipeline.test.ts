import { describe, expect, it, vi } from 'vitest';
import { PetstoreError } from '../errors.js';
import { NO_PEEK_RESET, testRateLimitStore } from '../../test-support/rate-limit-store.js';
import type { ConsumeResult, RateLimitStore } from '../rate-limit/types.js';
import type { Category } from '../schemas.js';
import type { CategoryStore } from '../storage/category-store.js';
import { pollutionProbe } from '../../test-support/pollution-probe.js';
import { FREE_KEY, ONE_PER_MINUTE_KEY, expectError, parse, testPetstore } from '../../test-support/petstore.js';
import type { PetstoreHeaders, PetstoreRequest, PetstoreRequestBody } from './types.js';

const AUTH = { authorization: `Bearer ${FREE_KEY}` };
const JSON_HEADERS = { ...AUTH, 'content-type': 'application/json' };

function get(headers: PetstoreHeaders = AUTH): PetstoreRequest {
  return { method: 'GET', path: '/categories', headers, clientAddress: '203.0.113.7' };
}

function post(body: PetstoreRequestBody, headers: PetstoreHeaders = JSON_HEADERS): PetstoreRequest {
  return { method: 'POST', path: '/categories', headers, body, clientAddress: '203.0.113.7' };
}

function json(text: string): PetstoreRequestBody {
  return { kind: 'bytes', bytes: text };
}

describe('listCategories', () => {
  it('answers 200 with a JSON array and the rate-limit headers', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.handle(get());
    expect(response.status).toBe(200);
    expect(parse(response)).toEqual([]);
    expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(response.headers).toMatchObject({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '59',
      'x-ratelimit-reset': String(Date.UTC(2026, 0, 1, 0, 1) / 1000),
    });
    expect(response.headers['retry-after']).toBeUndefined();
  });

  it('ignores a query string', async () => {
    const { petstore } = testPetstore();
    expect((await petstore.handle({ ...get(), path: '/categories?page=2' })).status).toBe(200);
  });

  it('answers HEAD like GET without a body', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.handle({ ...get(), method: 'HEAD' });
    expect(response.status).toBe(200);
    expect(response.body).toBeUndefined();
    expect(response.headers['x-ratelimit-remaining']).toBe('59');
  });
});

describe('createCategory', () => {
  it('answers 201 with the created category, which is then listed', async () => {
    const { petstore } = testPetstore();
    const created = await petstore.handle(post(json('{"name":"  Dogs ","description":"Loyal"}')));
    expect(created.status).toBe(201);
    const category = parse(created) as { id: number };
    expect(category).toEqual({ id: expect.any(Number), name: 'Dogs', description: 'Loyal' });
    expect(Number.isSafeInteger(category.id) && category.id >= 1).toBe(true);
    expect(created.headers['x-ratelimit-remaining']).toBe('59');

    const second = parse(await petstore.handle(post(json('{"name":"Cats"}')))) as { id: number };
    expect(second.id).toBeGreaterThan(category.id);
    expect(parse(await petstore.handle(get()))).toEqual([
      { id: category.id, name: 'Dogs', description: 'Loyal' },
      { id: second.id, name: 'Cats' },
    ]);
  });

  it('accepts a body as bytes, with a charset parameter in any case', async () => {
    const { petstore } = testPetstore();
    const bytes = new TextEncoder().encode('{"name":"Fish"}');
    const response = await petstore.handle(
      post({ kind: 'bytes', bytes }, { ...AUTH, 'content-type': 'Application/JSON; charset=UTF-8' }),
    );
    expect(response.status).toBe(201);
  });

  it('ignores a UTF-8 byte order mark', async () => {
    const { petstore } = testPetstore();
    expect((await petstore.handle(post(json('\uFEFF{"name":"Birds"}')))).status).toBe(201);
  });

  it.each([
    ['no Content-Type', AUTH],
    ['text/plain', { ...AUTH, 'content-type': 'text/plain' }],
    ['a JSON look-alike', { ...AUTH, 'content-type': 'application/jsonx' }],
    ['a malformed Content-Type', { ...AUTH, 'content-type': 'application/json; charset' }],
  ])('answers 400 invalid_content_type for %s and creates nothing', async (_label, headers) => {
    const { petstore, categories } = testPetstore();
    expectError(await petstore.handle(post(json('{"name":"x"}'), headers)), 400, 'invalid_content_type');
    expect(categories.records).toHaveLength(0);
  });

  it.each([
    ['invalid JSON', json('{"name":')],
    ['an empty body', json('')],
    ['a whitespace body', json(' \n\t ')],
    ['no body', { kind: 'none' } as const],
    ['bytes that are not UTF-8', { kind: 'bytes', bytes: new Uint8Array([0x7b, 0xff, 0x7d]) } as const],
    ['a body the host could not parse', { kind: 'unreadable', reason: 'malformed' } as const],
  ])('answers 400 invalid_json for %s', async (_label, body) => {
    const { petstore, categories } = testPetstore();
    expectError(await petstore.handle(post(body)), 400, 'invalid_json');
    expect(categories.records).toHaveLength(0);
  });

  it.each([
    ['an array', '[{"name":"x"}]'],
    ['a string', '"Dogs"'],
    ['null', 'null'],
    ['a missing name', '{"description":"no name"}'],
    ['an id', '{"id":5,"name":"x"}'],
  ])('answers 400 validation_failed for %s', async (_label, text) => {
    const { petstore, categories } = testPetstore();
    expectError(await petstore.handle(post(json(text))), 400, 'validation_failed');
    expect(categories.records).toHaveLength(0);
  });

  describe('prototype keys (__proto__, constructor.prototype), also nested', () => {
    const probe = pollutionProbe('petstorePipelineTestPollutionMarker');

    it.each(probe.payloads)(
      'answers 400 validation_failed naming $field, creates nothing and pollutes nothing',
      async ({ field, text }) => {
        const { petstore, categories } = testPetstore();
        // As bytes the API parses itself, and as a value the host parsed with JSON.parse.
        for (const body of [json(text), { kind: 'parsed', value: JSON.parse(text) as unknown } as const]) {
          const answer = await petstore.handle(post(body));
          expectError(answer, 400, 'validation_failed');
          expect((parse(answer) as { message: string }).message).toContain(`${field}: is not a field of NewCategory`);
        }
        expect(categories.records).toHaveLength(0);
        expect(probe.traces()).toEqual([]);
        // A category created afterwards, as stored, as answered and as listed, inherits no marker either.
        const created = await petstore.handle(post(json('{"name":"Dogs"}')));
        expect(created.status).toBe(201);
        const listed = parse(await petstore.handle(get())) as unknown[];
        expect(listed).toHaveLength(1);
        expect(probe.traces(...categories.records, parse(created), ...listed)).toEqual([]);
      },
    );
  });

  it('names the unknown field in the message', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.handle(post(json('{"name":"x","colour":"red"}')));
    expect((parse(response) as { message: string }).message).toContain('colour');
  });

  it('validates a body the host already parsed the same way', async () => {
    const { petstore } = testPetstore();
    const created = await petstore.handle(post({ kind: 'parsed', value: { name: ' Reptiles ' } }));
    expect(created.status).toBe(201);
    expect(parse(created)).toMatchObject({ name: 'Reptiles' });
    expectError(await petstore.handle(post({ kind: 'parsed', value: [] })), 400, 'validation_failed');
    expectError(await petstore.handle(post({ kind: 'parsed', value: { id: 1, name: 'x' } })), 400, 'validation_failed');
  });

  describe('body limit', () => {
    const limit = 64;
    const fits = `{"name":"${'a'.repeat(limit - 11)}"}`; // exactly 64 bytes
    const tooBig = `{"name":"${'a'.repeat(limit - 10)}"}`; // 65 bytes

    function streamOf(text: string) {
      const bytes = new TextEncoder().encode(text);
      const read = vi.fn(async (limitBytes: number) =>
        bytes.byteLength > limitBytes ? ({ ok: false, reason: 'too_large' } as const) : ({ ok: true, bytes } as const),
      );
      return { body: { kind: 'stream', read } as const, read };
    }

    it('accepts a body of exactly the limit', async () => {
      const { petstore } = testPetstore({ bodyLimitBytes: limit });
      expect(new TextEncoder().encode(fits).byteLength).toBe(limit);
      expect((await petstore.handle(post(json(fits)))).status).toBe(201);
      expect((await petstore.handle(post(streamOf(fits).body))).status).toBe(201);
    });

    it('answers 413 payload_too_large for bytes over the limit', async () => {
      const { petstore, categories } = testPetstore({ bodyLimitBytes: limit });
      expectError(await petstore.handle(post(json(tooBig))), 413, 'payload_too_large');
      expect(categories.records).toHaveLength(0);
    });

    it('counts bytes, not characters', async () => {
      const { petstore } = testPetstore({ bodyLimitBytes: limit });
      const multiByte = `{"name":"${'é'.repeat(30)}"}`; // 41 characters, 71 bytes
      expectError(await petstore.handle(post(json(multiByte))), 413, 'payload_too_large');
    });

    it('answers 413 for a stream over the limit, reading it with the configured limit', async () => {
      const { petstore } = testPetstore({ bodyLimitBytes: limit });
      const { body, read } = streamOf(tooBig);
      expectError(await petstore.handle(post(body)), 413, 'payload_too_large');
      expect(read).toHaveBeenCalledWith(limit);
    });

    it('answers 413 when Content-Length announces too much, without reading the body', async () => {
      const { petstore } = testPetstore({ bodyLimitBytes: limit });
      const { body, read } = streamOf(fits);
      const headers = { ...JSON_HEADERS, 'content-length': String(limit + 1) };
      expectError(await petstore.handle(post(body, headers)), 413, 'payload_too_large');
      expectError(await petstore.handle(post(json(fits), headers)), 413, 'payload_too_large');
      expect(read).not.toHaveBeenCalled();
    });

    it('answers 413 when the host parser found the body too large', async () => {
      const { petstore } = testPetstore();
      expectError(await petstore.handle(post({ kind: 'unreadable', reason: 'too_large' })), 413, 'payload_too_large');
    });

    it('answers 400 invalid_json for a stream that breaks off', async () => {
      const { petstore } = testPetstore();
      const body: PetstoreRequestBody = { kind: 'stream', read: async () => ({ ok: false, reason: 'unreadable' }) };
      expectError(await petstore.handle(post(body)), 400, 'invalid_json');
    });

    it('does not read the body of an unauthenticated request', async () => {
      const { petstore } = testPetstore();
      const { body, read } = streamOf(fits);
      expectError(await petstore.handle(post(body, { 'content-type': 'application/json' })), 401, 'unauthorized');
      expect(read).not.toHaveBeenCalled();
    });
  });
});

describe('authentication', () => {
  it('answers 401 with a bare Bearer challenge when the key is missing', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.handle(get({}));
    expectError(response, 401, 'unauthorized');
    expect(response.headers['www-authenticate']).toBe('Bearer realm="petstore"');
  });

  it('answers 401 with error="invalid_token" for an invalid key, never echoing it', async () => {
    const { petstore } = testPetstore();
    const wrongKey = 'wrong-key-7d1e55c9';
    const response = await petstore.handle(get({ authorization: `Bearer ${wrongKey}` }));
    expectError(response, 401, 'unauthorized');
    expect(response.headers['www-authenticate']).toMatch(/^Bearer realm="petstore", error="invalid_token"/);
    expect(JSON.stringify(response)).not.toContain(wrongKey);
  });

  it.each(['Bearer', 'Bearer a b', 'Basic Zm9vOmJhcg=='])('answers 401 for Authorization: %s', async (header) => {
    const { petstore } = testPetstore();
    expectError(await petstore.handle(get({ authorization: header })), 401, 'unauthorized');
  });

  it('never shows a valid key in a header or body', async () => {
    const { petstore } = testPetstore();
    const responses = [
      await petstore.handle(get()),
      await petstore.handle(post(json('{"name":"x"}'))),
      await petstore.handle(post(json('{"name":"x","extra":1}'))),
      await petstore.handle({ ...get(), path: '/nope' }),
    ];
    for (const response of responses) expect(JSON.stringify(response)).not.toContain(FREE_KEY);
  });

  it('uses the configured realm', async () => {
    const { petstore } = testPetstore({ realm: 'pets "v1"' });
    const response = await petstore.handle(get({}));
    expect(response.headers['www-authenticate']).toBe('Bearer realm="pets \\"v1\\""');
  });

  it('creates nothing on 401', async () => {
    const { petstore, categories } = testPetstore();
    const body = json('{"name":"Dogs"}');
    expectError(await petstore.handle(post(body, { 'content-type': 'application/json' })), 401, 'unauthorized');
    const invalid = { 'content-type': 'application/json', authorization: 'Bearer not-a-key' };
    expectError(await petstore.handle(post(body, invalid)), 401, 'unauthorized');
    expect(categories.records).toHaveLength(0);
  });

  it('charges 401 answers to the anonymous policy and shows its headers', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.handle(get({}));
    expect(response.headers).toMatchObject({ 'x-ratelimit-limit': '30', 'x-ratelimit-remaining': '29' });
    const second = await petstore.handle(get({ authorization: 'Bearer wrong' }));
    expect(second.headers['x-ratelimit-remaining']).toBe('28');
  });

  it('limits key guessing per client address with 429', async () => {
    const { petstore } = testPetstore();
    for (let i = 0; i < 30; i++) await petstore.handle(get({ authorization: `Bearer guess-${i}` }));
    const response = await petstore.handle(get({ authorization: 'Bearer guess-30' }));
    expectError(response, 429, 'rate_limited');
    expect(response.headers['www-authenticate']).toBeUndefined();
  });
});

describe('routing', () => {
  it.each(['/pets', '/categories/', '/categories/1', '/Categories', '/'])('answers 404 for %s', async (path) => {
    const { petstore } = testPetstore();
    const response = await petstore.handle({ ...get(), path });
    expectError(response, 404, 'not_found');
    expect(response.headers['x-ratelimit-limit']).toBe('60');
  });

  it.each(['DELETE', 'PUT', 'PATCH'])('answers %s /categories with 405 and Allow', async (method) => {
    const { petstore } = testPetstore();
    const response = await petstore.handle({ ...get(), method });
    expectError(response, 405, 'method_not_allowed');
    expect(response.headers['allow']).toBe('GET, HEAD, POST');
  });

  it('accepts the method in any case', async () => {
    const { petstore } = testPetstore();
    expect((await petstore.handle({ ...get(), method: 'get' })).status).toBe(200);
  });
});

describe('rate limiting', () => {
  it('answers 429 rate_limited with Retry-After once the limit is used up', async () => {
    const { petstore, clock } = testPetstore();
    const auth = { authorization: `Bearer ${ONE_PER_MINUTE_KEY}` };
    clock.advance(20_000);
    expect((await petstore.handle(get(auth))).status).toBe(200);
    const response = await petstore.handle(get(auth));
    expectError(response, 429, 'rate_limited');
    expect(response.headers).toMatchObject({ 'retry-after': '40', 'x-ratelimit-remaining': '0' });
    clock.advance(40_000);
    expect((await petstore.handle(get(auth))).status).toBe(200);
  });

  it('creates nothing when rate limited', async () => {
    const { petstore, categories } = testPetstore();
    const headers = { authorization: `Bearer ${ONE_PER_MINUTE_KEY}`, 'content-type': 'application/json' };
    await petstore.handle(post(json('{"name":"a"}'), headers));
    expectError(await petstore.handle(post(json('{"name":"b"}'), headers)), 429, 'rate_limited');
    expect(categories.records.map((category) => category.name)).toEqual(['a']);
  });

  it('answers 429 temporarily_banned once the key is banned', async () => {
    const { petstore, clock } = testPetstore({
      rateLimit: {
        store: testRateLimitStore(),
        ban: { rejectedThreshold: 2, intervalMs: 60_000, durationMs: 600_000 },
      },
    });
    const auth = { authorization: `Bearer ${ONE_PER_MINUTE_KEY}` };
    await petstore.handle(get(auth));
    expectError(await petstore.handle(get(auth)), 429, 'rate_limited');
    const banned = await petstore.handle(get(auth));
    expectError(banned, 429, 'temporarily_banned');
    expect(banned.headers).toMatchObject({ 'retry-after': '600', 'x-ratelimit-remaining': '0' });
    clock.advance(600_000);
    expect((await petstore.handle(get(auth))).status).toBe(200);
  });
});

describe('failures', () => {
  function failingStore(error: unknown): CategoryStore {
    return { list: () => Promise.reject(error), create: () => Promise.reject(error), createIdempotent: () => Promise.reject(error) };
  }

  it('answers 500 internal_error without details when a store throws, and reports the error', async () => {
    const error = new Error('connect ECONNREFUSED db.internal:5432 password=hunter2');
    const { petstore, internalErrors } = testPetstore({ categories: failingStore(error) });
    for (const request of [get(), post(json('{"name":"x"}'))]) {
      const response = await petstore.handle(request);
      expectError(response, 500, 'internal_error');
      expect(response.body).not.toMatch(/ECONNREFUSED|hunter2|stack|\bat /);
      expect(response.headers['x-ratelimit-limit']).toBe('60');
    }
    expect(internalErrors).toEqual([error, error]);
  });

  it('still answers 500 when the onInternalError reporter itself throws', async () => {
    const { petstore } = testPetstore({
      categories: failingStore(new Error('db down')),
      onInternalError: () => {
        throw new Error('logger down');
      },
    });
    expectError(await petstore.handle(get()), 500, 'internal_error');
  });

  it('fails closed by default when the rate-limit store fails: 503 with Retry-After, nothing executed', async () => {
    const error = new Error('redis down');
    const { petstore, internalErrors, categories } = testPetstore({
      rateLimit: { store: { ...NO_PEEK_RESET, consume: () => Promise.reject(error) } },
    });
    const listed = await petstore.handle(get());
    expectError(listed, 503, 'service_unavailable');
    expect(listed.headers['retry-after']).toBe('5');
    const created = await petstore.handle(post(json('{"name":"x"}')));
    expectError(created, 503, 'service_unavailable');
    expect(await categories.list()).toEqual([]);
    expect(internalErrors).toEqual([error, error]);
  });

  it('fails closed with the configured Retry-After', async () => {
    const { petstore } = testPetstore({
      rateLimit: {
        store: { ...NO_PEEK_RESET, consume: () => Promise.reject(new Error('down')) },
        onStoreFailure: { mode: 'fail-closed', retryAfterSeconds: 30 },
      },
    });
    expect((await petstore.handle(get())).headers['retry-after']).toBe('30');
  });

  it('fails open onto the insurance store: the request proceeds and the headers come from the insurance store', async () => {
    const insurance = testRateLimitStore();
    const { petstore } = testPetstore({
      rateLimit: {
        store: { ...NO_PEEK_RESET, consume: () => Promise.reject(new Error('down')) },
        onStoreFailure: { mode: 'fail-open', insuranceStore: insurance },
      },
    });
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++) statuses.push((await petstore.handle(get())).status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(60);
    const last = await petstore.handle(get());
    expectError(last, 429, 'rate_limited');
    expect(last.headers['x-ratelimit-limit']).toBe('60');
  });

  it('answers a store PetstoreError with Retry-After as 503 with that Retry-After', async () => {
    const { petstore } = testPetstore({
      categories: failingStore(
        new PetstoreError('service_unavailable', 'The category store is unavailable.', { retryAfterSeconds: 7 }),
      ),
    });
    const response = await petstore.handle(get());
    expectError(response, 503, 'service_unavailable');
    expect(response.headers['retry-after']).toBe('7');
    expect(response.headers['x-ratelimit-remaining']).toBe('59');
  });

  it("answers with a PetstoreError's own code and status", async () => {
    const { petstore, internalErrors } = testPetstore({
      categories: failingStore(new PetstoreError('storage_full', 'The category store is full.')),
    });
    const response = await petstore.handle(post(json('{"name":"x"}')));
    expectError(response, 507, 'storage_full');
    expect(parse(response)).toEqual({ code: 'storage_full', message: 'The category store is full.', status: 507 });
    expect(internalErrors).toEqual([]);
  });

  it('answers a PetstoreError from another copy of the library by its code', async () => {
    const fromOtherCopy = Object.assign(new Error('The category store is full.'), {
      name: 'PetstoreError',
      code: 'storage_full',
    });
    const { petstore } = testPetstore({ categories: failingStore(fromOtherCopy) });
    const response = await petstore.handle(post(json('{"name":"x"}')));
    expect(parse(response)).toEqual({ code: 'storage_full', message: 'The category store is full.', status: 507 });
    expect(response.status).toBe(507);
  });
});

describe('options', () => {
  it.each([0, -1, 1.5, Number.NaN])('rejects a bodyLimitBytes of %s', (bodyLimitBytes) => {
    expect(() => testPetstore({ bodyLimitBytes })).toThrow(TypeError);
  });

  it.each(['v1', '/v1/', '/'])('rejects a prefix of %j', (prefix) => {
    expect(() => testPetstore({ prefix })).toThrow(TypeError);
  });

  it('mounts at /v1 unless told otherwise', () => {
    expect(testPetstore().petstore.prefix).toBe('/v1');
  });
});

describe('store answers', () => {
  it('accepts a thenable that is not a Promise from the rate-limit store', async () => {
    const inner = testRateLimitStore();
    const thenable: RateLimitStore = {
      ...NO_PEEK_RESET,
      consume: (key, request) => {
        const pending = Promise.resolve(inner.consume(key, request));
        return { then: (onFulfilled, onRejected) => pending.then(onFulfilled, onRejected) } as Promise<ConsumeResult>;
      },
    };
    const { petstore } = testPetstore({ rateLimit: { store: thenable } });
    const answer = await petstore.handle(get());
    expect(answer.status).toBe(200);
    expect(answer.headers['x-ratelimit-remaining']).toBe('59');
  });

  it('fails closed with 503 when the rate-limit store throws instead of rejecting', async () => {
    const throwing: RateLimitStore = {
      ...NO_PEEK_RESET,
      consume: () => {
        throw new Error('connection lost');
      },
    };
    const { petstore, internalErrors } = testPetstore({ rateLimit: { store: throwing } });
    const answer = await petstore.handle(get());
    expectError(answer, 503, 'service_unavailable');
    expect(answer.headers['retry-after']).toBe('5');
    expect(internalErrors).toHaveLength(1);
  });

  it('serialises a frozen list once per array, and an unfrozen one every time', async () => {
    const stringify = vi.spyOn(JSON, 'stringify');
    /** How often the list array itself was serialised. */
    const serialisationsOf = (list: unknown) => stringify.mock.calls.filter(([value]) => value === list).length;
    try {
      const frozen: CategoryStore = { list: async () => FROZEN_LIST, create: () => Promise.reject(new Error('unused')), createIdempotent: () => Promise.reject(new Error('unused')) };
      const { petstore } = testPetstore({ categories: frozen });
      const first = await petstore.handle(get());
      const second = await petstore.handle(get());
      expect(first.status).toBe(200);
      expect(parse(first)).toEqual([{ id: 7, name: 'Birds' }]);
      expect(second.body).toBe(first.body);
      expect(serialisationsOf(FROZEN_LIST)).toBe(1); // the JSON of the same frozen array was reused

      // A store that answers one array and changes it in place must never get a stale answer.
      const mutable: Category[] = [{ id: 1, name: 'Dogs' }];
      const inPlace: CategoryStore = { list: async () => mutable, create: () => Promise.reject(new Error('unused')), createIdempotent: () => Promise.reject(new Error('unused')) };
      const { petstore: unfrozen } = testPetstore({ categories: inPlace });
      expect(parse(await unfrozen.handle(get()))).toEqual([{ id: 1, name: 'Dogs' }]);
      mutable.push({ id: 2, name: 'Cats' });
      mutable[0] = { id: 1, name: 'Wolves' };
      expect(parse(await unfrozen.handle(get()))).toEqual([
        { id: 1, name: 'Wolves' },
        { id: 2, name: 'Cats' },
      ]);
      expect(serialisationsOf(mutable)).toBe(2);
    } finally {
      stringify.mockRestore();
    }
  });
});

const FROZEN_LIST: readonly Category[] = Object.freeze([Object.freeze({ id: 7, name: 'Birds' })]);

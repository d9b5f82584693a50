/**
 * Hostile input through the pipeline: every value is refused by a cheap, linear check before any expensive
 * step (grapheme segmentation, JSON.parse), headers sent twice are not taken at their first value, codings
 * the API does not decode are refused, and unknown expectations get 417. Each answer is the Error body with
 * the rate-limit headers, and nothing is created.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ERROR_STATUS } from '../errors.js';
import { exceededJsonBound, MAX_JSON_DEPTH, MAX_JSON_MEMBERS } from './body.js';
import { FREE_KEY, expectError, parse, testPetstore } from '../../test-support/petstore.js';
import type { PetstoreHeaders, PetstoreRequest, PetstoreRequestBody } from './types.js';

const AUTH = `Bearer ${FREE_KEY}`;
const JSON_HEADERS = { authorization: AUTH, 'content-type': 'application/json' };
const MiB = 1_048_576;

function post(text: string, headers: PetstoreHeaders = JSON_HEADERS, body?: PetstoreRequestBody): PetstoreRequest {
  return { method: 'POST', path: '/categories', headers, body: body ?? { kind: 'bytes', bytes: text }, clientAddress: '203.0.113.7' };
}

/** A JSON text of exactly `bytes` UTF-8 bytes (or just under): `prefix`, `unit` repeated, `suffix`. */
function filled(bytes: number, prefix: string, unit: string, suffix: string): string {
  const units = Math.floor((bytes - Buffer.byteLength(prefix) - Buffer.byteLength(suffix)) / Buffer.byteLength(unit));
  return prefix + unit.repeat(units) + suffix;
}

function expectRateLimitHeaders(headers: Record<string, string>): void {
  for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
    expect(headers[name], name).toMatch(/^\d+$/);
  }
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('oversized values are refused before any expensive step', () => {
  /** Counts grapheme clusters handed out by Intl.Segmenter, over every segmentation. */
  function countSegments() {
    const original = Intl.Segmenter.prototype.segment;
    const counted = { segmentations: 0, clusters: 0 };
    vi.spyOn(Intl.Segmenter.prototype, 'segment').mockImplementation(function (this: Intl.Segmenter, input: string) {
      counted.segmentations++;
      const segments = original.call(this, input);
      return {
        *[Symbol.iterator]() {
          for (const segment of segments) {
            counted.clusters++;
            yield segment;
          }
        },
      } as unknown as Intl.Segments;
    });
    return counted;
  }

  it.each([
    ['ASCII name', filled(MiB, '{"name":"', 'a', '"}'), 'name'],
    ['emoji name', filled(MiB, '{"name":"', '🐕', '"}'), 'name'],
    ['combining-mark name', filled(MiB, '{"name":"e', '\u0301', '"}'), 'name'],
    ['ZWJ-sequence name', filled(MiB, '{"name":"', '👨‍👩‍👧‍👦', '"}'), 'name'],
    ['ASCII description', filled(MiB, '{"name":"x","description":"', 'a', '"}'), 'description'],
  ])('refuses a 1 MiB body holding one %s without segmenting it', async (_label, text, field) => {
    const counted = countSegments();
    const { petstore, categories } = testPetstore();
    const response = await petstore.handle(post(text));
    expectError(response, 400, 'validation_failed');
    expect((parse(response) as { message: string }).message).toContain(`${field}: must be at most`);
    expect(counted.segmentations).toBe(0);
    expect(categories.records).toHaveLength(0);
  });

  it('stops counting grapheme clusters one past the bound for a value within the code-point bound', async () => {
    const counted = countSegments();
    const { petstore } = testPetstore();
    // 4,000 code points (the description's code-point bound) but 4,000 clusters: over the 1,000-cluster bound.
    const response = await petstore.handle(post(JSON.stringify({ name: 'x', description: 'd'.repeat(4000) })));
    expectError(response, 400, 'validation_failed');
    expect(counted.clusters).toBe(1001);
  });

  it('does not segment a value with no more code units than the cluster bound', async () => {
    const counted = countSegments();
    const { petstore } = testPetstore();
    expect((await petstore.handle(post(JSON.stringify({ name: 'n'.repeat(100), description: 'd'.repeat(1000) })))).status).toBe(201);
    expect(counted.segmentations).toBe(0);
  });

  it('accepts the largest values within both bounds and refuses one more of either', async () => {
    const { petstore, categories } = testPetstore();
    const family = '👨‍👩‍👧'; // 1 cluster, 5 code points
    expect((await petstore.handle(post(JSON.stringify({ name: family.repeat(80) })))).status).toBe(201); // 400 code points
    expectError(await petstore.handle(post(JSON.stringify({ name: `${family.repeat(80)}a` }))), 400, 'validation_failed'); // 401
    const accent = 'e\u0301'; // 1 cluster, 2 code points
    expect((await petstore.handle(post(JSON.stringify({ name: 'x', description: accent.repeat(1000) })))).status).toBe(201);
    expectError(await petstore.handle(post(JSON.stringify({ name: 'x', description: accent.repeat(1001) }))), 400, 'validation_failed');
    expect(categories.records).toHaveLength(2);
  });

  it.each([
    ['nested arrays', filled(MiB / 2, '', '[', '') + filled(MiB / 2, '', ']', '')],
    ['nested objects', `${'{"a":'.repeat(MAX_JSON_DEPTH + 1)}1${'}'.repeat(MAX_JSON_DEPTH + 1)}`],
    ['100,000 keys', `{${Array.from({ length: 100_000 }, (_, i) => `"${i.toString(36)}":1`).join(',')}}`],
    ['duplicate keys', `{${Array(MAX_JSON_MEMBERS + 1).fill('"name":"x"').join(',')}}`],
  ])('refuses a body of %s without parsing it', async (_label, text) => {
    const jsonParse = vi.spyOn(JSON, 'parse');
    const { petstore, categories } = testPetstore();
    const response = await petstore.handle(post(text));
    expect(jsonParse.mock.calls.filter(([parsed]) => parsed === text)).toHaveLength(0);
    expectError(response, 400, 'invalid_json');
    expect((parse(response) as { message: string }).message).toMatch(/levels deep|object members/);
    expect(categories.records).toHaveLength(0);
  });

  it('parses bodies at the bounds: 32 levels, 1,000 members', async () => {
    const { petstore } = testPetstore();
    const deep = `{"name":"x","extra":${'['.repeat(MAX_JSON_DEPTH - 1)}${']'.repeat(MAX_JSON_DEPTH - 1)}}`;
    const deepAnswer = await petstore.handle(post(deep));
    expectError(deepAnswer, 400, 'validation_failed'); // parsed, then refused for its unknown field
    expect((parse(deepAnswer) as { message: string }).message).toContain('extra: is not a field');
    const members = `{"name":"x",${Array.from({ length: MAX_JSON_MEMBERS - 1 }, (_, i) => `"k${i}":1`).join(',')}}`;
    expect((parse(await petstore.handle(post(members))) as { code: string }).code).toBe('validation_failed');
  });

  it('cuts an unknown field name to 40 characters in the message', async () => {
    const { petstore } = testPetstore();
    const field = `f${'x'.repeat(500_000)}`;
    const response = await petstore.handle(post(JSON.stringify({ name: 'x', [field]: 1 })));
    expectError(response, 400, 'validation_failed');
    const { message } = parse(response) as { message: string };
    expect(message).toContain(`${field.slice(0, 40)}…: is not a field of NewCategory`);
    expect(message.length).toBeLessThan(200);
  });
});

describe('exceededJsonBound', () => {
  it.each([
    ['flat', '{"name":"x"}', undefined],
    ['brackets inside strings', `{"name":"${'['.repeat(100)}${'{'.repeat(100)}"}`, undefined],
    ['colons inside strings', `{"name":"${':'.repeat(5000)}"}`, undefined],
    ['escaped quotes', `{"name":"\\"${'['.repeat(100)}"}`, undefined],
    ['an escaped backslash before the closing quote', `{"name":"\\\\","x":${'['.repeat(40)}`, 'depth'],
    ['exactly the depth bound', '['.repeat(MAX_JSON_DEPTH) + ']'.repeat(MAX_JSON_DEPTH), undefined],
    ['one level more', '['.repeat(MAX_JSON_DEPTH + 1), 'depth'],
    ['exactly the member bound', `{${Array(MAX_JSON_MEMBERS).fill('"a":1').join(',')}}`, undefined],
    ['one member more', `{${Array(MAX_JSON_MEMBERS + 1).fill('"a":1').join(',')}}`, 'members'],
  ])('judges %s', (_label, text, expected) => {
    expect(exceededJsonBound(text)).toBe(expected);
  });
});

describe('headers sent more than once', () => {
  it('answers several Authorization headers as an invalid key, even when the first is valid', async () => {
    const { petstore } = testPetstore();
    for (const authorization of [[AUTH, 'Bearer nope'], [AUTH, AUTH], `${AUTH}, Bearer nope`]) {
      const response = await petstore.handle({ method: 'GET', path: '/categories', headers: { authorization }, clientAddress: '203.0.113.7' });
      expectError(response, 401, 'unauthorized');
      expect(response.headers['www-authenticate']).toContain('error="invalid_token"');
      expectRateLimitHeaders(response.headers);
    }
  });

  it('answers several Content-Type headers with 400 invalid_content_type and creates nothing', async () => {
    const { petstore, categories } = testPetstore();
    for (const contentType of [['application/json', 'text/plain'], ['application/json', 'application/json'], 'application/json, text/plain']) {
      const response = await petstore.handle(post('{"name":"Dogs"}', { authorization: AUTH, 'content-type': contentType }));
      expectError(response, 400, 'invalid_content_type');
    }
    expect(categories.records).toHaveLength(0);
  });

  it('refuses a Content-Type over 256 characters before parsing it', async () => {
    const { petstore } = testPetstore();
    const contentType = `application/json; ${'p=v; '.repeat(60)}`;
    const response = await petstore.handle(post('{"name":"Dogs"}', { authorization: AUTH, 'content-type': contentType }));
    expectError(response, 400, 'invalid_content_type');
    expect((parse(response) as { message: string }).message).toContain('too long');
  });
});

describe('header fields the server dropped', () => {
  it('answers 431 header_fields_too_large with the rate-limit headers and runs nothing', async () => {
    const { petstore, categories } = testPetstore();
    const response = await petstore.handle({ ...post('{"name":"Dogs"}'), headersIncomplete: true });
    expectError(response, 431, 'header_fields_too_large');
    expectRateLimitHeaders(response.headers);
    expect(categories.records).toHaveLength(0);
    const guarded = await petstore.guard({ method: 'GET', path: '/reports', headers: { authorization: AUTH }, headersIncomplete: true });
    expect(guarded.allowed).toBe(false);
    expect(!guarded.allowed && guarded.response.status).toBe(431);
  });

  it('takes the flag from the Fetch entry’s info', async () => {
    const { petstore } = testPetstore();
    const request = () => new Request('http://x/v1/categories', { headers: { authorization: AUTH } });
    expect((await petstore.fetch(request(), { headersIncomplete: true })).status).toBe(431);
    expect((await petstore.fetch(request(), { headersIncomplete: false })).status).toBe(200);
  });
});

describe('codings the API does not decode', () => {
  const streamOf = (text: string): PetstoreRequestBody => ({
    kind: 'stream',
    read: async () => ({ ok: true, bytes: new TextEncoder().encode(text) }),
  });

  it.each(['gzip, chunked', 'identity, chunked', 'chunked, chunked', 'gzip', 'x'.repeat(300), ['gzip', 'chunked']])(
    'answers Transfer-Encoding %j with 415 unsupported_encoding and creates nothing, whatever the body kind',
    async (transferEncoding) => {
      const { petstore, categories } = testPetstore();
      const headers = { ...JSON_HEADERS, 'transfer-encoding': transferEncoding };
      for (const body of [streamOf('{"name":"Dogs"}'), { kind: 'parsed', value: { name: 'Dogs' } } as const]) {
        const response = await petstore.handle(post('', headers, body));
        expectError(response, 415, 'unsupported_encoding');
        expect(response.headers['accept-encoding']).toBe('identity');
        expectRateLimitHeaders(response.headers);
      }
      expect(categories.records).toHaveLength(0);
    },
  );

  it.each(['chunked', 'Chunked', ' chunked '])('accepts Transfer-Encoding %j', async (transferEncoding) => {
    const { petstore } = testPetstore();
    const response = await petstore.handle(post('', { ...JSON_HEADERS, 'transfer-encoding': transferEncoding }, streamOf('{"name":"Dogs"}')));
    expect(response.status).toBe(201);
  });

  it.each(['gzip', 'br', 'deflate, identity', 'x-unknown'])(
    'answers Content-Encoding %j on a body the API reads itself with 415, without reading it',
    async (contentEncoding) => {
      const { petstore, categories } = testPetstore();
      const read = vi.fn(async () => ({ ok: true as const, bytes: new TextEncoder().encode('{"name":"Dogs"}') }));
      const response = await petstore.handle(post('', { ...JSON_HEADERS, 'content-encoding': contentEncoding }, { kind: 'stream', read }));
      expectError(response, 415, 'unsupported_encoding');
      expect(response.headers['accept-encoding']).toBe('identity');
      expect(read).not.toHaveBeenCalled();
      expect(categories.records).toHaveLength(0);
    },
  );

  it('accepts Content-Encoding identity, and a body the host already decoded', async () => {
    const { petstore } = testPetstore();
    expect((await petstore.handle(post('', { ...JSON_HEADERS, 'content-encoding': 'identity' }, streamOf('{"name":"A"}')))).status).toBe(201);
    const decoded = await petstore.handle(post('', { ...JSON_HEADERS, 'content-encoding': 'gzip' }, { kind: 'parsed', value: { name: 'B' } }));
    expect(decoded.status).toBe(201);
  });

  it('answers 415 when the host parser could not decode the content coding', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.handle(post('', JSON_HEADERS, { kind: 'unreadable', reason: 'unsupported_encoding' }));
    expectError(response, 415, 'unsupported_encoding');
  });

  it('ignores codings on requests whose operation takes no body', async () => {
    const { petstore } = testPetstore();
    const headers = { authorization: AUTH, 'transfer-encoding': 'gzip, chunked', 'content-encoding': 'gzip' };
    const response = await petstore.handle({ method: 'GET', path: '/categories', headers, clientAddress: '203.0.113.7' });
    expect(response.status).toBe(200);
  });
});

describe('Expect', () => {
  it.each(['foo', '100-continue, foo', 'x'.repeat(100), ['100-continue', 'foo']])(
    'answers Expect %j with 417 expectation_failed and the rate-limit headers, executing nothing',
    async (expectation) => {
      const { petstore, categories } = testPetstore();
      const response = await petstore.handle(post('{"name":"Dogs"}', { ...JSON_HEADERS, expect: expectation }));
      expectError(response, 417, 'expectation_failed');
      expect(ERROR_STATUS.expectation_failed).toBe(417);
      expectRateLimitHeaders(response.headers);
      expect(categories.records).toHaveLength(0);
    },
  );

  it.each(['100-continue', '100-Continue', ' 100-continue '])('proceeds with Expect %j', async (expectation) => {
    const { petstore } = testPetstore();
    expect((await petstore.handle(post('{"name":"Dogs"}', { ...JSON_HEADERS, expect: expectation }))).status).toBe(201);
  });

  it('authenticates before judging the expectation: 401 without a key', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.handle({ method: 'GET', path: '/categories', headers: { expect: 'foo' }, clientAddress: '203.0.113.7' });
    expectError(response, 401, 'unauthorized');
  });
});

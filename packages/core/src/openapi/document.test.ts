import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../errors.js';
import { FREE_AUTH, expectError, parse, request, testPetstore } from '../../test-support/petstore.js';
import { testRateLimitStore } from '../../test-support/rate-limit-store.js';
import { parseNewCategory } from '../schemas.js';
import { API_DESCRIPTION_VERSION, OPENAPI_VERSION, buildOpenApiDocument, type OpenApiDocument } from './document.js';

type Json = Record<string, unknown>;

const OPERATION_IDS = ['listCategories', 'createCategory', 'getPetById', 'listStoreOrders', 'getOpenApiDocument'];

/** Every operation of a document, with its path and method. */
function operationsOf(document: OpenApiDocument): Array<{ path: string; method: string; operation: Json }> {
  const result: Array<{ path: string; method: string; operation: Json }> = [];
  for (const [path, item] of Object.entries(document['paths'] as Record<string, Record<string, Json>>)) {
    for (const [method, operation] of Object.entries(item)) result.push({ path, method, operation });
  }
  return result;
}

function operation(document: OpenApiDocument, operationId: string): Json {
  const found = operationsOf(document).find((entry) => entry.operation['operationId'] === operationId);
  if (found === undefined) throw new Error(`no operation ${operationId}`);
  return found.operation;
}

/** Follows a local `$ref` such as `#/components/schemas/Error`. */
function resolve(document: OpenApiDocument, ref: string): unknown {
  expect(ref.startsWith('#/')).toBe(true);
  return ref
    .slice(2)
    .split('/')
    .reduce<unknown>((node, name) => (node as Json | undefined)?.[name], document);
}

function newCategorySchema(document: OpenApiDocument): Json {
  return ((document['components'] as Json)['schemas'] as Record<string, Json>)['NewCategory'] as Json;
}

function defaultDocument(): OpenApiDocument {
  return testPetstore().petstore.openapi;
}

describe('GET /openapi.json', () => {
  it('is served without a key, with the anonymous rate-limit headers, as JSON of petstore.openapi', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.handle(request('/openapi.json', {}));
    expect(response.status).toBe(200);
    expect(response.headers).toMatchObject({
      'content-type': 'application/json; charset=utf-8',
      'x-ratelimit-limit': '30',
      'x-ratelimit-remaining': '29',
    });
    expect(response.headers['www-authenticate']).toBeUndefined();
    expect(response.body).toBe(JSON.stringify(petstore.openapi));
    expect(parse(response)).toEqual(petstore.openapi);
  });

  it('charges the anonymous quota of the client address', async () => {
    const { petstore } = testPetstore({
      rateLimit: { store: testRateLimitStore(), anonymous: { requestsPerMinute: 2, requestsPerDay: 100 } },
    });
    expect((await petstore.handle(request('/openapi.json', {}))).status).toBe(200);
    expectError(await petstore.handle(request('/categories', {})), 401, 'unauthorized');
    const limited = await petstore.handle(request('/openapi.json', {}));
    expectError(limited, 429, 'rate_limited');
    expect(limited.headers['retry-after']).toBe('60');
    expect((await petstore.handle({ ...request('/openapi.json', {}), clientAddress: '198.51.100.9' })).status).toBe(200);
  });

  it('charges the key when a valid key is sent', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.handle(request('/openapi.json'));
    expect(response.status).toBe(200);
    expect(response.headers).toMatchObject({ 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '59' });
    expect((await petstore.handle(request('/categories'))).headers['x-ratelimit-remaining']).toBe('58');
    expect((await petstore.handle(request('/openapi.json', {}))).headers['x-ratelimit-remaining']).toBe('29');
  });

  it.each(['Bearer not-a-key', 'Bearer a b'])('is served, not 401, with Authorization: %s, charged as anonymous', async (authorization) => {
    const { petstore } = testPetstore();
    const response = await petstore.handle(request('/openapi.json', { authorization }));
    expect(response.status).toBe(200);
    expect(response.headers).toMatchObject({ 'x-ratelimit-limit': '30', 'x-ratelimit-remaining': '29' });
    expect(response.headers['www-authenticate']).toBeUndefined();
  });

  it('answers HEAD with the headers and no body', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.handle(request('/openapi.json', {}, 'HEAD'));
    expect(response.status).toBe(200);
    expect(response.body).toBeUndefined();
    expect(response.headers).toMatchObject({ 'content-type': 'application/json; charset=utf-8', 'x-ratelimit-remaining': '29' });
  });

  it('answers other methods 405 with a key and 401 without one', async () => {
    const { petstore } = testPetstore();
    const withKey = await petstore.handle(request('/openapi.json', FREE_AUTH, 'POST'));
    expectError(withKey, 405, 'method_not_allowed');
    expect(withKey.headers['allow']).toBe('GET, HEAD');
    expectError(await petstore.handle(request('/openapi.json', {}, 'DELETE')), 401, 'unauthorized');
  });

  it('serves the document through the Fetch entry under the prefix', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.fetch(new Request('http://x/v1/openapi.json'));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(petstore.openapi);
  });
});

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.0.3, version 1.0.0, and plain JSON', () => {
    const document = defaultDocument();
    expect(document['openapi']).toBe('3.0.3');
    expect(OPENAPI_VERSION).toBe('3.0.3');
    expect(document['info']).toMatchObject({ title: 'Petstore', version: '1.0.0', description: expect.any(String) });
    expect((document['info'] as Json)['license']).toEqual({ name: 'MIT', url: 'https://opensource.org/licenses/MIT' });
    expect(API_DESCRIPTION_VERSION).toBe('1.0.0');
    expect(JSON.parse(JSON.stringify(document))).toEqual(document);
  });

  it('uses the configured title, description and license', () => {
    const { petstore } = testPetstore({ openapi: { title: 'Acme pets', description: 'Our pets.', license: { name: 'Proprietary' } } });
    expect(petstore.openapi['info']).toEqual({ title: 'Acme pets', version: '1.0.0', description: 'Our pets.', license: { name: 'Proprietary' } });
  });

  describe('servers', () => {
    it('defaults to the relative /v1', () => {
      const servers = defaultDocument()['servers'] as Json[];
      expect(servers).toHaveLength(1);
      expect(servers[0]).toMatchObject({ url: '/v1' });
    });

    it('lists the configured production and staging addresses, without a trailing slash', () => {
      const { petstore } = testPetstore({
        openapi: { servers: { production: 'https://api.example.com/v1', staging: 'https://staging.example.com/pets/v1/' } },
      });
      expect(petstore.openapi['servers']).toEqual([
        { url: 'https://api.example.com/v1', description: 'Production' },
        { url: 'https://staging.example.com/pets/v1', description: 'Staging' },
      ]);
    });

    it('takes any mount path on an http: or https: address', () => {
      const { petstore } = testPetstore({
        openapi: { servers: { production: 'https://example.com/api/petstore/', staging: 'http://127.0.0.1:8080' } },
      });
      expect(petstore.openapi['servers']).toEqual([
        { url: 'https://example.com/api/petstore', description: 'Production' },
        { url: 'http://127.0.0.1:8080', description: 'Staging' },
      ]);
    });

    it('lists only the addresses configured', () => {
      const { petstore } = testPetstore({ openapi: { servers: { staging: 'https://staging.example.com/v1' } } });
      expect(petstore.openapi['servers']).toEqual([{ url: 'https://staging.example.com/v1', description: 'Staging' }]);
    });

    it.each([
      ['production', 'javascript:alert(1)//v1'],
      ['production', 'data:text/html,<script>alert(1)</script>/v1'],
      ['production', 'ftp://api.example.com/v1'],
      ['production', 'https://user:secret@api.example.com/v1'],
      ['production', '/v1'],
      ['staging', 'not a url'],
      ['staging', 'file:///etc/passwd'],
    ] as const)('throws TypeError at createPetstore for a %s address of %j', (environment, url) => {
      expect(() => testPetstore({ openapi: { servers: { [environment]: url } } })).toThrow(TypeError);
      expect(() => buildOpenApiDocument({ servers: { [environment]: url } }, { deprecations: {}, stability: {} })).toThrow(
        new RegExp(environment),
      );
    });
  });

  it('requires bearer authentication globally, and none only for getOpenApiDocument', () => {
    const document = defaultDocument();
    expect(document['security']).toEqual([{ bearerAuth: [] }]);
    expect(((document['components'] as Json)['securitySchemes'] as Json)['bearerAuth']).toMatchObject({ type: 'http', scheme: 'bearer' });
    for (const { operation: entry } of operationsOf(document)) {
      if (entry['operationId'] === 'getOpenApiDocument') expect(entry['security']).toEqual([]);
      else expect(entry).not.toHaveProperty('security');
    }
  });

  it('holds the operations of the service at their paths, each once', () => {
    const document = defaultDocument();
    expect(operationsOf(document).map(({ path, method, operation: entry }) => [method, path, entry['operationId']])).toEqual([
      ['get', '/categories', 'listCategories'],
      ['post', '/categories', 'createCategory'],
      ['get', '/pets/{petId}', 'getPetById'],
      ['get', '/store/orders', 'listStoreOrders'],
      ['get', '/openapi.json', 'getOpenApiDocument'],
    ]);
    expect(new Set(operationsOf(document).map(({ operation: entry }) => entry['operationId']))).toEqual(new Set(OPERATION_IDS));
    const tagNames = (document['tags'] as Json[]).map((tag) => tag['name']);
    for (const { operation: entry } of operationsOf(document)) {
      for (const tag of entry['tags'] as string[]) expect(tagNames).toContain(tag);
    }
  });

  it('marks getPetById, and only it, deprecated by default: Deprecation headers, no sunset and no 410', () => {
    const document = defaultDocument();
    for (const { operation: entry } of operationsOf(document)) {
      expect(entry['deprecated']).toBe(entry['operationId'] === 'getPetById' ? true : undefined);
    }
    const getPetById = operation(document, 'getPetById');
    expect(getPetById['description']).toBeUndefined();
    expect(Object.keys(getPetById['responses'] as Json)).not.toContain('410');
  });

  it('gives getPetById a configured sunset, its headers and 410', () => {
    const deprecations = { getPetById: { deprecatedAtMs: Date.UTC(2026, 0, 1), sunsetAtMs: Date.UTC(2027, 0, 1) } };
    const document = testPetstore({ deprecations }).petstore.openapi as unknown as Json;
    const getPetById = operation(document, 'getPetById');
    expect(getPetById['description']).toContain('Fri, 01 Jan 2027 00:00:00 GMT');
    const responses = getPetById['responses'] as Record<string, Json>;
    expect(Object.keys(responses['200']?.['headers'] as Json)).toEqual(
      expect.arrayContaining(['Deprecation', 'Sunset', 'Link']),
    );
    expect(Object.keys(responses['410']?.['headers'] as Json)).toEqual(expect.arrayContaining(['Deprecation', 'Sunset']));
    expect(getPetById['parameters']).toEqual([
      expect.objectContaining({ name: 'petId', in: 'path', required: true, schema: { type: 'integer', format: 'int64', minimum: 1 } }),
    ]);
  });

  it('follows configured deprecations', () => {
    const { petstore } = testPetstore({
      deprecations: { getPetById: null, listStoreOrders: { deprecatedAtMs: 0 } },
    });
    expect(operation(petstore.openapi, 'getPetById')['deprecated']).toBeUndefined();
    expect(operation(petstore.openapi, 'getPetById')['description']).toBeUndefined();
    const listStoreOrders = operation(petstore.openapi, 'listStoreOrders');
    expect(listStoreOrders['deprecated']).toBe(true);
    expect(listStoreOrders['description']).toBeUndefined();
  });

  it('carries configured stability markers in x-stability, and none by default', () => {
    for (const { operation: entry } of operationsOf(defaultDocument())) expect(entry).not.toHaveProperty('x-stability');
    const { petstore } = testPetstore({ stability: { listStoreOrders: 'beta', getPetById: 'experimental' } });
    expect(operation(petstore.openapi, 'listStoreOrders')['x-stability']).toBe('beta');
    expect(operation(petstore.openapi, 'getPetById')['x-stability']).toBe('experimental');
    expect(operation(petstore.openapi, 'listCategories')).not.toHaveProperty('x-stability');
  });

  it('gives every response of every operation the X-RateLimit-* headers', () => {
    const document = defaultDocument();
    for (const { operation: entry } of operationsOf(document)) {
      for (const [status, response] of Object.entries(entry['responses'] as Record<string, Json>)) {
        const headers = response['headers'] as Record<string, { $ref: string }>;
        for (const name of ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']) {
          expect(headers[name], `${String(entry['operationId'])} ${status} ${name}`).toBeDefined();
          expect(resolve(document, headers[name]!.$ref)).toMatchObject({ schema: { type: 'integer' } });
        }
      }
    }
  });

  it('states every plan\'s limits and algorithm, and the anonymous policy\'s, in x-rate-limits (fixed by default)', () => {
    expect(defaultDocument()['x-rate-limits']).toEqual({
      plans: {
        free: { requestsPerMinute: 60, requestsPerDay: 1_000, algorithm: 'fixed' },
        pro: { requestsPerMinute: 300, requestsPerDay: 10_000, algorithm: 'fixed' },
        business: { requestsPerMinute: 1_000, requestsPerDay: 100_000, algorithm: 'fixed' },
        enterprise: { requestsPerMinute: 1_000, requestsPerDay: 100_000, algorithm: 'fixed' },
      },
      anonymous: { requestsPerMinute: 30, requestsPerDay: 500, algorithm: 'fixed' },
    });
  });

  it('follows rateLimit.algorithm and each plan\'s own algorithm, in x-rate-limits, the description and the headers a generated client documents', () => {
    const { petstore } = testPetstore({
      rateLimit: {
        store: testRateLimitStore(),
        algorithm: 'gcra',
        plans: { free: { requestsPerMinute: 10, requestsPerDay: 100, algorithm: 'sliding' }, pro: { requestsPerMinute: 300, requestsPerDay: 10_000, algorithm: 'fixed' } },
        anonymous: { requestsPerMinute: 5, requestsPerDay: 50, algorithm: 'sliding' },
      },
    });
    const document = petstore.openapi;
    expect(document['x-rate-limits']).toEqual({
      plans: {
        free: { requestsPerMinute: 10, requestsPerDay: 100, algorithm: 'sliding' },
        pro: { requestsPerMinute: 300, requestsPerDay: 10_000, algorithm: 'fixed' },
        // Not configured: the default limits, counted by rateLimit.algorithm.
        business: { requestsPerMinute: 1_000, requestsPerDay: 100_000, algorithm: 'gcra' },
        enterprise: { requestsPerMinute: 1_000, requestsPerDay: 100_000, algorithm: 'gcra' },
      },
      anonymous: { requestsPerMinute: 5, requestsPerDay: 50, algorithm: 'sliding' },
    });
    const description = (document['info'] as Json)['description'] as string;
    expect(description).toContain(
      "Rate limits, in units (a request costs its operation's x-rate-limit-cost): free, 10 a minute and 100 a day; pro, 300 a minute and 10,000 a day; " +
        "business, 1,000 a minute and 100,000 a day; enterprise, each key's own limits, else 1,000 a minute and 100,000 a day; callers without a valid key, 5 a minute and 50 a day per client address.",
    );
    expect(description).toContain(
      'Algorithms (x-rate-limits): pro: fixed windows; free, callers without a valid key: sliding windows; business, enterprise: GCRA (a burst of the limit at once, then the limit spread evenly over the window).',
    );
    const headers = (document['components'] as Json)['headers'] as Record<string, Json>;
    expect(headers['X-RateLimit-Reset']?.['description']).toBe(
      'Unix time, in whole seconds rounded up, at which that window has its whole quota back; by algorithm, fixed windows (pro): the end of the current window; ' +
        'sliding windows (free, callers without a valid key): the end of the next window while the current one counts units, else the end of the current one; ' +
        'GCRA (a burst of the limit at once, then the limit spread evenly over the window) (business, enterprise): when the whole burst is back.',
    );
    expect(headers['Retry-After']?.['description']).toContain('sliding windows (free, callers without a valid key): until the window has room for the cost again');
    expect(headers['Retry-After']?.['description']).toContain('a retry of the same cost after exactly that many seconds is admitted');
  });

  it('names only the algorithms in use: every window fixed by default', () => {
    const headers = (defaultDocument()['components'] as Json)['headers'] as Record<string, Json>;
    expect(headers['X-RateLimit-Reset']?.['description']).toBe(
      'Unix time, in whole seconds rounded up, at which that window has its whole quota back; by algorithm, fixed windows (free, pro, business, enterprise, callers without a valid key): the end of the current window.',
    );
    expect(headers['Retry-After']?.['description']).not.toMatch(/sliding|GCRA/);
    expect((defaultDocument()['info'] as Json)['description']).toContain('Algorithms (x-rate-limits): free, pro, business, enterprise, callers without a valid key: fixed windows.');
  });

  it('gives every operation a 429 with Retry-After', () => {
    const document = defaultDocument();
    for (const { operation: entry } of operationsOf(document)) {
      const tooMany = (entry['responses'] as Record<string, Json>)['429'];
      expect(tooMany, String(entry['operationId'])).toBeDefined();
      const retryAfter = (tooMany?.['headers'] as Record<string, { $ref: string }>)['Retry-After'];
      expect(resolve(document, retryAfter!.$ref)).toMatchObject({ schema: { type: 'integer', minimum: 1 } });
    }
  });

  it('answers every 4xx, 5xx and default response with the Error schema', () => {
    const document = defaultDocument();
    let checked = 0;
    for (const { operation: entry } of operationsOf(document)) {
      for (const [status, response] of Object.entries(entry['responses'] as Record<string, Json>)) {
        if (status !== 'default' && !/^[45]\d\d$/.test(status)) continue;
        expect(response['content'], `${String(entry['operationId'])} ${status}`).toEqual({
          'application/json': { schema: { $ref: '#/components/schemas/Error' } },
        });
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(10);
  });

  it('documents the answers of the category operations', () => {
    const document = defaultDocument();
    expect(Object.keys(operation(document, 'listCategories')['responses'] as Json)).toEqual(
      expect.arrayContaining(['200', '401', '429']),
    );
    const create = operation(document, 'createCategory');
    expect(Object.keys(create['responses'] as Json)).toEqual(expect.arrayContaining(['201', '400', '401', '413', '415', '429']));
    expect(create['requestBody']).toEqual({
      required: true,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/NewCategory' } } },
    });
  });

  it('resolves every $ref', () => {
    const document = defaultDocument();
    const refs: string[] = [];
    JSON.stringify(document, (name, value: unknown) => {
      if (name === '$ref') refs.push(value as string);
      return value;
    });
    expect(refs.length).toBeGreaterThan(20);
    for (const ref of refs) expect(resolve(document, ref), ref).toBeDefined();
  });

  describe('schemas', () => {
    it('gives Category an int64 id and requires id and name', () => {
      const category = ((defaultDocument()['components'] as Json)['schemas'] as Record<string, Json>)['Category'] as Json;
      expect((category['properties'] as Record<string, Json>)['id']).toMatchObject({ type: 'integer', format: 'int64', minimum: 1 });
      expect(category['required']).toEqual(['id', 'name']);
    });

    it('gives the Error schema exactly code, message and status, with the closed set of codes', () => {
      const error = ((defaultDocument()['components'] as Json)['schemas'] as Record<string, Json>)['Error'] as Json;
      expect(error).toMatchObject({ type: 'object', required: ['code', 'message', 'status'], additionalProperties: false });
      expect(Object.keys(error['properties'] as Json).sort()).toEqual(['code', 'message', 'status']);
      expect((error['properties'] as Record<string, Json>)['code']?.['enum']).toEqual([...ERROR_CODES]);
    });

    it('gives NewCategory no extra fields, a required non-empty name, a control-character pattern, maxLength in code points and x-max-graphemes', () => {
      const schema = newCategorySchema(defaultDocument());
      expect(schema).toMatchObject({ type: 'object', additionalProperties: false, required: ['name'] });
      expect(Object.keys(schema['properties'] as Json).sort()).toEqual(['description', 'name']);
      const name = (schema['properties'] as Record<string, Json>)['name'] as Json;
      expect(name).toMatchObject({ type: 'string', minLength: 1, maxLength: 400, 'x-max-graphemes': 100, pattern: expect.any(String) });
      expect((schema['properties'] as Record<string, Json>)['description']).toMatchObject({
        type: 'string',
        maxLength: 4000,
        'x-max-graphemes': 1000,
      });
    });

    it('has a name maxLength that the server applies in code points, not UTF-16 code units', () => {
      const name = (newCategorySchema(defaultDocument())['properties'] as Record<string, Json>)['name'] as Json;
      const family = '👨‍👩‍👧'; // one character: 5 code points, 8 code units
      const atBound = family.repeat((name['maxLength'] as number) / 5);
      expect([...atBound]).toHaveLength(name['maxLength'] as number);
      expect(atBound.length).toBeGreaterThan(name['maxLength'] as number);
      expect(parseNewCategory({ name: atBound }).success).toBe(true);
      expect(parseNewCategory({ name: `${atBound}a` }).success).toBe(false);
    });

    it('has a name pattern that rejects what the server rejects for control characters', () => {
      const name = (newCategorySchema(defaultDocument())['properties'] as Record<string, Json>)['name'] as Json;
      const pattern = new RegExp(name['pattern'] as string);
      expect(pattern.test('a\u0007b')).toBe(false);
      expect(parseNewCategory({ name: 'a\u0007b' }).success).toBe(false);
      for (const accepted of ['Dogs', 'Chats de gouttière', 'Hunde 🐕', 'a\u00a0b', 'x\u00a1y']) {
        expect(pattern.test(accepted), accepted).toBe(true);
        expect(parseNewCategory({ name: accepted }).success, accepted).toBe(true);
      }
      // Every code point up to U+00FF inside a name: the pattern and the server agree.
      for (let codePoint = 0; codePoint <= 0xff; codePoint++) {
        const candidate = `a${String.fromCodePoint(codePoint)}b`;
        const label = `U+${codePoint.toString(16).padStart(4, '0')}`;
        expect(pattern.test(candidate), label).toBe(parseNewCategory({ name: candidate }).success);
      }
    });
  });
});

describe('listCategories in the description', () => {
  it('describes limit and after (with the bounds the server enforces), If-None-Match, the ETag and Link headers and the 304', async () => {
    const { petstore } = testPetstore();
    const list = operation(petstore.openapi, 'listCategories');
    const parameters = list['parameters'] as Json[];
    expect(parameters.map((parameter) => `${parameter['in'] as string}:${parameter['name'] as string}`)).toEqual(['query:limit', 'query:after', 'header:If-None-Match']);
    const limit = (parameters[0] as Json)['schema'] as Json;
    const after = (parameters[1] as Json)['schema'] as Json;
    // The bounds the pipeline accepts, one past them refused.
    for (const [query, status] of [
      [`limit=${limit['minimum'] as number}`, 200],
      [`limit=${limit['maximum'] as number}`, 200],
      [`limit=${(limit['maximum'] as number) + 1}`, 400],
      [`after=${after['minimum'] as number}`, 200],
      [`after=${after['maximum'] as number}`, 200],
      [`after=${(after['maximum'] as number) + 1}`, 400],
    ] as const) {
      expect((await petstore.handle(request(`/categories?${query}`, FREE_AUTH))).status, query).toBe(status);
    }
    const responses = list['responses'] as Record<string, Json>;
    expect(Object.keys(responses['200']?.['headers'] as Json)).toEqual(expect.arrayContaining(['ETag', 'Link', 'X-RateLimit-Remaining']));
    expect(Object.keys(responses['304']?.['headers'] as Json)).toEqual(expect.arrayContaining(['ETag', 'X-RateLimit-Remaining']));
    expect(responses['304']?.['content']).toBeUndefined();
    expect(resolve(petstore.openapi, ((responses['200']?.['headers'] as Json)['Link'] as Json)['$ref'] as string)).toMatchObject({
      description: expect.stringContaining('rel="next"'),
    });
  });
});

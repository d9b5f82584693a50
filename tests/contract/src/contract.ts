/**
 * The HTTP contract of the petstore API (docs/http-api.md): the category operations, the host operations
 * (getPetById, deprecated; listStoreOrders, beta), `/openapi.json`, and a host route behind the adapter's
 * guard — one list of cases, run against every server implementation of `servers.ts` over real sockets.
 * Call it inside a `describe` block.
 *
 * Most cases share one server per implementation and use their own API key; cases that move the clock, use
 * up the per-address anonymous quota or need other options (no handlers, another deprecation) start a server
 * of their own.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
// The core's own probe (test support, not part of any package's exports), shared rather than copied.
import { pollutionProbe } from '../../../packages/core/test-support/pollution-probe.js';
import { itWhen } from './it-when.js';
import { RawConnection } from './raw-http.js';
import {
  call,
  expectError,
  expectJsonContentType,
  expectRateLimitHeaders,
  expectRateLimited,
  intHeader,
  jsonOf,
  secondsToWindowEnd,
  type Answer,
} from './http-client.js';
import {
  ANONYMOUS_LIMITS,
  API_KEYS,
  BROKEN_PET_ID,
  HOST_ACCOUNT_ID,
  HOST_REFUSAL,
  HOST_REFUSAL_HEADER,
  SLOW_PET_ID,
  PET_DEPRECATION,
  EXPENSIVE_REPORT_COST,
  REPORTS_ACCOUNT_ID,
  SHARED_ACCOUNT_ID,
  SHARED_LIMITS,
  SMALL_LIMITS,
  STORE_ORDERS,
  type RunningServer,
  type ServerImpl,
  type StartOptions,
} from './servers.js';

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
const INVALID_KEY = 'not-a-valid-key-7Qx2Lp9Zr4';

interface CategoryJson {
  id: number;
  name: string;
  description?: string;
}

/** The `rel` of each `Link` header entry, by target URL (RFC 8288; enough for the links the API sends). */
function linksOf(answer: Answer): Map<string, string> {
  const links = new Map<string, string>();
  for (const match of (answer.headers.get('link') ?? '').matchAll(/<([^>]*)>([^,]*)/g)) {
    const rel = /;\s*rel="?([^";]+)"?/.exec(match[2] ?? '')?.[1];
    if (rel !== undefined) links.set(match[1] as string, rel);
  }
  return links;
}

/**
 * Asserts the deprecation headers of getPetById (docs/http-api.md, "Deprecation, sunset and stability"): `Deprecation: @<unix-seconds>` (RFC 9745),
 * `Sunset: <IMF-fixdate>` (RFC 8594), and `Link` with rel="deprecation" and rel="sunset".
 */
function expectPetDeprecationHeaders(answer: Answer): void {
  expect(answer.headers.get('deprecation')).toBe(`@${PET_DEPRECATION.deprecatedAtMs / 1000}`);
  expect(answer.headers.get('sunset')).toBe(new Date(PET_DEPRECATION.sunsetAtMs).toUTCString());
  const links = linksOf(answer);
  expect(links.get(PET_DEPRECATION.documentationUrl), answer.headers.get('link') ?? '(no Link)').toBe('deprecation');
  expect(links.get(PET_DEPRECATION.sunsetUrl), answer.headers.get('link') ?? '(no Link)').toBe('sunset');
}

/**
 * Registers the contract cases for one server implementation: every case, or with `bodyCasesOnly` the cases that
 * send a request body (the categories operations, bad bodies, creates under load, costs, host refusals) and the
 * host-parser cases — for a second run of a framework whose only difference is a host JSON parser in front of
 * the API, which a request without a body never reaches.
 */
export function defineContractCases(impl: ServerImpl, { bodyCasesOnly = false }: { bodyCasesOnly?: boolean } = {}): void {
  const allCases = !bodyCasesOnly;
  let server: RunningServer;
  beforeAll(async () => {
    server = await impl.start();
  });
  afterAll(async () => {
    await server?.close();
  });
  // The petstore's reports of internal errors are kept, not printed: a case that provokes one takes it (and
  // asserts it); any other is a failure, shown here.
  let internalErrorsTaken = 0;
  afterEach(() => {
    expect(server.internalErrors.slice(internalErrorsTaken), 'internal errors no case expected').toEqual([]);
  });

  /** Runs `body` against a server of its own (started with `options`), closed afterwards. */
  async function withOwnServer(body: (own: RunningServer) => Promise<void>, options?: StartOptions): Promise<void> {
    const own = await impl.start(options);
    try {
      await body(own);
      expect(own.internalErrors, 'internal errors no case expected').toEqual([]);
    } finally {
      await own.close();
    }
  }

  const list = async (apiKey: string = API_KEYS.general): Promise<CategoryJson[]> => {
    const answer = await call(server, '/v1/categories', { apiKey });
    expect(answer.status, answer.text).toBe(200);
    return jsonOf(answer) as CategoryJson[];
  };

  // ---- listCategories and the rate-limit headers ----

  it('GET /v1/categories answers 200 with a JSON array, the rate-limit headers, and remaining falling by one', async () => {
    const remaining: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      const answer = await call(server, '/v1/categories', { apiKey: API_KEYS.list });
      expect(answer.status, answer.text).toBe(200);
      expectJsonContentType(answer);
      expect(Array.isArray(jsonOf(answer))).toBe(true);
      const headers = expectRateLimitHeaders(answer, server);
      expect(headers.limit).toBe(60); // free plan, the minute window binds
      remaining.push(headers.remaining);
    }
    expect(remaining).toEqual([59, 58, 57]);
  });

  it('HEAD /v1/categories answers 200 with the headers and no body', async () => {
    const answer = await call(server, '/v1/categories', { method: 'HEAD', apiKey: API_KEYS.general });
    expect(answer.status).toBe(200);
    expectJsonContentType(answer);
    expectRateLimitHeaders(answer, server);
    expect(answer.text).toBe('');
  });

  // ---- listCategories: ETag, If-None-Match, paging ----

  it('tags the list with a strong ETag; If-None-Match with it answers 304 with no body, the ETag and the rate-limit headers, charged', async () => {
    const full = await call(server, '/v1/categories', { apiKey: API_KEYS.general });
    expect(full.status, full.text).toBe(200);
    const etag = full.headers.get('etag') as string;
    expect(etag).toMatch(/^"[^"]+"$/);
    const notModified = await call(server, '/v1/categories', { apiKey: API_KEYS.general, headers: { 'if-none-match': `"other", W/${etag}` } });
    expect(notModified.status).toBe(304);
    expect(notModified.text).toBe('');
    expect(notModified.headers.get('etag')).toBe(etag);
    // No Content-Type from the API (RFC 9110 §15.4.5); @hono/node-server, serving the Fetch entry, gives every answer
    // without one its own default.
    expect(notModified.headers.get('content-type')).toBe(impl.name === 'fetch' ? 'text/plain; charset=UTF-8' : null);
    const charged = expectRateLimitHeaders(notModified, server);
    expect(charged.remaining).toBe(intHeader(full, 'x-ratelimit-remaining') - 1);
    const created = await call(server, '/v1/categories', { method: 'POST', apiKey: API_KEYS.general, json: { name: 'Tagged' } });
    expect(created.status, created.text).toBe(201);
    const changed = await call(server, '/v1/categories', { apiKey: API_KEYS.general, headers: { 'if-none-match': etag } });
    expect(changed.status).toBe(200);
    expect(changed.headers.get('etag')).not.toBe(etag);
    expect(jsonOf(changed)).toContainEqual(jsonOf(created));
  });

  it('pages with ?limit=&after=: ids above after in id order, Link rel="next" while more remain, each page its own ETag', async () => {
    for (let i = 0; i < 3; i += 1) {
      expect((await call(server, '/v1/categories', { method: 'POST', apiKey: API_KEYS.general, json: { name: `Paged ${i}` } })).status).toBe(201);
    }
    const everything = (await list()).map((category) => category.id);
    const paged: number[] = [];
    const tags = new Set<string>();
    let path: string | undefined = '/v1/categories?limit=2';
    while (path !== undefined) {
      const page = await call(server, path, { apiKey: API_KEYS.general });
      expect(page.status, page.text).toBe(200);
      const ids = (jsonOf(page) as CategoryJson[]).map((category) => category.id);
      expect(ids.length).toBeLessThanOrEqual(2);
      paged.push(...ids);
      tags.add(page.headers.get('etag') as string);
      const next = [...linksOf(page)].find(([, rel]) => rel === 'next')?.[0];
      path = next === undefined ? undefined : new URL(next, `${server.origin}${path}`).pathname + new URL(next, `${server.origin}${path}`).search;
    }
    expect(paged).toEqual(everything);
    expect(tags.size).toBe(Math.ceil(everything.length / 2));
    const last = await call(server, `/v1/categories?limit=2&after=${everything[everything.length - 1]}`, { apiKey: API_KEYS.general });
    expect(jsonOf(last)).toEqual([]);
    expect(last.headers.get('link')).toBeNull();
  });

  it.each(['limit=0', 'limit=1001', 'limit=x', 'after=-1', 'limit=1&limit=2', `after=${'9'.repeat(2000)}`])(
    'answers ?%s with 400 validation_failed and the Error body',
    async (query) => {
      const answer = await call(server, `/v1/categories?${query}`, { apiKey: API_KEYS.general, headers: { 'if-none-match': '*' } });
      expectError(answer, server, 400, 'validation_failed');
    },
  );

  // ---- createCategory ----

  it('POST /v1/categories creates: 201 {id, name}, description only when sent, then GET lists them', async () => {
    const plain = await call(server, '/v1/categories', {
      method: 'POST',
      apiKey: API_KEYS.general,
      json: { name: 'Birds' },
    });
    expect(plain.status, plain.text).toBe(201);
    expectJsonContentType(plain);
    expectRateLimitHeaders(plain, server);
    const birds = jsonOf(plain) as CategoryJson;
    expect(Object.keys(birds).sort()).toEqual(['id', 'name']);
    expect(birds.name).toBe('Birds');
    expect(Number.isSafeInteger(birds.id) && birds.id > 0).toBe(true);

    const described = await call(server, '/v1/categories', {
      method: 'POST',
      apiKey: API_KEYS.general,
      json: { name: 'Cats', description: 'Felines of every breed' },
    });
    expect(described.status, described.text).toBe(201);
    const cats = jsonOf(described) as CategoryJson;
    expect(Object.keys(cats).sort()).toEqual(['description', 'id', 'name']);
    expect(cats).toMatchObject({ name: 'Cats', description: 'Felines of every breed' });
    expect(Number.isSafeInteger(cats.id) && cats.id > 0).toBe(true);
    expect(cats.id).not.toBe(birds.id);

    const listed = await list();
    expect(listed).toContainEqual(birds);
    expect(listed).toContainEqual(cats);
  });

  it('accepts Content-Type: application/json; charset=utf-8 and a name of exactly 100 characters', async () => {
    const name = 'n'.repeat(100);
    const answer = await call(server, '/v1/categories', {
      method: 'POST',
      apiKey: API_KEYS.general,
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: JSON.stringify({ name }),
    });
    expect(answer.status, answer.text).toBe(201);
    expect(jsonOf(answer)).toMatchObject({ name });
  });

  // ---- createCategory with Idempotency-Key ----

  const createWithKey = (idempotencyKey: string, json: unknown, apiKey: string = API_KEYS.general) =>
    call(server, '/v1/categories', { method: 'POST', apiKey, json, headers: { 'idempotency-key': idempotencyKey } });
  let keySequence = 0;
  /** A fresh sf-string key per use: the shared server keeps every key for 24 h. */
  const freshKey = () => `"${impl.name}-${randomUUID()}-${(keySequence += 1)}"`;

  it('replays a create sent again with the same Idempotency-Key and body: 201, the same category, Idempotent-Replayed: true', async () => {
    const key = freshKey();
    const first = await createWithKey(key, { name: 'Idempotent dogs' });
    expect(first.status, first.text).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await createWithKey(key, { name: 'Idempotent dogs' });
    expect(again.status, again.text).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expectRateLimitHeaders(again, server);
    expect(jsonOf(again)).toEqual(jsonOf(first));
    const created = jsonOf(first) as CategoryJson;
    expect((await list()).filter((category) => category.id === created.id)).toHaveLength(1);
  });

  it('answers 422 idempotency_key_reused for the same key with another body, and creates nothing', async () => {
    const key = freshKey();
    expect((await createWithKey(key, { name: 'Reused A' })).status).toBe(201);
    const before = (await list()).length;
    expectError(await createWithKey(key, { name: 'Reused B' }), server, 422, 'idempotency_key_reused');
    expect((await list()).length).toBe(before);
  });

  it('answers 422 idempotency_key_reused when only the description differs: the whole body is the fingerprint', async () => {
    const key = freshKey();
    expect((await createWithKey(key, { name: 'Described', description: 'first' })).status).toBe(201);
    const before = (await list()).length;
    expectError(await createWithKey(key, { name: 'Described', description: 'second' }), server, 422, 'idempotency_key_reused');
    expectError(await createWithKey(key, { name: 'Described' }), server, 422, 'idempotency_key_reused');
    expect((await list()).length).toBe(before);
  });

  it('scopes Idempotency-Key to the API key: another caller with the same key creates its own category', async () => {
    const key = freshKey();
    const mine = await createWithKey(key, { name: 'Scoped' });
    const theirs = await createWithKey(key, { name: 'Scoped' }, API_KEYS.other);
    expect([mine.status, theirs.status]).toEqual([201, 201]);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect((jsonOf(theirs) as CategoryJson).id).not.toBe((jsonOf(mine) as CategoryJson).id);
  });

  it('answers 400 invalid_idempotency_key for a key that is not a structured-field string of 1-255 characters', async () => {
    const before = (await list()).length;
    for (const bad of ['unquoted-token', '""', `"${'k'.repeat(256)}"`, '"a";p=1', '"a", "b"']) {
      expectError(await createWithKey(bad, { name: 'Never' }), server, 400, 'invalid_idempotency_key');
    }
    expect((await list()).length).toBe(before);
  });

  it('creates one category for 50 parallel creates with one key: every answer is 201 with it (replays) or 409 in flight', async () => {
    const key = freshKey();
    const answers = await Promise.all(Array.from({ length: 50 }, () => createWithKey(key, { name: 'Burst of one' })));
    const created = answers.filter((answer) => answer.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    for (const answer of answers.filter((a) => a.status !== 201)) expectError(answer, server, 409, 'idempotency_key_in_flight');
    const bodies = new Set(created.map((answer) => answer.text));
    expect(bodies.size).toBe(1);
    expect(created.filter((answer) => answer.headers.get('idempotent-replayed') === null)).toHaveLength(1);
    const id = (jsonOf(created[0] as Answer) as CategoryJson).id;
    expect((await list()).filter((category) => category.name === 'Burst of one' && category.id === id)).toHaveLength(1);
    expect((await list()).filter((category) => category.name === 'Burst of one')).toHaveLength(1);
  });

  itWhen(impl.capabilities.hostJsonParser === undefined, 'a server whose host parses the body before the API sees the request')(
    'answers 409 idempotency_key_in_flight with Retry-After to a repeat sent while the first is still sending its body',
    async () => {
      const key = freshKey();
      const body = '{"name":"In flight"}';
      const slow = await RawConnection.open(server.origin);
      try {
        const head = [
          'POST /v1/categories HTTP/1.1',
          'Host: 127.0.0.1',
          `Authorization: Bearer ${API_KEYS.general}`,
          'Content-Type: application/json',
          `Idempotency-Key: ${key}`,
          `Content-Length: ${body.length}`,
          '',
          '',
        ].join('\r\n');
        // The first request is in flight once the API has admitted it (it charges the key, then waits for the
        // body): a GET with the same key then sees one request more than its own. Waits for that, no longer.
        const remaining = async () => intHeader(await call(server, '/v1/categories', { apiKey: API_KEYS.general }), 'x-ratelimit-remaining');
        let last = await remaining();
        await slow.write(head + body.slice(0, 5));
        for (let now = await remaining(); now !== last - 2; now = await remaining()) last = now;
        const repeat = await createWithKey(key, { name: 'In flight' });
        expectError(repeat, server, 409, 'idempotency_key_in_flight');
        expect(intHeader(repeat, 'retry-after')).toBeGreaterThanOrEqual(1);
        await slow.write(body.slice(5));
        expect(await slow.waitForAnswers(1)).toBe(true);
        expect(slow.answers[0]?.status).toBe(201);
      } finally {
        slow.destroy();
      }
      const after = await createWithKey(key, { name: 'In flight' });
      expect(after.headers.get('idempotent-replayed')).toBe('true');
    },
  );

  // ---- authentication ----

  it('without Authorization answers 401 unauthorized with WWW-Authenticate: Bearer realm="petstore"', async () => {
    const answer = await call(server, '/v1/categories');
    expectError(answer, server, 401, 'unauthorized');
    const challenge = answer.headers.get('www-authenticate');
    expect(challenge).toBe('Bearer realm="petstore"');
    expect(challenge).not.toContain('error=');
  });

  it('with an invalid key answers 401 with error="invalid_token" and never echoes the key', async () => {
    const answer = await call(server, '/v1/categories', { apiKey: INVALID_KEY });
    expectError(answer, server, 401, 'unauthorized');
    const challenge = answer.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer realm="petstore"/);
    expect(challenge).toContain('error="invalid_token"');
    let everything = answer.text;
    answer.headers.forEach((value, name) => {
      everything += `\n${name}: ${value}`;
    });
    expect(everything).not.toContain(INVALID_KEY);
  });

  it('accepts the scheme in lower case: "bearer <key>"', async () => {
    const answer = await call(server, '/v1/categories', { headers: { authorization: `bearer ${API_KEYS.auth}` } });
    expect(answer.status, answer.text).toBe(200);
    expect(Array.isArray(jsonOf(answer))).toBe(true);
  });

  it('answers 401 to another scheme (Basic)', async () => {
    const basic = Buffer.from(`user:${API_KEYS.general}`).toString('base64');
    const answer = await call(server, '/v1/categories', { headers: { authorization: `Basic ${basic}` } });
    expectError(answer, server, 401, 'unauthorized');
    expect(answer.headers.get('www-authenticate')).toMatch(/^Bearer realm="petstore"/);
  });

  it('creates nothing for a POST with an invalid key', async () => {
    const before = await list();
    const answer = await call(server, '/v1/categories', {
      method: 'POST',
      apiKey: INVALID_KEY,
      json: { name: 'Sneaky' },
    });
    expectError(answer, server, 401, 'unauthorized');
    const after = await list();
    expect(after).toEqual(before);
    expect(after.map((category) => category.name)).not.toContain('Sneaky');
  });

  // ---- request bodies of createCategory ----

  const badBodies: Array<{
    label: string;
    status: number;
    code: string;
    body: string | Uint8Array<ArrayBuffer>;
    contentType?: string;
  }> = [
    { label: 'missing name', status: 400, code: 'validation_failed', body: '{"description":"no name"}' },
    { label: 'whitespace-only name', status: 400, code: 'validation_failed', body: '{"name":"   \\t "}' },
    { label: 'unknown field', status: 400, code: 'validation_failed', body: '{"name":"Fish","color":"red"}' },
    { label: 'name of 101 characters', status: 400, code: 'validation_failed', body: JSON.stringify({ name: 'n'.repeat(101) }) },
    { label: 'name that is not a string', status: 400, code: 'validation_failed', body: '{"name":42}' },
    { label: 'JSON array', status: 400, code: 'validation_failed', body: '[{"name":"Fish"}]' },
    { label: 'invalid JSON', status: 400, code: 'invalid_json', body: '{"name":' },
    { label: 'empty body', status: 400, code: 'invalid_json', body: '' },
    { label: 'no Content-Type', status: 400, code: 'invalid_content_type', body: new TextEncoder().encode('{"name":"Fish"}') },
    { label: 'text/plain', status: 400, code: 'invalid_content_type', body: '{"name":"Fish"}', contentType: 'text/plain' },
  ];

  it.each(badBodies)('POST with $label answers $status $code and creates nothing', async (bad) => {
    const before = await list();
    const answer = await call(server, '/v1/categories', {
      method: 'POST',
      apiKey: API_KEYS.general,
      headers: bad.body instanceof Uint8Array ? {} : { 'content-type': bad.contentType ?? 'application/json' },
      body: bad.body,
    });
    expectError(answer, server, bad.status, bad.code);
    expect(await list()).toEqual(before);
  });

  /**
   * Sends sequential GETs: the client's keep-alive pool hands the connection of an answered-early request
   * (the client was still uploading when the answer came) to the second or third of them. A server that
   * left that connection stuck makes one of them fail with "other side closed".
   */
  async function expectConnectionsStayUsable(): Promise<CategoryJson[]> {
    let listed: CategoryJson[] = [];
    for (let i = 1; i <= 3; i += 1) {
      const answer = await call(server, '/v1/categories', { apiKey: API_KEYS.general }).catch((error: unknown) => {
        const cause = (error as { cause?: { message?: string } }).cause?.message ?? String(error);
        throw new Error(`follow-up request ${i} on a kept-alive connection failed: ${cause}`);
      });
      expect(answer.status, answer.text).toBe(200);
      listed = jsonOf(answer) as CategoryJson[];
    }
    return listed;
  }

  it('answers a body of 2 MiB with 413 payload_too_large, creates nothing, and keeps the connection usable', async () => {
    const before = await list();
    const answer = await call(server, '/v1/categories', {
      method: 'POST',
      apiKey: API_KEYS.general,
      json: { name: 'Fish', description: 'd'.repeat(2 * 1024 * 1024) },
    });
    expectError(answer, server, 413, 'payload_too_large');
    expect(await expectConnectionsStayUsable()).toEqual(before);
  });

  it('keeps the connection usable after a 401 to a POST with a large body it did not read', async () => {
    const before = await list();
    const answer = await call(server, '/v1/categories', {
      method: 'POST',
      apiKey: INVALID_KEY,
      json: { name: 'Fish', description: 'd'.repeat(512 * 1024) },
    });
    expectError(answer, server, 401, 'unauthorized');
    expect(await expectConnectionsStayUsable()).toEqual(before);
  });

  it('rejects a "__proto__" field (and constructor.prototype, also nested) with 400 and pollutes no prototype', async () => {
    const probe = pollutionProbe(`petstoreContractPollutionMarker_${impl.name.replace(/\W/g, '_')}`);
    // The probe is sensitive: packages/core/test-support/pollution-probe.test.ts shows it catching what a
    // vulnerable merge of each payload does.
    await withOwnServer(async (own) => {
      for (const { field, text } of probe.payloads) {
        const answer = await call(own, '/v1/categories', {
          method: 'POST',
          apiKey: API_KEYS.general,
          headers: { 'content-type': 'application/json' },
          body: text,
        });
        expectError(answer, own, 400, 'validation_failed');
        expect((jsonOf(answer) as { message: string }).message, text).toContain(`${field}: is not a field`);
        // The servers run in this process: a polluted Object.prototype would show here.
        expect(probe.traces(), text).toEqual([]);
      }
      const nothing = await call(own, '/v1/categories', { apiKey: API_KEYS.general });
      expect(jsonOf(nothing)).toEqual([]);
      // A category created afterwards, as answered and as listed, carries no marker, own or inherited.
      const created = await call(own, '/v1/categories', { method: 'POST', apiKey: API_KEYS.general, json: { name: 'Dogs' } });
      expect(created.status, created.text).toBe(201);
      const listed = await call(own, '/v1/categories', { apiKey: API_KEYS.general });
      expect(jsonOf(listed)).toEqual([jsonOf(created)]);
      expect(created.text + listed.text).not.toContain(probe.marker);
      expect(probe.traces(jsonOf(created), ...(jsonOf(listed) as unknown[]))).toEqual([]);
    });
  });

  // ---- routing ----

  if (allCases) {
    it('answers 404 not_found for an unknown path under /v1', async () => {
      const answer = await call(server, '/v1/no-such-thing', { apiKey: API_KEYS.general });
      expectError(answer, server, 404, 'not_found');
    });

    it('answers 405 method_not_allowed with Allow: GET, HEAD, POST for DELETE /v1/categories', async () => {
      const answer = await call(server, '/v1/categories', { method: 'DELETE', apiKey: API_KEYS.general });
      expectError(answer, server, 405, 'method_not_allowed');
      expect(answer.headers.get('allow')).toBe('GET, HEAD, POST');
    });

    // ---- host operations: getPetById (deprecated) and listStoreOrders (beta) ----

    it('GET /v1/pets/7 answers 200 with the handler\'s body, Deprecation, Sunset, Link and the rate-limit headers', async () => {
      const callsBefore = server.hostCalls.length;
      const answer = await call(server, '/v1/pets/7', { apiKey: API_KEYS.host });
      expect(answer.status, answer.text).toBe(200);
      expectJsonContentType(answer);
      expect(jsonOf(answer)).toEqual({ id: 7, requestedBy: HOST_ACCOUNT_ID, stability: null });
      expectPetDeprecationHeaders(answer);
      expectRateLimitHeaders(answer, server);
      expect(server.hostCalls.slice(callsBefore)).toEqual([
        { operationId: 'getPetById', params: { petId: '7' }, query: '', accountId: HOST_ACCOUNT_ID, stability: null },
      ]);
    });

    it('GET /v1/pets/%37 (percent-encoded "7") reaches the handler as petId "7"', async () => {
      const answer = await call(server, '/v1/pets/%37', { apiKey: API_KEYS.host });
      expect(answer.status, answer.text).toBe(200);
      expect(jsonOf(answer)).toMatchObject({ id: 7 });
    });

    it('GET /v1/pets/7 without a key, or with an invalid one, answers 401 and never calls the handler', async () => {
      const callsBefore = server.hostCalls.length;
      const missing = await call(server, '/v1/pets/7');
      expectError(missing, server, 401, 'unauthorized');
      expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="petstore"');
      const invalid = await call(server, '/v1/pets/7', { apiKey: INVALID_KEY });
      expectError(invalid, server, 401, 'unauthorized');
      expect(invalid.headers.get('www-authenticate')).toContain('error="invalid_token"');
      expect(server.hostCalls.length).toBe(callsBefore);
    });

    it.each(['abc', '0', '-1', '1.5', '1e3', '9007199254740992'])(
      'GET /v1/pets/%s answers 400 validation_failed (petId is a positive integer) and never calls the handler',
      async (petId) => {
        const callsBefore = server.hostCalls.length;
        const answer = await call(server, `/v1/pets/${petId}`, { apiKey: API_KEYS.host });
        expectError(answer, server, 400, 'validation_failed');
        expectPetDeprecationHeaders(answer);
        expect(server.hostCalls.length).toBe(callsBefore);
      },
    );

    it('answers a path with malformed percent-encoding (/v1/pets/%ZZ) 404 not_found with the Error body and rate-limit headers', async () => {
      const answer = await call(server, '/v1/pets/%ZZ', { apiKey: API_KEYS.host });
      expectError(answer, server, 404, 'not_found');
    });
  }

  it('answers 404 for /v1/pets/ and /v1/pets/7/toys, and 405 with Allow: GET, HEAD for POST /v1/pets/7', async () => {
    expectError(await call(server, '/v1/pets/', { apiKey: API_KEYS.host }), server, 404, 'not_found');
    expectError(await call(server, '/v1/pets/7/toys', { apiKey: API_KEYS.host }), server, 404, 'not_found');
    const post = await call(server, '/v1/pets/7', { method: 'POST', apiKey: API_KEYS.host, json: { name: 'Rex' } });
    expectError(post, server, 405, 'method_not_allowed');
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });

  if (allCases) {
    it('GET /v1/store/orders answers 200 with the handler\'s body; the handler saw stability "beta"; no Deprecation', async () => {
      const callsBefore = server.hostCalls.length;
      const answer = await call(server, '/v1/store/orders', { apiKey: API_KEYS.host });
      expect(answer.status, answer.text).toBe(200);
      expectJsonContentType(answer);
      expect(jsonOf(answer)).toEqual(STORE_ORDERS);
      expectRateLimitHeaders(answer, server);
      expect(answer.headers.get('deprecation')).toBeNull();
      expect(answer.headers.get('sunset')).toBeNull();
      expect(server.hostCalls.slice(callsBefore)).toEqual([
        { operationId: 'listStoreOrders', params: {}, query: '', accountId: HOST_ACCOUNT_ID, stability: 'beta' },
      ]);
    });

    it('passes the query string to the host handler: GET /v1/store/orders?status=placed&limit=2', async () => {
      const callsBefore = server.hostCalls.length;
      const answer = await call(server, '/v1/store/orders?status=placed&limit=2', { apiKey: API_KEYS.host });
      expect(answer.status, answer.text).toBe(200);
      expect(server.hostCalls.slice(callsBefore).map((hostCall) => hostCall.query)).toEqual(['status=placed&limit=2']);
    });

    it('without host handlers answers 501 not_implemented for getPetById and listStoreOrders (petId still checked first)', async () => {
      await withOwnServer(
        async (own) => {
          const pet = await call(own, '/v1/pets/7', { apiKey: API_KEYS.host });
          expectError(pet, own, 501, 'not_implemented');
          expectPetDeprecationHeaders(pet);
          expectError(await call(own, '/v1/store/orders', { apiKey: API_KEYS.host }), own, 501, 'not_implemented');
          expectError(await call(own, '/v1/pets/abc', { apiKey: API_KEYS.host }), own, 400, 'validation_failed');
          // Authentication still comes first.
          expectError(await call(own, '/v1/store/orders'), own, 401, 'unauthorized');
          expect(own.hostCalls).toEqual([]);
        },
        { handlers: false },
      );
    });

    it('serves getPetById until its sunset, then answers 410 gone with Deprecation, Sunset, Link and the rate-limit headers', async () => {
      await withOwnServer(async (own) => {
        own.clock.set(PET_DEPRECATION.sunsetAtMs - 1);
        const before = await call(own, '/v1/pets/7', { apiKey: API_KEYS.host });
        expect(before.status, before.text).toBe(200);
        expectPetDeprecationHeaders(before);
        expect(own.hostCalls).toHaveLength(1);

        own.clock.set(PET_DEPRECATION.sunsetAtMs);
        const gone = await call(own, '/v1/pets/7', { apiKey: API_KEYS.host });
        expectError(gone, own, 410, 'gone');
        expectPetDeprecationHeaders(gone);

        own.clock.advance(30 * DAY_MS);
        const later = await call(own, '/v1/pets/7', { apiKey: API_KEYS.host });
        expectError(later, own, 410, 'gone');
        expectPetDeprecationHeaders(later);
        expect(own.hostCalls).toHaveLength(1);

        // Only the deprecated operation retires.
        const orders = await call(own, '/v1/store/orders', { apiKey: API_KEYS.host });
        expect(orders.status, orders.text).toBe(200);
      });
    });

    it('keeps serving getPetById after its sunset with afterSunset: "serve", still with the deprecation headers', async () => {
      await withOwnServer(
        async (own) => {
          own.clock.set(PET_DEPRECATION.sunsetAtMs + DAY_MS);
          const answer = await call(own, '/v1/pets/7', { apiKey: API_KEYS.host });
          expect(answer.status, answer.text).toBe(200);
          expect(jsonOf(answer)).toEqual({ id: 7, requestedBy: HOST_ACCOUNT_ID, stability: null });
          expectPetDeprecationHeaders(answer);
          expectRateLimitHeaders(answer, own);
        },
        { deprecation: { afterSunset: 'serve' } },
      );
    });

    it('sends the configured deprecation and sunset URLs in Link unchanged (percent-encoding kept, not encoded twice)', async () => {
      const documentationUrl = 'https://petstore.example/docs/deprecations?since=2025-12-02T12%3A34%3A56Z#get-pet-by-id';
      const sunsetUrl = 'https://petstore.example/docs/sunset%20notes';
      await withOwnServer(
        async (own) => {
          const answer = await call(own, '/v1/pets/7', { apiKey: API_KEYS.host });
          expect(answer.status, answer.text).toBe(200);
          const links = linksOf(answer);
          expect(links.get(documentationUrl), answer.headers.get('link') ?? '(no Link)').toBe('deprecation');
          expect(links.get(sunsetUrl), answer.headers.get('link') ?? '(no Link)').toBe('sunset');
        },
        { deprecation: { documentationUrl, sunsetUrl } },
      );
    });

    // ---- the OpenAPI description ----

    it('GET /v1/openapi.json without a key answers 200 with the OpenAPI 3.0.3 description and the anonymous rate-limit headers', async () => {
      const answer = await call(server, '/v1/openapi.json');
      expect(answer.status, answer.text).toBe(200);
      expectJsonContentType(answer);
      expect(answer.headers.get('www-authenticate')).toBeNull();
      const document = jsonOf(answer) as {
        openapi: string;
        info: { version: string };
        paths: Record<string, Record<string, Record<string, unknown>>>;
      };
      expect(document.openapi).toBe('3.0.3');
      expect(document.info.version).toBe('1.0.0');
      expect(document.paths['/store/orders']?.['get']).toMatchObject({ operationId: 'listStoreOrders', 'x-stability': 'beta' });
      expect(document.paths['/pets/{petId}']?.['get']).toMatchObject({ operationId: 'getPetById', deprecated: true });
      expect(document.paths['/categories']?.['get']).not.toHaveProperty('deprecated');
      expect(document.paths['/categories']?.['get']).not.toHaveProperty('x-stability');
      expect(document).toEqual(server.petstore.openapi);
      const headers = expectRateLimitHeaders(answer, server);
      expect(headers.limit).toBe(ANONYMOUS_LIMITS.requestsPerMinute);
    });

    it('serves the reference page (docs: true) and each of its files through the adapter, public and rate limited like the description', async () => {
      await withOwnServer(
        async (own) => {
          const page = await call(own, '/v1/docs');
          expect(page.status, page.text).toBe(200);
          expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
          expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
          expect(page.headers.get('www-authenticate')).toBeNull();
          expect(expectRateLimitHeaders(page, own).limit).toBe(ANONYMOUS_LIMITS.requestsPerMinute);
          const files = [...page.text.matchAll(/(?:href|src)="(docs\/[^"]+)"/g)].map((match) => `/v1/${match[1] as string}`);
          expect(files).toHaveLength(3);
          for (const file of files) {
            const answer = await call(own, file);
            expect(answer.status, `${file}: ${answer.text.slice(0, 200)}`).toBe(200);
            expect(answer.headers.get('content-type')).toMatch(/^text\/(css|javascript); charset=utf-8$/);
            expect(answer.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
            // The whole file, as the core has it, whatever the adapter (the bundle is about 1.7 MB).
            const direct = await own.petstore.handle({ method: 'GET', path: file.slice('/v1'.length), headers: {}, clientAddress: '192.0.2.1' });
            expect(answer.text === direct.body, file).toBe(true);
          }
          expectError(await call(own, '/v1/docs', { method: 'POST' }), own, 405, 'method_not_allowed');
        },
        { docs: true },
      );
      expectError(await call(server, '/v1/docs'), server, 401, 'unauthorized');
    });

    it('charges GET /v1/openapi.json to a valid key: remaining falls across it and /v1/categories', async () => {
      const remaining: number[] = [];
      for (const path of ['/v1/openapi.json', '/v1/categories', '/v1/openapi.json']) {
        const answer = await call(server, path, { apiKey: API_KEYS.openapi });
        expect(answer.status, `${path}: ${answer.text}`).toBe(200);
        const headers = expectRateLimitHeaders(answer, server);
        expect(headers.limit).toBe(60); // free plan
        remaining.push(headers.remaining);
      }
      expect(remaining).toEqual([59, 58, 57]);
    });

    it('rate limits GET /v1/openapi.json without a key like everything else: the 31st of the minute answers 429', async () => {
      await withOwnServer(async (own) => {
        for (let i = 1; i <= ANONYMOUS_LIMITS.requestsPerMinute; i += 1) {
          const answer = await call(own, '/v1/openapi.json');
          expect(answer.status, answer.text).toBe(200);
          expect(intHeader(answer, 'x-ratelimit-remaining')).toBe(ANONYMOUS_LIMITS.requestsPerMinute - i);
        }
        expectRateLimited(await call(own, '/v1/openapi.json'), own);
      });
    });

    // ---- rate limits ----

    it('answers the 6th request of the minute 429 with Retry-After; the rejection does not burn the day quota', async () => {
      await withOwnServer(async (own) => {
        const get = () => call(own, '/v1/categories', { apiKey: API_KEYS.limits });
        for (let i = 1; i <= SMALL_LIMITS.requestsPerMinute; i += 1) {
          const answer = await get();
          expect(answer.status, answer.text).toBe(200);
          expect(expectRateLimitHeaders(answer, own)).toMatchObject({
            limit: SMALL_LIMITS.requestsPerMinute,
            remaining: SMALL_LIMITS.requestsPerMinute - i,
          });
        }
        const minuteRejected = await get();
        const minuteRetryAfter = expectRateLimited(minuteRejected, own);
        expect(minuteRetryAfter).toBe(secondsToWindowEnd(own, MINUTE_MS));
        expect(intHeader(minuteRejected, 'x-ratelimit-limit')).toBe(SMALL_LIMITS.requestsPerMinute);
        expect(intHeader(minuteRejected, 'x-ratelimit-remaining')).toBe(0);

        // Next minute: 5 of the day's 8 are used, so exactly 3 more are admitted if the 429 was not charged.
        own.clock.advance(MINUTE_MS);
        const dayLeft = SMALL_LIMITS.requestsPerDay - SMALL_LIMITS.requestsPerMinute;
        for (let i = 1; i <= dayLeft; i += 1) {
          const answer = await get();
          expect(answer.status, `request ${i} of the new minute: ${answer.text}`).toBe(200);
        }
        const dayRejected = await get();
        const dayRetryAfter = expectRateLimited(dayRejected, own);
        expect(intHeader(dayRejected, 'x-ratelimit-limit')).toBe(SMALL_LIMITS.requestsPerDay);
        expect(intHeader(dayRejected, 'x-ratelimit-remaining')).toBe(0);
        expect(dayRetryAfter).toBe(secondsToWindowEnd(own, DAY_MS)); // the next UTC midnight
        expect(own.clock.now() + dayRetryAfter * 1000).toBeGreaterThanOrEqual(
          (Math.floor(own.clock.now() / DAY_MS) + 1) * DAY_MS,
        );
      });
    });

    // docs/http-api.md, "Algorithms": the free plan's 60 in the last ms of a minute, then the first request of the
    // next. fixed: a new window, its first unit. sliding: the previous minute still weighs 60 units, one less each
    // second, its weight gone when the new minute ends. gcra: one unit drains each second, all 60 are back a minute
    // after the burst. Then a retry after exactly Retry-After (or 1 s) is admitted: never sent back too early.
    it.each([
      { algorithm: 'fixed', status: 200, remaining: '59', retryAfter: null, remainingAfterRetry: '58' },
      { algorithm: 'sliding', status: 429, remaining: '0', retryAfter: '1', remainingAfterRetry: '0' },
      { algorithm: 'gcra', status: 429, remaining: '0', retryAfter: '1', remainingAfterRetry: '0' },
    ] as const)(
      'rateLimit.algorithm $algorithm: after the 60 of a free key in the last ms of a minute, the next minute\'s first request answers $status',
      async ({ algorithm, status, remaining, retryAfter, remainingAfterRetry }) => {
        await withOwnServer(
          async (own) => {
            const minuteEndMs = (Math.floor(own.clock.now() / MINUTE_MS) + 1) * MINUTE_MS;
            own.clock.set(minuteEndMs - 1);
            const burst = await Promise.all(Array.from({ length: 60 }, () => call(own, '/v1/categories', { apiKey: API_KEYS.burst })));
            expect(burst.map((answer) => answer.status)).toEqual(Array.from({ length: 60 }, () => 200));
            own.clock.set(minuteEndMs);
            const next = await call(own, '/v1/categories', { apiKey: API_KEYS.burst });
            expect(next.status, next.text).toBe(status);
            expectRateLimitHeaders(next, own);
            expect({
              limit: next.headers.get('x-ratelimit-limit'),
              remaining: next.headers.get('x-ratelimit-remaining'),
              reset: next.headers.get('x-ratelimit-reset'),
              retryAfter: next.headers.get('retry-after'),
            }).toEqual({ limit: '60', remaining, reset: String((minuteEndMs + MINUTE_MS) / 1000), retryAfter });
            own.clock.advance(1_000);
            const retried = await call(own, '/v1/categories', { apiKey: API_KEYS.burst });
            expect(retried.status, retried.text).toBe(200);
            expect(retried.headers.get('x-ratelimit-remaining')).toBe(remainingAfterRetry);
          },
          { rateLimit: { algorithm } },
        );
      },
    );

    it('admits exactly 60 of 100 parallel requests of a free key and answers the other 40 with 429', async () => {
      const answers = await Promise.all(
        Array.from({ length: 100 }, () => call(server, '/v1/categories', { apiKey: API_KEYS.burst })),
      );
      const statuses = answers.map((answer) => answer.status);
      expect(statuses.filter((status) => status === 200)).toHaveLength(60);
      expect(statuses.filter((status) => status === 429)).toHaveLength(40);
      for (const answer of answers) {
        if (answer.status === 429) {
          expectError(answer, server, 429);
          expect(intHeader(answer, 'retry-after')).toBeGreaterThanOrEqual(1);
        } else {
          expectRateLimitHeaders(answer, server);
        }
      }
    });
  }

  it('gives 100 parallel creates 100 distinct ids, and lists them all', async () => {
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        call(server, '/v1/categories', { method: 'POST', apiKey: API_KEYS.bulk, json: { name: `Bulk ${i}` } }),
      ),
    );
    const bad = answers.filter((answer) => answer.status !== 201);
    expect(bad.map((answer: Answer) => `${answer.status} ${answer.text}`)).toEqual([]);
    const created = answers.map((answer) => jsonOf(answer) as CategoryJson);
    const ids = new Set(created.map((category) => category.id));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(Number.isSafeInteger(id) && id > 0).toBe(true);

    const listed = await list(API_KEYS.bulk);
    const listedById = new Map(listed.map((category) => [category.id, category]));
    for (const category of created) expect(listedById.get(category.id)).toEqual(category);
  });

  if (allCases) {
    it('limits callers without a valid key per address: limit 30 on 401 answers, then 429', async () => {
      await withOwnServer(async (own) => {
        for (let i = 1; i <= ANONYMOUS_LIMITS.requestsPerMinute; i += 1) {
          // Alternate no key and a wrong key: both count against the address (key guessing is throttled).
          const answer = await call(own, '/v1/categories', i % 2 === 0 ? { apiKey: INVALID_KEY } : {});
          expectError(answer, own, 401, 'unauthorized');
          expect(intHeader(answer, 'x-ratelimit-limit')).toBe(ANONYMOUS_LIMITS.requestsPerMinute);
          expect(intHeader(answer, 'x-ratelimit-remaining')).toBe(ANONYMOUS_LIMITS.requestsPerMinute - i);
        }
        const rejected = await call(own, '/v1/categories');
        expectRateLimited(rejected, own);
        // A valid key is charged to the key, not to the address.
        const withKey = await call(own, '/v1/categories', { apiKey: API_KEYS.general });
        expect(withKey.status, withKey.text).toBe(200);
      });
    });
  }

  // ---- the host stays in charge: its hooks, middleware and error handler run first, and win ----

  it('lets a host hook that refuses before the API answer with the host\'s error handler; nothing charged or created', async () => {
    const first = await call(server, '/v1/categories', { apiKey: API_KEYS.host });
    const before = intHeader(first, 'x-ratelimit-remaining');
    const created = (await list(API_KEYS.host)).length;
    for (const [method, json] of [['GET', undefined], ['POST', { name: 'Refused' }]] as const) {
      const refused = await call(server, '/v1/categories', {
        method,
        apiKey: API_KEYS.host,
        headers: { [HOST_REFUSAL_HEADER]: '1' },
        ...(json ? { json } : {}),
      });
      expect(refused.status, refused.text).toBe(403);
      expect(jsonOf(refused)).toEqual(HOST_REFUSAL);
      expect(refused.headers.get('x-ratelimit-remaining'), 'the API did not run').toBeNull();
    }
    // One request since `first` was charged: the list call above; the refused ones were not.
    const after = await call(server, '/v1/categories', { apiKey: API_KEYS.host });
    expect(intHeader(after, 'x-ratelimit-remaining')).toBe(before - 2);
    expect(jsonOf(after)).toHaveLength(created);
  });

  if (allCases) {
    it('answers a host handler that returns a broken header (a line break in a value) 500 once: run once, charged once', async () => {
      const calls = server.hostCalls.length;
      const first = await call(server, '/v1/pets/7', { apiKey: API_KEYS.host });
      const before = intHeader(first, 'x-ratelimit-remaining');
      const broken = await call(server, `/v1/pets/${BROKEN_PET_ID}`, { apiKey: API_KEYS.host });
      expectError(broken, server, 500, 'internal_error');
      expect(broken.headers.get('x-note')).toBeNull();
      // Reported to the host (onInternalError), once.
      expect(server.internalErrors.slice(internalErrorsTaken)).toEqual([
        new TypeError('The getPetById handler answered with an invalid header "x-note"'),
      ]);
      internalErrorsTaken = server.internalErrors.length;
      expect(server.hostCalls.length - calls, 'handler calls: /pets/7 and the broken one, once each').toBe(2);
      const after = await call(server, '/v1/pets/7', { apiKey: API_KEYS.host });
      expect(intHeader(after, 'x-ratelimit-remaining'), 'charged once for the broken answer').toBe(before - 2);
    });

    it('aborts the host handler\'s signal when the client goes away before the answer', async () => {
      const count = server.abortions.length;
      const controller = new AbortController();
      const request = fetch(`${server.origin}/v1/pets/${SLOW_PET_ID}`, {
        headers: { authorization: `Bearer ${API_KEYS.host}` },
        signal: controller.signal,
      }).catch((error: unknown) => error);
      // Polled until the events happen; the bounds only end a test that has failed (vitest's testTimeout is 20 s).
      await expect.poll(() => server.hostCalls.some((hostCall) => hostCall.params['petId'] === String(SLOW_PET_ID)), { timeout: 15_000 }).toBe(true);
      controller.abort();
      await request;
      // The handler waits for its signal and nothing else: it records the abortion only if the signal aborted.
      await expect.poll(() => server.abortions.length, { timeout: 15_000 }).toBe(count + 1);
    });

    // ---- the host app keeps its own routes and parsers ----

    itWhen(impl.capabilities.hostRoutes, 'a server without host routes')('leaves host routes alone: GET /health answers 200 {ok: true}', async () => {
      const answer = await call(server, '/health');
      expect(answer.status).toBe(200);
      expect(jsonOf(answer)).toEqual({ ok: true });
      expect(answer.headers.get('x-ratelimit-limit')).toBeNull();
    });

    // ---- a host route behind the adapter's petstoreGuard: the API's keys, quotas, headers and errors ----

    itWhen(impl.capabilities.hostRoutes, 'a server without host routes')(
      'guards GET /reports: 200 with the principal\'s accountId and X-RateLimit-*, on the same quota as the API',
      async () => {
        const remaining: number[] = [];
        for (const path of ['/reports', '/v1/categories', '/reports']) {
          const answer = await call(server, path, { apiKey: API_KEYS.reports });
          expect(answer.status, `${path}: ${answer.text}`).toBe(200);
          expectJsonContentType(answer);
          if (path === '/reports') expect(jsonOf(answer)).toEqual({ accountId: REPORTS_ACCOUNT_ID });
          const headers = expectRateLimitHeaders(answer, server);
          expect(headers.limit).toBe(60); // free plan
          remaining.push(headers.remaining);
        }
        expect(remaining).toEqual([59, 58, 57]);
      },
    );

    itWhen(impl.capabilities.hostRoutes, 'a server without host routes')(
      'answers GET /reports without a key, or with an invalid one, 401 with the Error body and WWW-Authenticate',
      async () => {
        const missing = await call(server, '/reports');
        expectError(missing, server, 401, 'unauthorized');
        expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="petstore"');
        const invalid = await call(server, '/reports', { apiKey: INVALID_KEY });
        expectError(invalid, server, 401, 'unauthorized');
        expect(invalid.headers.get('www-authenticate')).toContain('error="invalid_token"');
        expect(invalid.text).not.toContain(INVALID_KEY);
      },
    );

    itWhen(impl.capabilities.hostRoutes, 'a server without host routes')(
      'answers GET /reports 429 with Retry-After once the key\'s minute is used up across /reports and the API',
      async () => {
        await withOwnServer(async (own) => {
          const paths = ['/reports', '/v1/categories', '/reports', '/v1/categories', '/reports'];
          expect(paths).toHaveLength(SMALL_LIMITS.requestsPerMinute);
          for (const [index, path] of paths.entries()) {
            const answer = await call(own, path, { apiKey: API_KEYS.limits });
            expect(answer.status, `${path}: ${answer.text}`).toBe(200);
            expect(intHeader(answer, 'x-ratelimit-remaining')).toBe(SMALL_LIMITS.requestsPerMinute - index - 1);
          }
          const rejected = await call(own, '/reports', { apiKey: API_KEYS.limits });
          expect(expectRateLimited(rejected, own)).toBe(secondsToWindowEnd(own, MINUTE_MS));
          expect(intHeader(rejected, 'x-ratelimit-remaining')).toBe(0);
          expectRateLimited(await call(own, '/v1/categories', { apiKey: API_KEYS.limits }), own);
        });
      },
    );

    itWhen(impl.capabilities.hostRoutes, 'a server without host routes')(
      `charges GET /reports/expensive the guard's cost (${EXPENSIVE_REPORT_COST} units), on the same quota as the API`,
      async () => {
        await withOwnServer(async (own) => {
          const expensive = await call(own, '/reports/expensive', { apiKey: API_KEYS.costs });
          expect(expensive.status, expensive.text).toBe(200);
          expect(intHeader(expensive, 'x-ratelimit-remaining')).toBe(60 - EXPENSIVE_REPORT_COST);
          expect(intHeader(await call(own, '/reports', { apiKey: API_KEYS.costs }), 'x-ratelimit-remaining')).toBe(59 - EXPENSIVE_REPORT_COST);
          expect(intHeader(await call(own, '/v1/categories', { apiKey: API_KEYS.costs }), 'x-ratelimit-remaining')).toBe(58 - EXPENSIVE_REPORT_COST);
        });
      },
    );
  }

  // ---- costs per operation, account quotas, key bans, and the operator's peek and reset ----

  it('charges each operation its x-rate-limit-cost, atomically, and the headers count units', async () => {
    await withOwnServer(
      async (own) => {
        const description = jsonOf(await call(own, '/v1/openapi.json')) as { paths: Record<string, Record<string, Record<string, unknown>>> };
        expect(description.paths['/categories']?.['post']?.['x-rate-limit-cost']).toBe(3);
        expect(description.paths['/categories']?.['get']?.['x-rate-limit-cost']).toBe(1);
        const created = await call(own, '/v1/categories', { method: 'POST', apiKey: API_KEYS.costs, json: { name: 'Costly' } });
        expect(created.status, created.text).toBe(201);
        expect(expectRateLimitHeaders(created, own)).toMatchObject({ limit: 60, remaining: 57 });
        expect(intHeader(await call(own, '/v1/categories', { apiKey: API_KEYS.costs }), 'x-ratelimit-remaining')).toBe(56);
        // Parallel creates costing 3 each: exactly the 18 that fit the 56 units left are admitted.
        const answers = await Promise.all(
          Array.from({ length: 25 }, (_, i) => call(own, '/v1/categories', { method: 'POST', apiKey: API_KEYS.costs, json: { name: `Costly ${i}` } })),
        );
        expect(answers.filter((answer) => answer.status === 201)).toHaveLength(18);
        for (const answer of answers.filter((a) => a.status !== 201)) expectRateLimited(answer, own);
        expect((await own.stores.categories.list()).length).toBe(19);
      },
      { rateLimit: { cost: { createCategory: 3 } } },
    );
  });

  it('answers a request that costs more than what is left 429 with Retry-After, charging and creating nothing', async () => {
    await withOwnServer(
      async (own) => {
        for (let i = 0; i < 3; i += 1) expect((await call(own, '/v1/categories', { apiKey: API_KEYS.limits })).status).toBe(200);
        const refused = await call(own, '/v1/categories', { method: 'POST', apiKey: API_KEYS.limits, json: { name: 'Too dear' } });
        expect(expectRateLimited(refused, own)).toBe(secondsToWindowEnd(own, MINUTE_MS));
        expect(intHeader(refused, 'x-ratelimit-remaining')).toBe(2);
        expect(await own.stores.categories.list()).toEqual([]);
        // The 2 units left are still there for requests that fit them.
        for (let i = 0; i < 2; i += 1) expect((await call(own, '/v1/categories', { apiKey: API_KEYS.limits })).status).toBe(200);
        expectRateLimited(await call(own, '/v1/categories', { apiKey: API_KEYS.limits }), own);
      },
      { rateLimit: { cost: { createCategory: 3 } } },
    );
  });

  if (allCases) {
    it('shares one quota between the keys of an account, while a ban falls only on the key that earned it', async () => {
      await withOwnServer(
        async (own) => {
          const get = (apiKey: string) => call(own, '/v1/categories', { apiKey });
          const remaining: number[] = [];
          for (const apiKey of [API_KEYS.sharedOne, API_KEYS.sharedTwo, API_KEYS.sharedOne, API_KEYS.sharedTwo]) {
            const answer = await get(apiKey);
            expect(answer.status, answer.text).toBe(200);
            remaining.push(intHeader(answer, 'x-ratelimit-remaining'));
          }
          expect(remaining).toEqual([3, 2, 1, 0]);
          expectError(await get(API_KEYS.sharedOne), own, 429, 'rate_limited');
          const banned = await get(API_KEYS.sharedOne);
          expectError(banned, own, 429, 'temporarily_banned');
          expectError(await get(API_KEYS.sharedTwo), own, 429, 'rate_limited');
          const peeked = await own.petstore.rateLimits.peek({ accountId: SHARED_ACCOUNT_ID });
          expect(peeked.windows.map(({ name, used }) => ({ name, used }))).toEqual([
            { name: 'minute', used: 4 },
            { name: 'day', used: 4 },
          ]);
          expect(peeked.bans).toHaveLength(1);
          expect(own.clock.now() + intHeader(banned, 'retry-after') * 1000).toBeGreaterThanOrEqual(peeked.bans[0]?.bannedUntilMs ?? Infinity);
          own.clock.advance(MINUTE_MS);
          expect((await get(API_KEYS.sharedTwo)).status).toBe(200);
          expectError(await get(API_KEYS.sharedOne), own, 429, 'temporarily_banned');
          // The operator lifts the ban: the account's record is reset, and the banned key is admitted at once.
          await own.petstore.rateLimits.reset({ accountId: SHARED_ACCOUNT_ID });
          const lifted = await get(API_KEYS.sharedOne);
          expect(lifted.status, lifted.text).toBe(200);
          expect(intHeader(lifted, 'x-ratelimit-remaining')).toBe(SHARED_LIMITS.requestsPerMinute - 1);
        },
        { rateLimit: { ban: { rejectedThreshold: 2, intervalMs: MINUTE_MS, durationMs: 15 * MINUTE_MS } } },
      );
    });

    // ---- managed keys (issued, rotated and revoked at run time) beside the static ones ----

    it('serves a managed key from its issue; after a rotation both work until the grace ends, then the old one is 401; revoked or expired, 401', async () => {
      await withOwnServer(async (own) => {
        const keys = own.stores.managedKeys;
        const get = (apiKey: string) => call(own, '/v1/categories', { apiKey });
        const issued = await keys.issue({ accountId: 'contract-managed', plan: 'pro' });
        const first = await get(issued.key);
        expect(first.status, first.text).toBe(200);
        expect(intHeader(first, 'x-ratelimit-limit')).toBe(300); // the Pro plan's minute
        const rotated = await keys.rotate(issued.keyId, { graceMs: MINUTE_MS });
        expect((await get(rotated.key)).status).toBe(200);
        expect((await get(issued.key)).status).toBe(200);
        own.clock.advance(MINUTE_MS);
        expectError(await get(issued.key), own, 401, 'unauthorized');
        expect((await get(rotated.key)).status).toBe(200);
        await keys.revoke(issued.keyId);
        expectError(await get(rotated.key), own, 401, 'unauthorized');
        const expiring = await keys.issue({ accountId: 'contract-managed-expiring', plan: 'free', expiresInMs: MINUTE_MS });
        expect((await get(expiring.key)).status).toBe(200);
        own.clock.advance(MINUTE_MS);
        expectError(await get(expiring.key), own, 401, 'unauthorized');
        // One character off: refused by the checksum, before any lookup.
        const other = await keys.issue({ accountId: 'contract-managed-typo', plan: 'free' });
        const typo = other.key.slice(0, 10) + (other.key[10] === 'a' ? 'b' : 'a') + other.key.slice(11);
        expectError(await get(typo), own, 401, 'unauthorized');
        expect((await get(API_KEYS.general)).status).toBe(200); // the static keys work beside them
      });
    });

    it('shares one quota between the managed keys of an account, while a ban falls only on the key that earned it', async () => {
      await withOwnServer(
        async (own) => {
          const keys = own.stores.managedKeys;
          const get = (apiKey: string) => call(own, '/v1/categories', { apiKey });
          const one = await keys.issue({ accountId: 'contract-managed-shared', plan: 'enterprise', limits: SHARED_LIMITS });
          const two = await keys.issue({ accountId: 'contract-managed-shared', plan: 'enterprise', limits: SHARED_LIMITS });
          const remaining: number[] = [];
          for (const apiKey of [one.key, two.key, one.key, two.key]) {
            const answer = await get(apiKey);
            expect(answer.status, answer.text).toBe(200);
            remaining.push(intHeader(answer, 'x-ratelimit-remaining'));
          }
          expect(remaining).toEqual([3, 2, 1, 0]);
          expectError(await get(one.key), own, 429, 'rate_limited');
          expectError(await get(one.key), own, 429, 'temporarily_banned');
          expectError(await get(two.key), own, 429, 'rate_limited');
          const peeked = await own.petstore.rateLimits.peek({ accountId: 'contract-managed-shared' });
          expect(peeked.bans.map((ban) => ban.keyId)).toEqual([one.keyId]); // every banned key of the account: one
          own.clock.advance(MINUTE_MS);
          expect((await get(two.key)).status).toBe(200);
          expectError(await get(one.key), own, 429, 'temporarily_banned');
        },
        { rateLimit: { ban: { rejectedThreshold: 2, intervalMs: MINUTE_MS, durationMs: 15 * MINUTE_MS } } },
      );
    });
  }

  itWhen(impl.capabilities.hostJsonParser !== undefined, 'a server without a host JSON parser')(
    "leaves the host's JSON parser alone: POST /echo answers with the parsed body",
    async () => {
      const payload = { hello: 'world', list: [1, 2, 3] };
      const answer = await call(server, '/echo', { method: 'POST', json: payload });
      expect(answer.status, answer.text).toBe(200);
      expect(jsonOf(answer)).toEqual(payload);
    },
  );

  itWhen(impl.capabilities.hostJsonParser === 'fastify', "a case for Fastify's own JSON parser")(
    "answers invalid JSON to a host route with Fastify's own error, not the API's",
    async () => {
      const answer = await call(server, '/echo', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"broken":',
      });
      expect(answer.status).toBe(400);
      const body = jsonOf(answer) as Record<string, unknown>;
      expect(body['statusCode']).toBe(400);
      expect(body).not.toHaveProperty('status');
    },
  );

  itWhen(impl.capabilities.hostJsonParser === 'express', 'a case for express.json()')(
    "answers invalid JSON that the host's express.json() refused with the API's Error body, not Express's page",
    async () => {
      const answer = await call(server, '/v1/categories', {
        method: 'POST',
        apiKey: API_KEYS.general,
        headers: { 'content-type': 'application/json' },
        body: '{"broken":',
      });
      expectError(answer, server, 400, 'invalid_json');
      expect(answer.text).not.toMatch(/<html|<!DOCTYPE/i);

      // The host's own route still gets Express's own answer.
      const host = await call(server, '/echo', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"broken":',
      });
      expect(host.status).toBe(400);
      expect(host.headers.get('x-ratelimit-limit')).toBeNull();
    },
  );
}

import { describe, expect, it, vi } from 'vitest';
import { PetstoreError } from '../errors.js';
import type { HostOperationContext, HostOperationHandler, HostOperationResult } from './host-operations.js';
import {
  FREE_AUTH,
  FREE_KEY,
  ONE_PER_MINUTE_KEY,
  expectError,
  keyIdOf,
  parse,
  request,
  testPetstore,
} from '../../test-support/petstore.js';

/** A handler that records its contexts and answers `result`. */
function recordingHandler(result: HostOperationResult = { body: { ok: true } }) {
  const contexts: HostOperationContext[] = [];
  const handler = vi.fn<HostOperationHandler>((context) => {
    contexts.push(context);
    return result;
  });
  return { handler, contexts };
}

describe('host operation context', () => {
  it('passes the principal, params, query, headers, stability and deprecation to getPetById', async () => {
    const { handler, contexts } = recordingHandler();
    const { petstore } = testPetstore({ handlers: { getPetById: handler } });
    const headers = { ...FREE_AUTH, 'x-request-id': 'req-1' };
    const response = await petstore.handle(request('/pets/42?fields=name&tag=a&tag=b', headers));
    expect(response.status).toBe(200);
    expect(handler).toHaveBeenCalledTimes(1);
    const [context] = contexts as [HostOperationContext];
    expect(context.operationId).toBe('getPetById');
    expect(context.principal).toEqual({ keyId: keyIdOf(FREE_KEY), accountId: keyIdOf(FREE_KEY), plan: 'free' });
    expect(context.params).toEqual({ petId: '42' });
    expect(Object.isFrozen(context.params)).toBe(true);
    expect(context.query).toBeInstanceOf(URLSearchParams);
    expect(context.query.get('fields')).toBe('name');
    expect(context.query.getAll('tag')).toEqual(['a', 'b']);
    expect(context.headers['x-request-id']).toBe('req-1');
    expect(context.stability).toBeUndefined();
    expect(context.deprecation).toEqual({ deprecatedAtMs: Date.UTC(2026, 0, 1) });
    expect(context.signal).toBeInstanceOf(AbortSignal);
    expect(context.signal.aborted).toBe(false);
  });

  it("hands the handler the request's signal, which aborts when the client goes away", async () => {
    const controller = new AbortController();
    let seen: AbortSignal | undefined;
    const { petstore } = testPetstore({
      handlers: {
        getPetById: async ({ signal }) => {
          seen = signal;
          await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
          return { body: { aborted: signal.aborted } };
        },
      },
    });
    const answer = petstore.handle({ ...request('/pets/1'), signal: controller.signal });
    await expect.poll(() => seen).toBe(controller.signal);
    controller.abort();
    expect(parse(await answer)).toEqual({ aborted: true });
  });

  it('answers 500 for a handler header the wire cannot carry, and drops framing headers', async () => {
    const broken: Record<string, string>[] = [{ 'x-note': 'a\r\nb' }, { 'x-note': 'nul\u0000' }, { 'bad name': 'v' }, { 'x-note': 7 as unknown as string }];
    for (const headers of broken) {
      const { petstore, internalErrors } = testPetstore({ handlers: { getPetById: () => ({ body: {}, headers }) } });
      const response = await petstore.handle(request('/pets/1'));
      expectError(response, 500, 'internal_error');
      expect(Object.keys(response.headers)).not.toContain('x-note');
      expect(internalErrors).toHaveLength(1);
    }
    const { petstore } = testPetstore({
      handlers: { getPetById: () => ({ body: { id: 1 }, headers: { 'Content-Length': '999', 'Transfer-Encoding': 'gzip', Connection: 'close', ETag: '"1"' } }) },
    });
    const response = await petstore.handle(request('/pets/1'));
    expect(response.status).toBe(200);
    expect(response.headers['etag']).toBe('"1"');
    for (const name of ['content-length', 'transfer-encoding', 'connection']) expect(response.headers[name]).toBeUndefined();
  });

  it('passes an empty query, no deprecation and the configured stability to listStoreOrders', async () => {
    const { handler, contexts } = recordingHandler({ body: [] });
    const { petstore } = testPetstore({ handlers: { listStoreOrders: handler }, stability: { listStoreOrders: 'beta' } });
    expect((await petstore.handle(request('/store/orders'))).status).toBe(200);
    const [context] = contexts as [HostOperationContext];
    expect(context.operationId).toBe('listStoreOrders');
    expect(context.params).toEqual({});
    expect([...context.query]).toEqual([]);
    expect(context.stability).toBe('beta');
    expect(context.deprecation).toBeUndefined();
  });

  it('decodes the query string', async () => {
    const { handler, contexts } = recordingHandler({ body: [] });
    const { petstore } = testPetstore({ handlers: { listStoreOrders: handler } });
    await petstore.handle(request('/store/orders?status=in%20transit&q=a+b&empty='));
    const [context] = contexts as [HostOperationContext];
    expect(Object.fromEntries(context.query)).toEqual({ status: 'in transit', q: 'a b', empty: '' });
  });

  it('passes the percent-decoded petId', async () => {
    const { handler, contexts } = recordingHandler();
    const { petstore } = testPetstore({ handlers: { getPetById: handler } });
    expect((await petstore.handle(request('/pets/%31%32'))).status).toBe(200);
    expect(contexts[0]?.params).toEqual({ petId: '12' });
  });
});

describe('host operation result', () => {
  it("answers with the handler's status, JSON body and headers, plus the library's headers", async () => {
    const { petstore } = testPetstore({
      handlers: { listStoreOrders: async () => ({ status: 202, body: [{ id: 1 }], headers: { 'X-Total-Count': '1' } }) },
    });
    const response = await petstore.handle(request('/store/orders'));
    expect(response.status).toBe(202);
    expect(parse(response)).toEqual([{ id: 1 }]);
    expect(response.headers).toMatchObject({
      'content-type': 'application/json; charset=utf-8',
      'x-total-count': '1',
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '59',
    });
    expect(response.headers['X-Total-Count']).toBeUndefined();
  });

  it('answers 200 when the handler gives no status', async () => {
    const { petstore } = testPetstore({ handlers: { getPetById: () => ({ body: { id: 1, name: 'Rex' } }) } });
    const response = await petstore.handle(request('/pets/1'));
    expect(response.status).toBe(200);
    expect(parse(response)).toEqual({ id: 1, name: 'Rex' });
  });

  it('serialises a null body as JSON null', async () => {
    const { petstore } = testPetstore({ handlers: { getPetById: () => ({ body: null }) } });
    expect((await petstore.handle(request('/pets/1'))).body).toBe('null');
  });

  it("lets the library's headers win over the handler's headers of the same name, in any case", async () => {
    const { petstore } = testPetstore({
      deprecations: { getPetById: { deprecatedAtMs: Date.UTC(2026, 0, 1), sunsetAtMs: Date.UTC(2027, 0, 1) } },
      handlers: {
        getPetById: () => ({
          body: { id: 1 },
          headers: {
            'X-RateLimit-Limit': '1000000',
            'x-ratelimit-remaining': '999999',
            Deprecation: '@0',
            SUNSET: 'never',
            'Content-Type': 'text/html',
            'Cache-Control': 'no-store',
          },
        }),
      },
    });
    const response = await petstore.handle(request('/pets/1'));
    expect(response.headers).toMatchObject({
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '59',
      deprecation: '@1767225600',
      sunset: 'Fri, 01 Jan 2027 00:00:00 GMT',
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
    });
    for (const name of Object.keys(response.headers)) expect(name).toBe(name.toLowerCase());
  });

  it('sends no body when the handler gives none, keeping status and headers', async () => {
    const { petstore } = testPetstore({ handlers: { getPetById: () => ({ status: 204, headers: { ETag: '"v1"' } }) } });
    const response = await petstore.handle(request('/pets/1'));
    expect(response.status).toBe(204);
    expect(response.body).toBeUndefined();
    expect(response.headers).toMatchObject({ etag: '"v1"', 'x-ratelimit-remaining': '59', deprecation: '@1767225600' });
  });

  it.each([99, 100, 199, 600, 700, 1.5, Number.NaN, '200' as unknown as number])(
    'answers 500 internal_error when the handler answers status %s',
    async (status) => {
      const { petstore, internalErrors } = testPetstore({ handlers: { listStoreOrders: () => ({ status, body: [] }) } });
      const response = await petstore.handle(request('/store/orders'));
      expectError(response, 500, 'internal_error');
      expect(response.headers['x-ratelimit-remaining']).toBe('59');
      expect(internalErrors).toHaveLength(1);
      expect(internalErrors[0]).toBeInstanceOf(TypeError);
    },
  );

  it.each([200, 201, 299, 404, 599])('accepts status %s', async (status) => {
    const { petstore } = testPetstore({ handlers: { listStoreOrders: () => ({ status, body: [] }) } });
    expect((await petstore.handle(request('/store/orders'))).status).toBe(status);
  });

  it('answers 500 when the body cannot be serialised', async () => {
    const { petstore, internalErrors } = testPetstore({ handlers: { getPetById: () => ({ body: { id: 1n } }) } });
    expectError(await petstore.handle(request('/pets/1')), 500, 'internal_error');
    expect(internalErrors).toHaveLength(1);
  });
});

describe('host operation errors', () => {
  it("answers a thrown PetstoreError with its code, status and message, and does not report it", async () => {
    const { petstore, internalErrors } = testPetstore({
      handlers: {
        getPetById: () => {
          throw new PetstoreError('not_found', 'There is no pet 7.');
        },
      },
    });
    const response = await petstore.handle(request('/pets/7'));
    expectError(response, 404, 'not_found');
    expect(parse(response)).toEqual({ code: 'not_found', message: 'There is no pet 7.', status: 404 });
    expect(response.headers).toMatchObject({ 'x-ratelimit-remaining': '59', deprecation: '@1767225600' });
    expect(internalErrors).toEqual([]);
  });

  it('answers a rejected PetstoreError with Retry-After when it has one', async () => {
    const { petstore } = testPetstore({
      handlers: {
        listStoreOrders: () =>
          Promise.reject(new PetstoreError('service_unavailable', 'Orders are unavailable.', { retryAfterSeconds: 12 })),
      },
    });
    const response = await petstore.handle(request('/store/orders'));
    expectError(response, 503, 'service_unavailable');
    expect(response.headers['retry-after']).toBe('12');
  });

  it.each([
    ['throws', () => {
      throw new Error('SELECT * FROM pets failed: password=hunter2');
    }],
    ['rejects', () => Promise.reject(new Error('SELECT * FROM pets failed: password=hunter2'))],
  ])('answers 500 without details when the handler %s an Error, and reports it', async (_label, getPetById) => {
    const onInternalError = vi.fn();
    const { petstore } = testPetstore({ handlers: { getPetById }, onInternalError });
    const response = await petstore.handle(request('/pets/1'));
    expectError(response, 500, 'internal_error');
    expect(response.body).not.toMatch(/SELECT|hunter2|stack|\bat /);
    expect(response.headers['x-ratelimit-remaining']).toBe('59');
    expect(onInternalError).toHaveBeenCalledTimes(1);
    expect((onInternalError.mock.calls[0]?.[0] as Error).message).toContain('hunter2');
  });

  it('answers 500 when the handler throws something that is not an Error', async () => {
    const { petstore, internalErrors } = testPetstore({
      handlers: {
        listStoreOrders: () => {
          throw 'oops';
        },
      },
    });
    expectError(await petstore.handle(request('/store/orders')), 500, 'internal_error');
    expect(internalErrors).toEqual(['oops']);
  });
});

describe('host operation without a handler', () => {
  it.each([
    ['/pets/1', 'getPetById'],
    ['/store/orders', 'listStoreOrders'],
  ])('answers %s with 501 not_implemented and the rate-limit headers', async (path, operationId) => {
    const { petstore, internalErrors } = testPetstore();
    const response = await petstore.handle(request(path));
    expectError(response, 501, 'not_implemented');
    expect((parse(response) as { message: string }).message).toContain(operationId);
    expect(response.headers).toMatchObject({ 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '59' });
    expect(internalErrors).toEqual([]);
  });

  it('still answers 401 without a key, and HEAD without a body', async () => {
    const { petstore } = testPetstore();
    expectError(await petstore.handle(request('/store/orders', {})), 401, 'unauthorized');
    const head = await petstore.handle(request('/store/orders', FREE_AUTH, 'HEAD'));
    expect(head.status).toBe(501);
    expect(head.body).toBeUndefined();
  });
});

describe('petId', () => {
  it.each(['abc', '0', '-1', '1.5', '1e3', '01', '+1', '%2B1', '%201', '0x10', '99999999999999999', '9007199254740992'])(
    'answers 400 validation_failed for petId %j without calling the handler',
    async (petId) => {
      const { handler } = recordingHandler();
      const { petstore } = testPetstore({ handlers: { getPetById: handler } });
      const response = await petstore.handle(request(`/pets/${petId}`));
      expectError(response, 400, 'validation_failed');
      expect(response.headers['x-ratelimit-remaining']).toBe('59');
      expect(handler).not.toHaveBeenCalled();
    },
  );

  it('checks petId before answering 501', async () => {
    const { petstore } = testPetstore();
    expectError(await petstore.handle(request('/pets/abc')), 400, 'validation_failed');
  });

  it.each(['1', '42', '9007199254740991'])('accepts petId %s', async (petId) => {
    const { handler, contexts } = recordingHandler();
    const { petstore } = testPetstore({ handlers: { getPetById: handler } });
    expect((await petstore.handle(request(`/pets/${petId}`))).status).toBe(200);
    expect(contexts[0]?.params['petId']).toBe(petId);
  });
});

describe('host operation admission', () => {
  it.each([
    ['no key', {}],
    ['an invalid key', { authorization: 'Bearer not-a-key' }],
    ['a malformed key', { authorization: 'Bearer a b' }],
  ])('answers 401 for %s and does not call the handler', async (_label, headers) => {
    const { handler } = recordingHandler();
    const { petstore } = testPetstore({ handlers: { getPetById: handler, listStoreOrders: handler } });
    for (const path of ['/pets/1', '/store/orders']) {
      const response = await petstore.handle(request(path, headers));
      expectError(response, 401, 'unauthorized');
      expect(response.headers['www-authenticate']).toMatch(/^Bearer realm="petstore"/);
      expect(response.headers['deprecation']).toBeUndefined();
    }
    expect(handler).not.toHaveBeenCalled();
  });

  it('answers 429 once the quota is used and does not call the handler', async () => {
    const { handler } = recordingHandler({ body: [] });
    const { petstore } = testPetstore({ handlers: { listStoreOrders: handler } });
    const auth = { authorization: `Bearer ${ONE_PER_MINUTE_KEY}` };
    expect((await petstore.handle(request('/store/orders', auth))).status).toBe(200);
    const limited = await petstore.handle(request('/store/orders', auth));
    expectError(limited, 429, 'rate_limited');
    expect(limited.headers['retry-after']).toBe('60');
    expect(handler).toHaveBeenCalledTimes(1);
  });

  it('charges host operations to the same quota as the categories', async () => {
    const { petstore } = testPetstore({ handlers: { listStoreOrders: () => ({ body: [] }) } });
    await petstore.handle(request('/store/orders'));
    await petstore.handle(request('/pets/1'));
    expect((await petstore.handle(request('/categories'))).headers['x-ratelimit-remaining']).toBe('57');
  });
});

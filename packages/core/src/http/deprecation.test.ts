import { describe, expect, it, vi } from 'vitest';
import { DEFAULT_DEPRECATIONS, deprecationHeaders, isGone, type DeprecationPolicy } from './deprecation.js';
import type { HostOperationHandler } from './host-operations.js';
import { FREE_AUTH, expectError, parse, request, testPetstore } from '../../test-support/petstore.js';

const DEPRECATED_AT_MS = Date.UTC(2026, 0, 1);
const SUNSET_AT_MS = Date.UTC(2027, 0, 1);
const PET = { id: 1, name: 'Rex' };

function petHandler() {
  return vi.fn<HostOperationHandler>(() => ({ body: PET }));
}

describe('default getPetById deprecation', () => {
  it('is deprecated since 2026-01-01, with no sunset', () => {
    expect(DEFAULT_DEPRECATIONS).toEqual({ getPetById: { deprecatedAtMs: DEPRECATED_AT_MS } });
    expect(Object.isFrozen(DEFAULT_DEPRECATIONS.getPetById)).toBe(true);
  });

  it('answers with a Deprecation header, no Sunset and no Link', async () => {
    const getPetById = petHandler();
    const { petstore } = testPetstore({ handlers: { getPetById } });
    const response = await petstore.handle(request('/pets/1'));
    expect(response.status).toBe(200);
    expect(parse(response)).toEqual(PET);
    expect(response.headers).toMatchObject({ deprecation: '@1767225600', 'x-ratelimit-remaining': '59' });
    expect(response.headers['sunset']).toBeUndefined();
    expect(response.headers['link']).toBeUndefined();
  });

  it('never switches the operation off by itself: still 200 decades later', async () => {
    const getPetById = petHandler();
    const { petstore, clock } = testPetstore({ handlers: { getPetById } });
    for (const year of [2027, 2030, 2100]) {
      clock.set(Date.UTC(year, 0, 1));
      expect((await petstore.handle(request('/pets/1'))).status).toBe(200);
    }
    expect(getPetById).toHaveBeenCalledTimes(3);
  });

  it('warns once, at creation, when the deprecated operation has a handler and no sunset', () => {
    const withHandler = testPetstore({ handlers: { getPetById: petHandler() } });
    expect(withHandler.warnings).toEqual([{ code: 'PETSTORE_DEPRECATED_WITHOUT_SUNSET', message: expect.stringContaining('deprecations.getPetById.sunsetAtMs') }]);
    expect(testPetstore().warnings, 'no handler: the operation answers 501 anyway').toEqual([]);
    const withSunset = testPetstore({
      handlers: { getPetById: petHandler() },
      deprecations: { getPetById: { deprecatedAtMs: DEPRECATED_AT_MS, sunsetAtMs: SUNSET_AT_MS } },
    });
    expect(withSunset.warnings).toEqual([]);
  });

  it('sends the Deprecation header on 501, 400 and HEAD answers too', async () => {
    const { petstore } = testPetstore();
    for (const [path, method, status] of [
      ['/pets/1', 'GET', 501],
      ['/pets/abc', 'GET', 400],
      ['/pets/1', 'HEAD', 501],
    ] as const) {
      const response = await petstore.handle(request(path, FREE_AUTH, method));
      expect(response.status).toBe(status);
      expect(response.headers['deprecation']).toBe('@1767225600');
    }
  });

  it('does not mark the other operations', async () => {
    const { petstore } = testPetstore({ handlers: { listStoreOrders: () => ({ body: [] }) } });
    for (const path of ['/categories', '/store/orders', '/openapi.json']) {
      const response = await petstore.handle(request(path));
      expect(response.status).toBe(200);
      expect(response.headers['deprecation']).toBeUndefined();
      expect(response.headers['sunset']).toBeUndefined();
    }
  });
});

describe('a configured sunset', () => {
  const withSunset = { getPetById: { deprecatedAtMs: DEPRECATED_AT_MS, sunsetAtMs: SUNSET_AT_MS } };

  it('answers with Deprecation and Sunset headers', async () => {
    const { petstore } = testPetstore({ handlers: { getPetById: petHandler() }, deprecations: withSunset });
    const response = await petstore.handle(request('/pets/1'));
    expect(response.headers).toMatchObject({ deprecation: '@1767225600', sunset: 'Fri, 01 Jan 2027 00:00:00 GMT' });
  });

  it('serves until the millisecond before the sunset', async () => {
    const getPetById = petHandler();
    const { petstore, clock } = testPetstore({ handlers: { getPetById }, deprecations: withSunset });
    clock.set(SUNSET_AT_MS - 1);
    expect((await petstore.handle(request('/pets/1'))).status).toBe(200);
    expect(getPetById).toHaveBeenCalledTimes(1);
  });

  it.each([
    ['exactly at the sunset', SUNSET_AT_MS],
    ['after the sunset', SUNSET_AT_MS + 86_400_000 * 400],
  ])('answers 410 gone %s, with the deprecation headers, without calling the handler', async (_label, nowMs) => {
    const getPetById = petHandler();
    const { petstore, clock } = testPetstore({ handlers: { getPetById }, deprecations: withSunset });
    clock.set(nowMs);
    const response = await petstore.handle(request('/pets/1'));
    expectError(response, 410, 'gone');
    expect((parse(response) as { message: string }).message).toContain('Fri, 01 Jan 2027 00:00:00 GMT');
    expect(response.headers).toMatchObject({
      deprecation: '@1767225600',
      sunset: 'Fri, 01 Jan 2027 00:00:00 GMT',
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '59',
    });
    expect(response.headers['retry-after']).toBeUndefined();
    expect(getPetById).not.toHaveBeenCalled();
  });

  it('answers 410 before checking petId, and HEAD without a body', async () => {
    const { petstore, clock } = testPetstore({ deprecations: withSunset });
    clock.set(SUNSET_AT_MS);
    expectError(await petstore.handle(request('/pets/abc')), 410, 'gone');
    const head = await petstore.handle(request('/pets/1', FREE_AUTH, 'HEAD'));
    expect(head.status).toBe(410);
    expect(head.body).toBeUndefined();
  });

  it('still answers 401 without a key after the sunset, without deprecation headers', async () => {
    const { petstore, clock } = testPetstore({ deprecations: withSunset });
    clock.set(SUNSET_AT_MS);
    const response = await petstore.handle(request('/pets/1', {}));
    expectError(response, 401, 'unauthorized');
    expect(response.headers['deprecation']).toBeUndefined();
  });
});

describe('configured deprecations', () => {
  it('sends Link with rel="deprecation" and rel="sunset"', async () => {
    const { petstore } = testPetstore({
      deprecations: {
        getPetById: {
          deprecatedAtMs: DEPRECATED_AT_MS,
          sunsetAtMs: SUNSET_AT_MS,
          documentationUrl: 'https://docs.example.com/deprecations/get-pet',
          sunsetUrl: 'https://docs.example.com/sunset',
        },
      },
      handlers: { getPetById: petHandler() },
    });
    const response = await petstore.handle(request('/pets/1'));
    expect(response.headers['link']).toBe(
      '<https://docs.example.com/deprecations/get-pet>; rel="deprecation"; type="text/html", <https://docs.example.com/sunset>; rel="sunset"; type="text/html"',
    );
  });

  it('sends Link with only the URL that is configured', () => {
    expect(deprecationHeaders({ deprecatedAtMs: 0, sunsetUrl: 'https://example.com/sunset' })['link']).toBe(
      '<https://example.com/sunset>; rel="sunset"; type="text/html"',
    );
    expect(deprecationHeaders({ deprecatedAtMs: 0, documentationUrl: 'https://example.com/doc' })['link']).toBe(
      '<https://example.com/doc>; rel="deprecation"; type="text/html"',
    );
  });

  it('keeps percent-escapes of a Link URL and encodes what cannot stand inside <…>', () => {
    const link = deprecationHeaders({
      deprecatedAtMs: 0,
      documentationUrl: 'https://docs.example.com/get%20pet?see=a%2Fb',
      sunsetUrl: 'https://docs.example.com/a b<c>"d"',
    })['link'];
    expect(link).toBe(
      '<https://docs.example.com/get%20pet?see=a%2Fb>; rel="deprecation"; type="text/html", <https://docs.example.com/a%20b%3Cc%3E%22d%22>; rel="sunset"; type="text/html"',
    );
  });

  it('answers with the configured dates instead of the default', async () => {
    const { petstore, clock } = testPetstore({
      deprecations: { getPetById: { deprecatedAtMs: Date.UTC(2025, 5, 1, 12, 0, 0, 999), sunsetAtMs: Date.UTC(2026, 0, 1, 0, 0, 30) } },
      handlers: { getPetById: petHandler() },
    });
    const response = await petstore.handle(request('/pets/1'));
    expect(response.status).toBe(200);
    expect(response.headers).toMatchObject({
      deprecation: `@${Date.UTC(2025, 5, 1, 12) / 1000}`,
      sunset: 'Thu, 01 Jan 2026 00:00:30 GMT',
    });
    clock.advance(30_000);
    expectError(await petstore.handle(request('/pets/1')), 410, 'gone');
  });

  it("keeps serving after the sunset with afterSunset: 'serve'", async () => {
    const getPetById = petHandler();
    const { petstore, clock } = testPetstore({
      deprecations: { getPetById: { deprecatedAtMs: DEPRECATED_AT_MS, sunsetAtMs: SUNSET_AT_MS, afterSunset: 'serve' } },
      handlers: { getPetById },
    });
    clock.set(SUNSET_AT_MS + 1_000);
    const response = await petstore.handle(request('/pets/1'));
    expect(response.status).toBe(200);
    expect(parse(response)).toEqual(PET);
    expect(response.headers).toMatchObject({ deprecation: '@1767225600', sunset: 'Fri, 01 Jan 2027 00:00:00 GMT' });
    expect(getPetById).toHaveBeenCalledTimes(1);
  });

  it('never answers 410 without a sunset, and sends no Sunset header', async () => {
    const { petstore, clock } = testPetstore({
      deprecations: { getPetById: { deprecatedAtMs: DEPRECATED_AT_MS } },
      handlers: { getPetById: petHandler() },
    });
    clock.set(Date.UTC(2100, 0, 1));
    const response = await petstore.handle(request('/pets/1'));
    expect(response.status).toBe(200);
    expect(response.headers['deprecation']).toBe('@1767225600');
    expect(response.headers['sunset']).toBeUndefined();
  });

  it('removes the default deprecation with null', async () => {
    const getPetById = petHandler();
    const { petstore, clock } = testPetstore({ deprecations: { getPetById: null }, handlers: { getPetById } });
    clock.set(SUNSET_AT_MS + 1);
    const response = await petstore.handle(request('/pets/1'));
    expect(response.status).toBe(200);
    expect(response.headers['deprecation']).toBeUndefined();
    expect(response.headers['sunset']).toBeUndefined();
    expect(response.headers['link']).toBeUndefined();
    const getOperation = (petstore.openapi['paths'] as Record<string, Record<string, Record<string, unknown>>>)['/pets/{petId}']?.['get'];
    expect(getOperation?.['deprecated']).toBeUndefined();
    expect(JSON.stringify(getOperation)).not.toContain('Deprecation');
    expect(getPetById.mock.calls[0]?.[0].deprecation).toBeUndefined();
  });

  it('deprecates another operation, and a retired createCategory creates nothing', async () => {
    const { petstore, categories, clock } = testPetstore({
      deprecations: { createCategory: { deprecatedAtMs: DEPRECATED_AT_MS, sunsetAtMs: DEPRECATED_AT_MS + 60_000 } },
    });
    const post = (name: string) =>
      petstore.handle({
        ...request('/categories', { ...FREE_AUTH, 'content-type': 'application/json' }, 'POST'),
        body: { kind: 'bytes', bytes: JSON.stringify({ name }) },
      });
    const created = await post('Dogs');
    expect(created.status).toBe(201);
    expect(created.headers['deprecation']).toBe('@1767225600');
    expect((await petstore.handle(request('/pets/1'))).headers['deprecation']).toBe('@1767225600');
    clock.advance(60_000);
    expectError(await post('Cats'), 410, 'gone');
    expect(categories.records.map((category) => category.name)).toEqual(['Dogs']);
  });
});

describe('invalid deprecation policies', () => {
  const valid: DeprecationPolicy = { deprecatedAtMs: DEPRECATED_AT_MS, sunsetAtMs: SUNSET_AT_MS };

  it.each<[string, DeprecationPolicy]>([
    ['a sunset before the deprecation', { deprecatedAtMs: SUNSET_AT_MS, sunsetAtMs: DEPRECATED_AT_MS }],
    ['a non-integer deprecatedAtMs', { ...valid, deprecatedAtMs: 1.5 }],
    ['a NaN deprecatedAtMs', { ...valid, deprecatedAtMs: Number.NaN }],
    ['a string deprecatedAtMs', { ...valid, deprecatedAtMs: '2026-01-01' as unknown as number }],
    ['a non-integer sunsetAtMs', { ...valid, sunsetAtMs: SUNSET_AT_MS + 0.5 }],
    ['an infinite sunsetAtMs', { ...valid, sunsetAtMs: Number.POSITIVE_INFINITY }],
    ['a documentationUrl that is not a URL', { ...valid, documentationUrl: 'not a url' }],
    ['a relative sunsetUrl', { ...valid, sunsetUrl: '/docs/sunset' }],
  ])('throws TypeError at createPetstore for %s', (_label, policy) => {
    expect(() => testPetstore({ deprecations: { getPetById: policy } })).toThrow(TypeError);
    expect(() => testPetstore({ deprecations: { listStoreOrders: policy } })).toThrow(/deprecations\.listStoreOrders/);
  });

  it('accepts a sunset equal to the deprecation', () => {
    expect(() => testPetstore({ deprecations: { getPetById: { deprecatedAtMs: 0, sunsetAtMs: 0 } } })).not.toThrow();
  });
});

describe('deprecationHeaders and isGone', () => {
  it('rounds the Deprecation time down to whole seconds', () => {
    expect(deprecationHeaders({ deprecatedAtMs: DEPRECATED_AT_MS + 999 })).toEqual({ deprecation: '@1767225600' });
  });

  it('is gone from the sunset on, unless configured to serve or without a sunset', () => {
    const policy = { deprecatedAtMs: DEPRECATED_AT_MS, sunsetAtMs: SUNSET_AT_MS };
    expect(isGone({ ...policy, afterSunset: 'gone' }, SUNSET_AT_MS - 1)).toBe(false);
    expect(isGone(policy, SUNSET_AT_MS)).toBe(true);
    expect(isGone(DEFAULT_DEPRECATIONS.getPetById!, Number.MAX_SAFE_INTEGER)).toBe(false);
    expect(isGone({ deprecatedAtMs: 0, sunsetAtMs: 1, afterSunset: 'serve' }, 2)).toBe(false);
    expect(isGone({ deprecatedAtMs: 0 }, Number.MAX_SAFE_INTEGER)).toBe(false);
  });
});

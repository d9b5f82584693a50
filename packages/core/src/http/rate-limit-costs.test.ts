/**
 * Costs per operation, account records shared by an account's keys, and the operator's `petstore.rateLimits`.
 */
import { describe, expect, it } from 'vitest';
import { staticApiKeys } from '../auth/api-key.js';
import { isPetstoreError } from '../errors.js';
import { testRateLimitStore } from '../../test-support/rate-limit-store.js';
import { CLIENT_ADDRESS, FREE_KEY, expectError, keyIdOf, parse, request, testPetstore } from '../../test-support/petstore.js';
import type { PetstoreOptions } from './petstore-options.js';
import type { PetstoreHeaders, PetstoreRequest } from './types.js';

const MINUTE = 60_000;
const T0 = Date.UTC(2026, 0, 1);
const ACME_ONE = 'acme-key-one-5c1f2e';
const ACME_TWO = 'acme-key-two-9d0b3a';
const auth = (key: string): PetstoreHeaders => ({ authorization: `Bearer ${key}` });

function create(headers: PetstoreHeaders, name = 'Dogs'): PetstoreRequest {
  return {
    method: 'POST',
    path: '/categories',
    headers: { ...headers, 'content-type': 'application/json' },
    body: { kind: 'bytes', bytes: JSON.stringify({ name }) },
    clientAddress: CLIENT_ADDRESS,
  };
}

/** A petstore whose two keys share the account `acme` on a plan of 10 units a minute. */
function acmePetstore(overrides: Partial<PetstoreOptions> = {}) {
  return testPetstore({
    apiKeys: staticApiKeys([
      { key: ACME_ONE, plan: 'enterprise', accountId: 'acme', limits: { requestsPerMinute: 10, requestsPerDay: 100 } },
      { key: ACME_TWO, plan: 'enterprise', accountId: 'acme', limits: { requestsPerMinute: 10, requestsPerDay: 100 } },
      { key: FREE_KEY, plan: 'free' },
    ]),
    ...overrides,
  });
}

describe('rateLimit.cost', () => {
  it('charges each operation its cost, in units, and shows units in the headers', async () => {
    const { petstore } = testPetstore({ rateLimit: { store: testRateLimitStore(), cost: { createCategory: 5, listCategories: 2 } } });
    const created = await petstore.handle(create(auth(FREE_KEY)));
    expect(created.status).toBe(201);
    expect(created.headers['x-ratelimit-remaining']).toBe('55');
    expect((await petstore.handle(request('/categories'))).headers['x-ratelimit-remaining']).toBe('53');
    expect((await petstore.handle(request('/openapi.json'))).headers['x-ratelimit-remaining']).toBe('52');
  });

  it('charges 1 for a path or method that matches no operation', async () => {
    const { petstore } = testPetstore({ rateLimit: { store: testRateLimitStore(), cost: { createCategory: 5, listCategories: 5, guard: 5 } } });
    expectError(await petstore.handle(request('/nowhere')), 404, 'not_found');
    const wrongMethod = await petstore.handle(request('/categories', auth(FREE_KEY), 'DELETE'));
    expectError(wrongMethod, 405, 'method_not_allowed');
    expect(wrongMethod.headers['x-ratelimit-remaining']).toBe('58');
  });

  it('refuses a request that costs more than what is left with 429, charging nothing and creating nothing', async () => {
    const { petstore, categories } = testPetstore({ rateLimit: { store: testRateLimitStore(), cost: { createCategory: 5 } } });
    for (let i = 0; i < 56; i++) await petstore.handle(request('/categories'));
    const refused = await petstore.handle(create(auth(FREE_KEY)));
    expectError(refused, 429, 'rate_limited');
    expect(refused.headers['x-ratelimit-remaining']).toBe('4');
    expect(refused.headers['retry-after']).toBe('60');
    expect(categories.records).toEqual([]);
    // The 4 units left are still there.
    for (let i = 0; i < 4; i++) expect((await petstore.handle(request('/categories'))).status).toBe(200);
    expectError(await petstore.handle(request('/categories')), 429, 'rate_limited');
  });

  it('states each operation\'s cost in the OpenAPI description', async () => {
    const { petstore } = testPetstore({ rateLimit: { store: testRateLimitStore(), cost: { createCategory: 5 } } });
    const document = parse(await petstore.handle(request('/openapi.json'))) as { paths: Record<string, Record<string, { operationId: string; 'x-rate-limit-cost': unknown }>> };
    const costs = Object.fromEntries(
      Object.values(document.paths).flatMap((methods) => Object.values(methods).map((operation) => [operation.operationId, operation['x-rate-limit-cost']])),
    );
    expect(costs).toEqual({ listCategories: 1, createCategory: 5, getPetById: 1, listStoreOrders: 1, getOpenApiDocument: 1 });
  });

  it.each([
    [{ createCategory: 0 }, /rateLimit\.cost\.createCategory must be at least 1/],
    [{ createCategory: 2.5 }, /rateLimit\.cost\.createCategory must be a whole number from 1/],
    [{ deleteCategory: 2 }, /rateLimit\.cost\.deleteCategory is not an operation or guard \(names: listCategories, createCategory, getPetById, listStoreOrders, getOpenApiDocument, guard\)/],
    [{ guard: 31 }, /rateLimit\.cost\.guard is 31, more than rateLimit\.anonymous\.requestsPerMinute \(30\)/],
    [{ listCategories: 61 }, /rateLimit\.cost\.listCategories is 61, more than rateLimit\.(plans\.free|anonymous)\.requestsPerMinute/],
  ])('refuses the cost %o at creation', (cost, message) => {
    expect(() => testPetstore({ rateLimit: { store: testRateLimitStore(), cost: cost as Record<string, number> } } as Partial<PetstoreOptions>)).toThrow(message);
  });

  it('checks a cost against configured plans, skipping limits of 0 (a plan that admits nothing)', () => {
    const rateLimit = (plans: NonNullable<PetstoreOptions['rateLimit']['plans']>) => ({ store: testRateLimitStore(), cost: { createCategory: 8 }, plans });
    expect(() => testPetstore({ rateLimit: rateLimit({ pro: { requestsPerMinute: 5, requestsPerDay: 100 } }) })).toThrow(
      /rateLimit\.cost\.createCategory is 8, more than rateLimit\.plans\.pro\.requestsPerMinute \(5\)/,
    );
    expect(() => testPetstore({ rateLimit: rateLimit({ pro: { requestsPerMinute: 0, requestsPerDay: 0 } }) })).not.toThrow();
  });

  it('answers 429 to a per-key custom limit below a cost', async () => {
    const { petstore } = testPetstore({ rateLimit: { store: testRateLimitStore(), cost: { createCategory: 5 } } });
    // ONE_PER_MINUTE_KEY carries its own limits of 1 a minute.
    const refused = await petstore.handle(create({ authorization: 'Bearer tight-key-81d3e6a5c0' }));
    expectError(refused, 429, 'rate_limited');
  });
});

describe('guard costs', () => {
  it('charges rateLimit.cost.guard, or the cost a call gives', async () => {
    const { petstore } = testPetstore({ rateLimit: { store: testRateLimitStore(), cost: { guard: 3 } } });
    const first = await petstore.guard(request('/reports'));
    expect(first.allowed && first.headers['x-ratelimit-remaining']).toBe('57');
    const dear = await petstore.guard(request('/reports'), { cost: 10 });
    expect(dear.allowed && dear.headers['x-ratelimit-remaining']).toBe('47');
    const tooDear = await petstore.guard(request('/reports'), { cost: 48 });
    expect(tooDear.allowed).toBe(false);
    expect(!tooDear.allowed && tooDear.response.status).toBe(429);
  });

  it('rejects a call with a cost that is not a whole number >= 1, charging nothing', async () => {
    const { petstore, rateLimitStore } = testPetstore();
    await expect(petstore.guard(request('/reports'), { cost: 0 })).rejects.toThrow(/petstore.guard: cost must be a whole number >= 1, got 0/);
    await expect(petstore.guard(request('/reports'), { cost: 1.5 })).rejects.toThrow(TypeError);
    expect(rateLimitStore.keys(T0)).toEqual([]);
  });
});

describe('account quotas and key bans through the API', () => {
  const ban = { rejectedThreshold: 2, intervalMs: MINUTE, durationMs: 15 * MINUTE };

  it('shares one quota between the keys of an account; a ban falls only on the key that earned it', async () => {
    const { petstore, clock } = acmePetstore({ rateLimit: { store: testRateLimitStore(), ban, cost: { createCategory: 4 } } });
    expect((await petstore.handle(create(auth(ACME_ONE), 'One')).then((answer) => answer.headers['x-ratelimit-remaining']))).toBe('6');
    expect((await petstore.handle(create(auth(ACME_TWO), 'Two'))).headers['x-ratelimit-remaining']).toBe('2');
    expectError(await petstore.handle(create(auth(ACME_ONE), 'Three')), 429, 'rate_limited');
    expectError(await petstore.handle(create(auth(ACME_ONE), 'Four')), 429, 'temporarily_banned');
    // The other key is refused for the quota only, and goes on once the minute rolls over.
    expectError(await petstore.handle(create(auth(ACME_TWO), 'Five')), 429, 'rate_limited');
    clock.advance(MINUTE);
    expect((await petstore.handle(create(auth(ACME_TWO), 'Six'))).status).toBe(201);
    expectError(await petstore.handle(request('/categories', auth(ACME_ONE))), 429, 'temporarily_banned');
  });
});

describe('petstore.rateLimits', () => {
  const ban = { rejectedThreshold: 1, intervalMs: MINUTE, durationMs: 15 * MINUTE };

  it('peeks at a key, its account and an address without charging them', async () => {
    const { petstore, clock } = acmePetstore({ rateLimit: { store: testRateLimitStore(), ban, cost: { createCategory: 4 } } });
    clock.advance(10_000);
    await petstore.handle(create(auth(ACME_ONE)));
    await petstore.handle(create(auth(ACME_TWO), 'Cats'));
    await petstore.handle(create(auth(ACME_TWO), 'Birds')); // 8 + 4 > 10: refused, ACME_TWO banned
    await petstore.handle(request('/categories', {}));
    const banEnd = T0 + 10_000 + 15 * MINUTE;
    const account = await petstore.rateLimits.peek({ accountId: 'acme' });
    expect(account).toEqual({
      nowMs: T0 + 10_000,
      windows: [
        { name: 'minute', limit: 10, windowMs: MINUTE, used: 8, remaining: 2, resetAtMs: T0 + MINUTE },
        { name: 'day', limit: 100, windowMs: 86_400_000, used: 8, remaining: 92, resetAtMs: T0 + 86_400_000 },
      ],
      bans: [{ keyId: keyIdOf(ACME_TWO), bannedUntilMs: banEnd }],
    });
    expect(await petstore.rateLimits.peek({ keyId: keyIdOf(ACME_ONE) })).toEqual({ ...account, bans: [] });
    expect(await petstore.rateLimits.peek({ keyId: keyIdOf(ACME_TWO) })).toEqual(account);
    const address = await petstore.rateLimits.peek({ clientAddress: CLIENT_ADDRESS });
    expect(address.windows.map(({ name, used, limit }) => ({ name, used, limit }))).toEqual([
      { name: 'minute', used: 1, limit: 30 },
      { name: 'day', used: 1, limit: 500 },
    ]);
    expect((await petstore.handle(request('/categories', auth(ACME_ONE)))).headers['x-ratelimit-remaining']).toBe('1');
  });

  it('resets a key: its account\'s windows and every ban, so the banned key is admitted at once', async () => {
    const { petstore } = acmePetstore({ rateLimit: { store: testRateLimitStore(), ban } });
    for (let i = 0; i < 11; i++) await petstore.handle(request('/categories', auth(ACME_ONE)));
    expectError(await petstore.handle(request('/categories', auth(ACME_ONE))), 429, 'temporarily_banned');
    await petstore.rateLimits.reset({ keyId: keyIdOf(ACME_ONE) });
    const after = await petstore.handle(request('/categories', auth(ACME_ONE)));
    expect(after.status).toBe(200);
    expect(after.headers['x-ratelimit-remaining']).toBe('9');
  });

  it('resets an anonymous caller by its address, normalised as a request is', async () => {
    const { petstore } = testPetstore({ rateLimit: { store: testRateLimitStore(), ban, anonymous: { requestsPerMinute: 1, requestsPerDay: 10 } } });
    const anonymous = (clientAddress: string): PetstoreRequest => ({ method: 'GET', path: '/openapi.json', headers: {}, clientAddress });
    await petstore.handle(anonymous('2001:db8:7:7::1'));
    expectError(await petstore.handle(anonymous('2001:db8:7:7::2')), 429, 'temporarily_banned');
    await petstore.rateLimits.reset({ clientAddress: '2001:db8:7:7::3' });
    expect((await petstore.handle(anonymous('2001:db8:7:7::2'))).status).toBe(200);
  });

  it('answers not_found for a keyId no key has, and a TypeError when the key store cannot look keyIds up', async () => {
    const { petstore } = testPetstore();
    const unknown = await petstore.rateLimits.peek({ keyId: 'no-such-key-id' }).catch((error: unknown) => error);
    expect(isPetstoreError(unknown) && unknown.code).toBe('not_found');
    const bare = testPetstore({ apiKeys: { findPrincipal: async () => undefined } }).petstore;
    await expect(bare.rateLimits.reset({ keyId: 'k' })).rejects.toThrow(/needs an ApiKeyStore with findByKeyId/);
    await expect(bare.rateLimits.peek({ accountId: 'acme' })).resolves.toEqual({ nowMs: T0, windows: [], bans: [] });
  });

  it('answers service_unavailable when the store fails', async () => {
    const failure = new Error('down');
    const store = { consume: () => Promise.reject(failure), peek: () => Promise.reject(failure), reset: () => Promise.reject(failure) };
    const { petstore, internalErrors } = testPetstore({ rateLimit: { store } });
    await expect(petstore.rateLimits.peek({ accountId: 'acme' })).rejects.toMatchObject({ code: 'service_unavailable', retryAfterSeconds: 5 });
    expect(internalErrors).toEqual([failure]);
  });
});

/**
 * Wrong options fail once, at creation, with a TypeError that names the option and what it accepts — never a
 * 500 or 503 on every request.
 */
import { describe, expect, it } from 'vitest';
import { staticApiKeys, type StaticApiKey } from './auth/api-key.js';
import type { PetstoreOptions } from './http/petstore-options.js';
import { createPetstore } from './http/pipeline.js';
import { testRateLimitStore } from '../test-support/rate-limit-store.js';
import { createRateLimiter } from './rate-limit/engine.js';
import { testCategoryStore } from '../test-support/category-store.js';
import { fakeClock } from './testing/fake-clock.js';

const SECRET = 'sk_live_do-not-echo-4f9a';

function valid(): PetstoreOptions {
  return {
    apiKeys: staticApiKeys([{ key: SECRET, plan: 'free' }]),
    categories: testCategoryStore(),
    rateLimit: { store: testRateLimitStore() },
    onWarning: () => undefined,
  };
}

/** The TypeError `create` throws. */
function typeErrorOf(create: () => unknown): TypeError {
  try {
    create();
  } catch (error) {
    expect(error).toBeInstanceOf(TypeError);
    return error as TypeError;
  }
  throw new Error('expected a TypeError, nothing was thrown');
}

describe('createPetstore checks its options at creation', () => {
  it('accepts valid options', () => {
    expect(() => createPetstore(valid())).not.toThrow();
  });

  it('accepts a fail-open insurance store with consume alone: it is never peeked or reset', () => {
    const options = valid();
    const insuranceStore = { consume: options.rateLimit.store.consume.bind(options.rateLimit.store) };
    expect(() => createPetstore({ ...options, rateLimit: { ...options.rateLimit, onStoreFailure: { mode: 'fail-open', insuranceStore } } })).not.toThrow();
  });

  it.each<[string, (options: PetstoreOptions) => unknown, RegExp]>([
    ['no rate-limit store', (o) => ({ ...o, rateLimit: {} }), /rateLimit\.store is required: it must be a RateLimitStore \(an object with consume\(key, request\), peek\(key, nowMs\) and reset\(key\)\)$/],
    ['a store without consume', (o) => ({ ...o, rateLimit: { store: {} } }), /rateLimit\.store\.consume is required: it must be a function/],
    ['a store of the first contract, without peek and reset', (o) => ({ ...o, rateLimit: { store: { consume: o.rateLimit.store.consume } } }), /rateLimit\.store\.peek is required: it must be a function.*rateLimit\.store\.reset is required/s],
    ['an anonymous store without peek', (o) => ({ ...o, rateLimit: { ...o.rateLimit, anonymousStore: { consume: o.rateLimit.store.consume, reset: o.rateLimit.store.reset } } }), /rateLimit\.anonymousStore\.peek is required: it must be a function/],
    ['categories undefined', (o) => ({ ...o, categories: undefined }), /categories must be a CategoryStore .* \(got nothing\)/],
    ['no categories at all', ({ categories: _omitted, ...o }) => o, /categories is required: it must be a CategoryStore/],
    ['an empty list of API-key stores', (o) => ({ ...o, apiKeys: [] }), /apiKeys must hold at least one ApiKeyStore \(got an array\)/],
    ['a list holding something that is not an API-key store', (o) => ({ ...o, apiKeys: [o.apiKeys, {}] }), /apiKeys\[1\]\.findPrincipal is required: it must be a function/],
    ['no API-key store', (o) => ({ ...o, apiKeys: undefined }), /apiKeys must be an ApiKeyStore .*staticApiKeys/],
    ['a plan that does not exist', (o) => ({ ...o, rateLimit: { ...o.rateLimit, plans: { gold: { requestsPerMinute: 1, requestsPerDay: 1 } } } }), /rateLimit\.plans\.gold is not a plan \(plans: free, pro, business, enterprise\)/],
    ['fractional limits', (o) => ({ ...o, rateLimit: { ...o.rateLimit, anonymous: { requestsPerMinute: 1.5, requestsPerDay: 5 } } }), /rateLimit\.anonymous\.requestsPerMinute must be a whole number/],
    ['a ban without its interval', (o) => ({ ...o, rateLimit: { ...o.rateLimit, ban: { rejectedThreshold: 3, durationMs: 1000 } } }), /rateLimit\.ban/],
    ['an unknown failure mode', (o) => ({ ...o, rateLimit: { ...o.rateLimit, onStoreFailure: { mode: 'retry' } } }), /rateLimit\.onStoreFailure\.mode must be \{ mode: 'fail-closed'.* \(got "retry"\)/],
    ['fail-open without an insurance store', (o) => ({ ...o, rateLimit: { ...o.rateLimit, onStoreFailure: { mode: 'fail-open' } } }), /rateLimit\.onStoreFailure\.insuranceStore is required: it must be a RateLimitStore/],
    ['an IPv6 subnet of 129 bits', (o) => ({ ...o, rateLimit: { ...o.rateLimit, ipv6Subnet: 129 } }), /rateLimit\.ipv6Subnet must be at most 128/],
    ['a misspelt option', (o) => ({ ...o, ratelimit: {} }), /ratelimit is not an option \(options: apiKeys, categories, rateLimit/],
    ['a handler for an operation that is not the host\'s', (o) => ({ ...o, handlers: { listCategories: () => ({}) } }), /handlers\.listCategories is not a host operation/],
    ['a deprecation with a relative URL', (o) => ({ ...o, deprecations: { getPetById: { deprecatedAtMs: 0, documentationUrl: '/docs' } } }), /deprecations\.getPetById\.documentationUrl must be an absolute http: or https: URL/],
    ['a deprecation with a javascript: URL', (o) => ({ ...o, deprecations: { getPetById: { deprecatedAtMs: 0, documentationUrl: 'javascript:alert(1)' } } }), /deprecations\.getPetById\.documentationUrl must be an absolute http: or https: URL/],
    ['a sunset link with a data: URL', (o) => ({ ...o, deprecations: { getPetById: { deprecatedAtMs: 0, sunsetUrl: 'data:text/html,x' } } }), /deprecations\.getPetById\.sunsetUrl must be an absolute http: or https: URL/],
    ['a server with a javascript: URL', (o) => ({ ...o, openapi: { servers: { production: 'javascript:alert(1)//v1' } } }), /openapi\.servers\.production must be an absolute http: or https: URL/],
    ['a license with a javascript: URL', (o) => ({ ...o, openapi: { license: { name: 'x', url: 'javascript:alert(1)' } } }), /openapi\.license\.url must be an absolute http: or https: URL/],
    ['a sunset before the deprecation', (o) => ({ ...o, deprecations: { getPetById: { deprecatedAtMs: 10, sunsetAtMs: 5 } } }), /deprecations\.getPetById the sunset \(sunsetAtMs\) must not precede/],
    ['a stability marker that does not exist', (o) => ({ ...o, stability: { listStoreOrders: 'alpha' } }), /stability\.listStoreOrders must be 'experimental' or 'beta' \(got "alpha"\)/],
    ['a body limit of 0', (o) => ({ ...o, bodyLimitBytes: 0 }), /bodyLimitBytes must be at least 1 \(got 0\)/],
    ['a prefix ending with /', (o) => ({ ...o, prefix: '/v1/' }), /prefix must be empty or start with "\/" and not end with "\/"/],
    ['basePath, the old name of prefix', (o) => ({ ...o, basePath: '/api' }), /basePath is not an option \(options: .*prefix/],
    ['a clock without now()', (o) => ({ ...o, clock: { time: () => 0 } }), /clock\.now is required: it must be a function/],
  ])('refuses %s', (_label, change, message) => {
    const error = typeErrorOf(() => createPetstore(change(valid()) as PetstoreOptions));
    expect(error.message).toMatch(/^createPetstore: /);
    expect(error.message).toMatch(message);
  });

  it('names several problems at once', () => {
    const error = typeErrorOf(() => createPetstore({ ...valid(), categories: undefined, bodyLimitBytes: -1 } as unknown as PetstoreOptions));
    expect(error.message).toContain('categories must be');
    expect(error.message).toContain('bodyLimitBytes must be');
  });

  it('refuses options that are not an object', () => {
    expect(typeErrorOf(() => createPetstore(undefined as unknown as PetstoreOptions)).message).toMatch(/^createPetstore: the options /);
  });
});

describe('staticApiKeys checks its entries', () => {
  it.each<[string, unknown, RegExp]>([
    ['a plan that does not exist', [{ key: SECRET, plan: 'gold' }], /\[0\]\.plan must be one of free, pro, business, enterprise \(got "gold"\)/],
    ['an undefined key', [{ key: 'fine-key', plan: 'free' }, { key: undefined, plan: 'pro' }], /\[1\]\.key must be a string/],
    ['an empty key', [{ key: '', plan: 'free' }], /\[0\]\.key must not be empty/],
    ['a key no client could send (a space)', [{ key: `${SECRET} x`, plan: 'free' }], /\[0\]\.key must be a bearer token/],
    ['a key over 4,096 characters', [{ key: SECRET.padEnd(4097, 'x'), plan: 'free' }], /\[0\]\.key must be at most 4096 characters/],
    ['enterprise limits that are not numbers', [{ key: SECRET, plan: 'enterprise', limits: { requestsPerMinute: '5', requestsPerDay: 10 } }], /\[0\]\.limits\.requestsPerMinute must be a whole number/],
    ['a misspelt field', [{ key: SECRET, plan: 'free', acountId: 'acme' }], /\[0\]\.acountId is not a field of an API key/],
    ['not an array', { key: SECRET, plan: 'free' }, /must be an array/],
  ])('refuses %s, naming the entry, never the key', (_label, keys, message) => {
    const error = typeErrorOf(() => staticApiKeys(keys as StaticApiKey[]));
    expect(error.message).toMatch(/^staticApiKeys: /);
    expect(error.message).toMatch(message);
    expect(error.message).not.toContain(SECRET);
  });

  it('never quotes a key that is the wrong type either', () => {
    const error = typeErrorOf(() => staticApiKeys([{ key: 123456789 as unknown as string, plan: 'free' }]));
    expect(error.message).not.toContain('123456789');
  });

  it('refuses a key listed twice', () => {
    expect(typeErrorOf(() => staticApiKeys([{ key: SECRET, plan: 'free' }, { key: SECRET, plan: 'pro' }])).message).toContain('listed twice');
  });
});

describe('createRateLimiter checks its options at creation', () => {
  it('refuses a missing store, and a clock without now()', () => {
    const error = typeErrorOf(() => createRateLimiter({ clock: {} } as unknown as Parameters<typeof createRateLimiter>[0]));
    expect(error.message).toMatch(/^createRateLimiter: /);
    expect(error.message).toContain('store is required: it must be a RateLimitStore');
    expect(error.message).toContain('clock.now is required: it must be a function');
  });

  it('accepts a store with or without a clock', () => {
    expect(() => createRateLimiter({ store: testRateLimitStore(), clock: fakeClock() })).not.toThrow();
    expect(() => createRateLimiter({ store: testRateLimitStore() })).not.toThrow();
  });

  it("refuses anonymousKey, createPetstore's option: the engine sees no request, consume takes the key", () => {
    const options = { store: testRateLimitStore(), anonymousKey: () => 'someone' };
    const error = typeErrorOf(() => createRateLimiter(options as Parameters<typeof createRateLimiter>[0]));
    expect(error.message).toMatch(/^createRateLimiter: anonymousKey is not an option \(options: store, .*clock\); .*consume\(\{ anonymousKey \}\)/);
  });

  it("refuses cost, createPetstore's option: the engine charges what consume is told", () => {
    const options = { store: testRateLimitStore(), cost: { createCategory: 2 } };
    const error = typeErrorOf(() => createRateLimiter(options as Parameters<typeof createRateLimiter>[0]));
    expect(error.message).toMatch(/^createRateLimiter: cost is not an option .*consume\(subject, \{ cost \}\)/);
  });
});

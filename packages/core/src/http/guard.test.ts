import { describe, expect, it } from 'vitest';
import { NO_PEEK_RESET, testRateLimitStore } from '../../test-support/rate-limit-store.js';
import type { GuardResult } from './admission.js';
import {
  FREE_KEY,
  ONE_PER_MINUTE_KEY,
  expectError,
  keyIdOf,
  request,
  testPetstore,
} from '../../test-support/petstore.js';
import type { PetstoreResponse } from './types.js';

const TIGHT_AUTH = { authorization: `Bearer ${ONE_PER_MINUTE_KEY}` };
const HOST_ROUTE = '/reports/daily';

/** The refusal of a guard result; fails the test when the request was admitted. */
function refused(result: GuardResult): PetstoreResponse {
  if (result.allowed) throw new Error('expected the guard to refuse the request');
  return result.response;
}

describe('guard', () => {
  it('admits a valid key with its principal and the rate-limit headers only', async () => {
    const { petstore } = testPetstore();
    const result = await petstore.guard(request(HOST_ROUTE));
    expect(result).toEqual({
      allowed: true,
      principal: { keyId: keyIdOf(FREE_KEY), accountId: keyIdOf(FREE_KEY), plan: 'free' },
      headers: {
        'x-ratelimit-limit': '60',
        'x-ratelimit-remaining': '59',
        'x-ratelimit-reset': String(Date.UTC(2026, 0, 1, 0, 1) / 1000),
      },
    });
  });

  it('adds the standard RateLimit headers when configured', async () => {
    const { petstore } = testPetstore({ rateLimit: { store: testRateLimitStore(), standardHeaders: true } });
    const result = await petstore.guard(request(HOST_ROUTE));
    expect(result.allowed && Object.keys(result.headers).sort()).toEqual([
      'ratelimit',
      'ratelimit-policy',
      'x-ratelimit-limit',
      'x-ratelimit-remaining',
      'x-ratelimit-reset',
    ]);
  });

  it('refuses a missing key with a complete 401 answer and a bare challenge', async () => {
    const { petstore } = testPetstore();
    const response = refused(await petstore.guard(request(HOST_ROUTE, {})));
    expectError(response, 401, 'unauthorized');
    expect(response.headers).toMatchObject({
      'www-authenticate': 'Bearer realm="petstore"',
      'x-ratelimit-limit': '30',
      'x-ratelimit-remaining': '29',
    });
  });

  it('refuses an invalid key with error="invalid_token", without echoing it', async () => {
    const { petstore } = testPetstore({ realm: 'reports' });
    const response = refused(await petstore.guard(request(HOST_ROUTE, { authorization: 'Bearer wrong-key-3e9d' })));
    expectError(response, 401, 'unauthorized');
    expect(response.headers['www-authenticate']).toMatch(/^Bearer realm="reports", error="invalid_token"/);
    expect(JSON.stringify(response)).not.toContain('wrong-key-3e9d');
  });

  it('requires a key whatever the path, even the one of the public description', async () => {
    const { petstore } = testPetstore();
    expectError(refused(await petstore.guard(request('/openapi.json', {}))), 401, 'unauthorized');
  });

  it('answers a refused HEAD without a body', async () => {
    const { petstore } = testPetstore();
    const response = refused(await petstore.guard(request(HOST_ROUTE, {}, 'HEAD')));
    expect(response.status).toBe(401);
    expect(response.body).toBeUndefined();
  });

  it('refuses over the limit with 429 and Retry-After', async () => {
    const { petstore, clock } = testPetstore();
    clock.advance(10_000);
    expect((await petstore.guard(request(HOST_ROUTE, TIGHT_AUTH))).allowed).toBe(true);
    const response = refused(await petstore.guard(request(HOST_ROUTE, TIGHT_AUTH)));
    expectError(response, 429, 'rate_limited');
    expect(response.headers).toMatchObject({ 'retry-after': '50', 'x-ratelimit-remaining': '0' });
    clock.advance(50_000);
    expect((await petstore.guard(request(HOST_ROUTE, TIGHT_AUTH))).allowed).toBe(true);
  });

  it('refuses a banned key with 429 temporarily_banned', async () => {
    const { petstore } = testPetstore({
      rateLimit: { store: testRateLimitStore(), ban: { rejectedThreshold: 2, intervalMs: 60_000, durationMs: 300_000 } },
    });
    for (let i = 0; i < 2; i++) await petstore.guard(request(HOST_ROUTE, TIGHT_AUTH));
    const response = refused(await petstore.guard(request(HOST_ROUTE, TIGHT_AUTH)));
    expectError(response, 429, 'temporarily_banned');
    expect(response.headers['retry-after']).toBe('300');
  });

  it('shares one quota with handle, both ways', async () => {
    const { petstore, clock } = testPetstore();
    expect((await petstore.guard(request(HOST_ROUTE, TIGHT_AUTH))).allowed).toBe(true);
    expectError(await petstore.handle(request('/categories', TIGHT_AUTH)), 429, 'rate_limited');

    clock.advance(60_000);
    expect((await petstore.handle(request('/categories', TIGHT_AUTH))).status).toBe(200);
    expectError(refused(await petstore.guard(request(HOST_ROUTE, TIGHT_AUTH))), 429, 'rate_limited');
  });

  it('counts guard and handle requests in one remaining count', async () => {
    const { petstore } = testPetstore();
    await petstore.guard(request(HOST_ROUTE));
    await petstore.handle(request('/categories'));
    const result = await petstore.guard(request(HOST_ROUTE));
    expect(result.allowed && result.headers['x-ratelimit-remaining']).toBe('57');
  });

  it('fails closed with a 503 service_unavailable answer when the rate-limit store fails, and never throws', async () => {
    const error = new Error('redis down');
    const { petstore, internalErrors } = testPetstore({ rateLimit: { store: { ...NO_PEEK_RESET, consume: () => Promise.reject(error) } } });
    const response = refused(await petstore.guard(request(HOST_ROUTE)));
    expectError(response, 503, 'service_unavailable');
    expect(response.headers['retry-after']).toBe('5');
    expect(response.headers['x-ratelimit-limit']).toBeUndefined();
    expect(internalErrors).toEqual([error]);
  });

  it('fails closed also when the store throws synchronously and the reporter throws', async () => {
    const { petstore } = testPetstore({
      rateLimit: {
        store: {
          ...NO_PEEK_RESET,
          consume: () => {
            throw new Error('not connected');
          },
        },
      },
      onInternalError: () => {
        throw new Error('logger down');
      },
    });
    const result = petstore.guard(request(HOST_ROUTE));
    await expect(result).resolves.toMatchObject({ allowed: false, response: { status: 503 } });
  });

  it('admits through the insurance store when configured to fail open', async () => {
    const { petstore } = testPetstore({
      rateLimit: {
        store: { ...NO_PEEK_RESET, consume: () => Promise.reject(new Error('down')) },
        onStoreFailure: { mode: 'fail-open', insuranceStore: testRateLimitStore() },
      },
    });
    const result = await petstore.guard(request(HOST_ROUTE));
    expect(result.allowed && result.headers['x-ratelimit-remaining']).toBe('59');
  });

  it('answers 500 without details when the API-key store fails, and never throws', async () => {
    const error = new Error('key database at 10.0.0.5 down');
    const { petstore, internalErrors } = testPetstore({ apiKeys: { findPrincipal: () => Promise.reject(error) } });
    const response = refused(await petstore.guard(request(HOST_ROUTE)));
    expectError(response, 500, 'internal_error');
    expect(response.body).not.toContain('10.0.0.5');
    expect(internalErrors).toEqual([error]);
  });
});

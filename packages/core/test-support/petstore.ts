/**
 * A petstore wired to in-test stores and a fake clock, shared by the pipeline and Fetch-entry tests.
 * For this package's own tests only; not exported.
 */
import { expect } from 'vitest';
import { hashApiKey, staticApiKeys } from '../src/auth/api-key.js';
import { testRateLimitStore, type TestRateLimitStore } from './rate-limit-store.js';
import { testCategoryStore, type TestCategoryStore } from './category-store.js';
import { fakeClock, type FakeClock } from '../src/testing/fake-clock.js';
import type { PetstoreOptions } from '../src/http/petstore-options.js';
import { createPetstore, type Petstore } from '../src/http/pipeline.js';
import type { PetstoreHeaders, PetstoreRequest, PetstoreResponse } from '../src/http/types.js';
import type { PetstoreWarning } from '../src/http/warnings.js';

/** A Free-plan API key (60 per minute, 1,000 per day). */
export const FREE_KEY = 'free-key-4f9a0c2e7b';
/** An Enterprise key limited to 1 request per minute, for 429 tests. */
export const ONE_PER_MINUTE_KEY = 'tight-key-81d3e6a5c0';

/** The `keyId` (and `accountId`) that `staticApiKeys` derives from an API key: its digest's first 16 bytes, base64url. */
export function keyIdOf(apiKey: string): string {
  return hashApiKey(apiKey).subarray(0, 16).toString('base64url');
}

/** The Authorization header of {@link FREE_KEY}. */
export const FREE_AUTH: PetstoreHeaders = Object.freeze({ authorization: `Bearer ${FREE_KEY}` });
/** The client address of {@link request}. */
export const CLIENT_ADDRESS = '203.0.113.7';

/** A body-less request from {@link CLIENT_ADDRESS}; default `GET` with {@link FREE_AUTH}. */
export function request(path: string, headers: PetstoreHeaders = FREE_AUTH, method = 'GET'): PetstoreRequest {
  return { method, path, headers, clientAddress: CLIENT_ADDRESS };
}

/** The JSON body of an answer; throws when it has none. */
export function parse(response: PetstoreResponse): unknown {
  if (response.body === undefined) throw new Error('the response has no body');
  return JSON.parse(response.body) as unknown;
}

/** Asserts an Error answer: exactly code, message and status, the status matching the HTTP status. */
export function expectError(response: PetstoreResponse, status: number, code: string): void {
  expect(response.status).toBe(status);
  expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
  const body = parse(response) as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['code', 'message', 'status']);
  expect(body).toMatchObject({ code, status });
  expect(body['message']).toEqual(expect.any(String));
  expect(body['message']).not.toBe('');
}

export interface TestPetstore {
  petstore: Petstore;
  clock: FakeClock;
  categories: TestCategoryStore;
  rateLimitStore: TestRateLimitStore;
  /** Every error passed to `onInternalError`. */
  internalErrors: unknown[];
  /** Every warning passed to `onWarning`. */
  warnings: PetstoreWarning[];
}

/** Builds a petstore on 2026-01-01T00:00:00Z; `overrides` replace any option. */
export function testPetstore(overrides: Partial<PetstoreOptions> = {}): TestPetstore {
  const clock = fakeClock();
  const categories = testCategoryStore();
  const rateLimitStore = testRateLimitStore();
  const internalErrors: unknown[] = [];
  const warnings: PetstoreWarning[] = [];
  const petstore = createPetstore({
    apiKeys: staticApiKeys([
      { key: FREE_KEY, plan: 'free' },
      { key: ONE_PER_MINUTE_KEY, plan: 'enterprise', limits: { requestsPerMinute: 1, requestsPerDay: 100 } },
    ]),
    categories,
    rateLimit: { store: rateLimitStore },
    clock,
    onInternalError: (error) => internalErrors.push(error),
    onWarning: (warning) => warnings.push(warning),
    ...overrides,
  });
  return { petstore, clock, categories, rateLimitStore, internalErrors, warnings };
}

/**
 * A petstore wired to in-test stores and a fake clock, shared by the pipeline and Fetch-entry tests.
 * For this package's own tests only; not exported.
 */
import { staticApiKeys } from '../auth/api-key.js';
import { testRateLimitStore, type TestRateLimitStore } from '../rate-limit/test-store.js';
import { testCategoryStore, type TestCategoryStore } from '../storage/test-category-store.js';
import { fakeClock, type FakeClock } from '../testing/fake-clock.js';
import { createPetstore, type Petstore, type PetstoreOptions } from './pipeline.js';

/** A Free-plan API key (60 per minute, 1,000 per day). */
export const FREE_KEY = 'free-key-4f9a0c2e7b';
/** An Enterprise key limited to 1 request per minute, for 429 tests. */
export const ONE_PER_MINUTE_KEY = 'tight-key-81d3e6a5c0';

export interface TestPetstore {
  petstore: Petstore;
  clock: FakeClock;
  categories: TestCategoryStore;
  rateLimitStore: TestRateLimitStore;
  /** Every error passed to `onInternalError`. */
  internalErrors: unknown[];
}

/** Builds a petstore on 2026-01-01T00:00:00Z; `overrides` replace any option. */
export function testPetstore(overrides: Partial<PetstoreOptions> = {}): TestPetstore {
  const clock = fakeClock();
  const categories = testCategoryStore();
  const rateLimitStore = testRateLimitStore();
  const internalErrors: unknown[] = [];
  const petstore = createPetstore({
    apiKeys: staticApiKeys([
      { key: FREE_KEY, plan: 'free' },
      { key: ONE_PER_MINUTE_KEY, plan: 'enterprise', limits: { requestsPerMinute: 1, requestsPerDay: 100 } },
    ]),
    categories,
    rateLimit: { store: rateLimitStore },
    clock,
    onInternalError: (error) => internalErrors.push(error),
    ...overrides,
  });
  return { petstore, clock, categories, rateLimitStore, internalErrors };
}

/**
 * The conformance suites themselves: they pass on correct reference stores, and they fail on the broken
 * stores the field keeps shipping (get-then-set, windows charged one by one, racy ids).
 */
import { describe, expect, it } from 'vitest';
import { decideConsume, type RateLimitState } from '../rate-limit/fixed-window.js';
import { NO_PEEK_RESET, testRateLimitStore } from '../../test-support/rate-limit-store.js';
import type { RateLimitStore, WindowUsage } from '../rate-limit/types.js';
import type { Category } from '../schemas.js';
import type { CategoryStore } from '../storage/category-store.js';
import { testCategoryStore } from '../../test-support/category-store.js';
import { runCategoryStoreConformance } from './category-store-suite.js';
import { runRateLimitStoreConformance, type RateLimitStoreHarness } from './rate-limit-store-suite.js';
import type { ConformanceTestApi } from './test-api.js';

function referenceHarness(): RateLimitStoreHarness {
  const store = testRateLimitStore();
  return {
    store,
    remainingTtlMs: async (key) => store.ttlMs(key, Date.now()),
    dropTtl: async (key) => store.dropTtl(key),
  };
}

runRateLimitStoreConformance({ describe, it }, { name: 'reference rate-limit store', createStore: referenceHarness });
runCategoryStoreConformance(
  { describe, it },
  { name: 'reference category store', createStore: () => ({ store: testCategoryStore() }), capabilities: { capacity: false } },
);

/** Registers a suite into a collector instead of a runner, then runs every case: name → failure message. */
async function outcomesOf(register: (test: ConformanceTestApi) => void): Promise<Map<string, string | undefined>> {
  const cases: Array<[string, () => Promise<void>]> = [];
  register({ describe: (_name, body) => body(), it: (name, body) => cases.push([name, body]) });
  const outcomes = new Map<string, string | undefined>();
  for (const [name, body] of cases) {
    outcomes.set(
      name,
      await body().then(
        () => undefined,
        (error: unknown) => String(error instanceof Error ? error.message : error),
      ),
    );
  }
  return outcomes;
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
const BURST_CASE = 'admits exactly the quota under a burst of parallel consumes, never one more';
const ALL_OR_NONE_CASE = 'charges all windows or none: a full minute does not burn the day, a full day not the minute';

describe('the conformance suites catch broken stores', () => {
  it('fail a get-then-set rate-limit store on the burst, and only there', async () => {
    const states = new Map<string, RateLimitState>();
    const getThenSet: RateLimitStore = {
      ...NO_PEEK_RESET,
      async consume(key, request) {
        const previous = states.get(key); // get …
        await tick(); // … a network hop …
        const decision = decideConsume(previous, request);
        states.set(key, decision.state); // … set: concurrent requests all read the same state
        return decision.result;
      },
    };
    const outcomes = await outcomesOf((test) =>
      runRateLimitStoreConformance(test, { createStore: () => ({ store: getThenSet }), capabilities: { expiry: false, lostTtl: false } }),
    );
    expect(outcomes.get(BURST_CASE)).toMatch(/admitted of 200 parallel with quota 50/);
    const otherFailures = [...outcomes].filter(([name, failure]) => failure !== undefined && name !== BURST_CASE);
    expect(otherFailures.map(([name]) => name)).toEqual(['keeps callers apart, also under parallel bursts']);
  });

  it('fail a store that charges each window on its own (a minute rejection burns the day)', async () => {
    const counts = new Map<string, number>();
    const oneByOne: RateLimitStore = {
      ...NO_PEEK_RESET,
      async consume(key, request) {
        const windows: WindowUsage[] = request.windows.map((window) => {
          const start = Math.floor(request.nowMs / window.windowMs) * window.windowMs;
          const counter = `${key}|${window.name}|${start}`;
          const used = (counts.get(counter) ?? 0) + 1;
          counts.set(counter, used);
          return { ...window, used, remaining: Math.max(0, window.limit - used), resetAtMs: start + window.windowMs };
        });
        const allowed = windows.every((window) => window.used <= window.limit);
        return allowed
          ? { allowed, nowMs: request.nowMs, windows }
          : { allowed, reason: 'rate_limited', nowMs: request.nowMs, windows };
      },
    };
    const outcomes = await outcomesOf((test) =>
      runRateLimitStoreConformance(test, { createStore: () => ({ store: oneByOne }), capabilities: { expiry: false, lostTtl: false } }),
    );
    expect(outcomes.get(ALL_OR_NONE_CASE)).toMatch(/day untouched by the minute rejection/);
  });

  it('fail a store that never expires keys', async () => {
    const outcomes = await outcomesOf((test) =>
      runRateLimitStoreConformance(test, {
        createStore: () => ({ ...referenceHarness(), remainingTtlMs: async () => Number.POSITIVE_INFINITY }),
      }),
    );
    expect(outcomes.get('lets every key expire: no later than its last window, ban or rejection interval requires')).toMatch(
      /within the day window|has an expiry/,
    );
  });

  it('fail a category store whose id assignment races', async () => {
    const racy = (): CategoryStore => {
      const records: Category[] = [];
      return {
        list: async () => [...records],
        async create(newCategory) {
          const id = records.length + 1; // read …
          await tick();
          const category = { id, ...newCategory }; // … then write: parallel creates share ids
          records.push(category);
          return category;
        },
        createIdempotent: () => Promise.reject(new Error('unused')),
      };
    };
    const outcomes = await outcomesOf((test) =>
      runCategoryStoreConformance(test, { createStore: () => ({ store: racy() }), capabilities: { capacity: false } }),
    );
    expect(outcomes.get('gives parallel creates unique, increasing, safe-integer ids, and lists them all in id order')).toMatch(
      /ids are unique/,
    );
  });

  it('fail a category store whose idempotent create checks the record and creates in two steps', async () => {
    const twoSteps = (): CategoryStore => {
      const store = testCategoryStore();
      const records = new Map<string, Category>();
      return {
        ...store,
        async createIdempotent(newCategory, request) {
          const found = records.get(request.key); // check …
          if (found !== undefined) return { outcome: 'replayed', category: found };
          await tick();
          const category = await store.create(newCategory); // … then create: parallel calls all create
          records.set(request.key, category);
          return { outcome: 'created', category };
        },
      };
    };
    const outcomes = await outcomesOf((test) =>
      runCategoryStoreConformance(test, { createStore: () => ({ store: twoSteps() }), capabilities: { capacity: false } }),
    );
    expect(outcomes.get('creates exactly one category for 50 parallel idempotent creates with one key; all 50 answer it')).toMatch(/one created/);
  });

  it('say which switch to turn off when a harness lacks a hook', async () => {
    const outcomes = await outcomesOf((test) =>
      runRateLimitStoreConformance(test, { createStore: () => ({ store: testRateLimitStore() }) }),
    );
    expect(outcomes.get('sets the expiry again on the next consume after a key lost it')).toMatch(
      /set capabilities.lostTtl to false/,
    );
  });
});

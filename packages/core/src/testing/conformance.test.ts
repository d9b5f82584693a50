/**
 * The conformance suites and the model comparison themselves: they pass on correct reference stores, and they
 * fail on the broken stores the field keeps shipping (get-then-set, windows charged one by one, racy ids) and on
 * the mutations of the decision a review made or could make (an admitted request that forgets the rejections,
 * a rejected request that charges, a ban one rejection late, a window boundary off by a millisecond, …).
 */
import { describe, expect, it } from 'vitest';
import { decideConsume, peekState, type ConsumeDecision, type RateLimitState } from '../rate-limit/decide.js';
import { NO_PEEK_RESET, testRateLimitStore } from '../../test-support/rate-limit-store.js';
import type { ConsumeRequest, RateLimitStore, WindowUsage } from '../rate-limit/types.js';
import type { Category } from '../schemas.js';
import type { CategoryStore } from '../storage/category-store.js';
import { testCategoryStore } from '../../test-support/category-store.js';
import { runCategoryStoreConformance, type CategoryStoreHarness } from './category-store-suite.js';
import { runRateLimitModelComparison, type RateLimitModelHarness } from './rate-limit-model-comparison.js';
import { runRateLimitStoreConformance, type RateLimitStoreHarness } from './rate-limit-store-suite.js';
import { outcomesOf } from '../../test-support/conformance-outcomes.js';

function referenceHarness(): RateLimitStoreHarness {
  const store = testRateLimitStore();
  return {
    store,
    remainingTtlMs: async (key) => store.ttlMs(key, Date.now()),
    dropTtl: async (key) => store.dropTtl(key),
  };
}

runRateLimitStoreConformance({ describe, it }, { name: 'reference rate-limit store', createStore: referenceHarness });
runRateLimitModelComparison({
  describe,
  it,
  name: 'reference rate-limit store against the model',
  harness: () => {
    const store = testRateLimitStore();
    return { store, readState: (key) => store.readState(key) };
  },
  seeds: [1, 2, 3],
});
runCategoryStoreConformance(
  { describe, it },
  { name: 'reference category store', createStore: () => ({ store: testCategoryStore() }), capabilities: { capacity: false } },
);

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
const BURST_CASE = 'admits exactly the quota under a burst of parallel consumes, never one more';
const ALL_OR_NONE_CASE = 'charges all windows or none: a full minute does not burn the day, a full day not the minute';
const COST_BURST_CASE = 'charges the cost to every window, all or nothing, also under a parallel burst';
const IDEMPOTENT_BURST_CASE = 'creates exactly one category for 50 parallel idempotent creates with one key; all 50 answer it';

/**
 * A hold on a test store's writes, as a harness's `holdWrites` gives one: while held, `write` and `waitFor`
 * block, and `whenBlocked(n)` resolves once `n` calls are blocked.
 */
function writeGate() {
  let gate: Promise<void> | undefined;
  let open: () => void = () => undefined;
  let blocked = 0;
  const watchers: Array<{ count: number; resolve: () => void }> = [];
  const block = async <T,>(next: () => Promise<T>): Promise<T> => {
    if (gate !== undefined) {
      blocked++;
      for (const watcher of watchers.filter((entry) => blocked >= entry.count)) watcher.resolve();
      await gate;
    }
    return next();
  };
  return {
    async hold() {
      gate = new Promise<void>((resolve) => (open = resolve));
      return {
        release: async () => {
          gate = undefined;
          blocked = 0;
          open();
        },
      };
    },
    whenBlocked: (count: number) =>
      new Promise<void>((resolve) => {
        if (blocked >= count) resolve();
        else watchers.push({ count, resolve });
      }),
    write: <T,>(write: () => Promise<T>) => block(write),
    waitFor: <T,>(promise: Promise<T>) => block(() => promise),
  };
}

describe('the conformance suites catch broken stores', () => {
  it('fail a get-then-set rate-limit store on the burst, and only there', async () => {
    const states = new Map<string, RateLimitState>();
    const getThenSet: RateLimitStore = {
      peek: async (key, nowMs) => peekState(states.get(key), nowMs),
      reset: async (key) => void states.delete(key),
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
    expect(outcomes.get(COST_BURST_CASE)).toMatch(/admitted of 100 parallel costing 3 with quota 50/);
    const otherFailures = [...outcomes].filter(([name, failure]) => failure !== undefined && name !== BURST_CASE && name !== COST_BURST_CASE);
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

  it('fail a category store that ignores the page it is asked for', async () => {
    const unpaged = (): CategoryStore => {
      const store = testCategoryStore();
      return { ...store, list: () => store.list() };
    };
    const outcomes = await outcomesOf((test) =>
      runCategoryStoreConformance(test, { createStore: () => ({ store: unpaged() }), capabilities: { capacity: false } }),
    );
    expect(outcomes.get('answers pages: at most limit, ids above after, in ascending id order')).toMatch(/the first page/);
  });

  it('fail a category store whose list version misses idempotent creates', async () => {
    const plainOnly = (): CategoryStore => {
      const store = testCategoryStore();
      let creates = 0;
      return {
        ...store,
        listVersion: async () => String(creates),
        async create(newCategory) {
          creates += 1;
          return store.create(newCategory);
        },
      };
    };
    const outcomes = await outcomesOf((test) =>
      runCategoryStoreConformance(test, { createStore: () => ({ store: plainOnly() }), capabilities: { capacity: false } }),
    );
    expect(outcomes.get('changes the list version when, and only when, a category is created')).toMatch(/an idempotent create changes it/);
  });

  it('fail a category store without listVersion unless capabilities.listVersion is false', async () => {
    const failing = await outcomesOf((test) =>
      runCategoryStoreConformance(test, { createStore: () => ({ store: testCategoryStore({ listVersion: false }) }), capabilities: { capacity: false } }),
    );
    expect(failing.get('changes the list version when, and only when, a category is created')).toMatch(/has listVersion\(\)/);
    const passing = await outcomesOf((test) =>
      runCategoryStoreConformance(test, {
        createStore: () => ({ store: testCategoryStore({ listVersion: false }) }),
        capabilities: { capacity: false, listVersion: false },
      }),
    );
    expect(passing.has('changes the list version when, and only when, a category is created')).toBe(false);
    expect([...passing].filter(([, failure]) => failure !== undefined).map(([name]) => name)).toEqual([]);
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

  it('fail a category store whose idempotent claim checks then creates on every run, once its writes are held', async () => {
    const twoStepsHeld = (): CategoryStoreHarness => {
      const gate = writeGate();
      const store = testCategoryStore();
      const records = new Map<string, Category>();
      return {
        holdWrites: gate.hold,
        whenBlocked: gate.whenBlocked,
        store: {
          ...store,
          create: (newCategory) => gate.write(() => store.create(newCategory)),
          async createIdempotent(newCategory, request) {
            const found = records.get(request.key); // check …
            if (found !== undefined) return { outcome: 'replayed', category: found };
            const category = await gate.write(() => store.create(newCategory)); // … then create
            records.set(request.key, category);
            return { outcome: 'created', category };
          },
        },
      };
    };
    for (let run = 0; run < 5; run++) {
      const outcomes = await outcomesOf(
        (test) => runCategoryStoreConformance(test, { createStore: twoStepsHeld, capabilities: { capacity: false } }),
        IDEMPOTENT_BURST_CASE,
      );
      expect(outcomes.get(IDEMPOTENT_BURST_CASE), `run ${run}`).toMatch(/one created/);
    }
  });

  it('pass a category store whose idempotent claim is atomic, with its writes held', async () => {
    const claimFirst = (): CategoryStoreHarness => {
      const gate = writeGate();
      const store = testCategoryStore();
      const claims = new Map<string, Promise<{ fingerprint: string; category: Category }>>();
      return {
        holdWrites: gate.hold,
        whenBlocked: gate.whenBlocked,
        store: {
          ...store,
          create: (newCategory) => gate.write(() => store.create(newCategory)),
          async createIdempotent(newCategory, request) {
            const claimed = claims.get(request.key);
            if (claimed !== undefined) {
              // Waits for the first claim of the key: blocked, like the first, while writes are held.
              const first = await gate.waitFor(claimed);
              return first.fingerprint === request.fingerprint ? { outcome: 'replayed', category: first.category } : { outcome: 'mismatch' };
            }
            const claim = gate.write(() => store.create(newCategory)).then((category) => ({ fingerprint: request.fingerprint, category }));
            claims.set(request.key, claim); // claimed in the same synchronous step as the check
            return { outcome: 'created', category: (await claim).category };
          },
        },
      };
    };
    const outcomes = await outcomesOf(
      (test) => runCategoryStoreConformance(test, { createStore: claimFirst, capabilities: { capacity: false } }),
      IDEMPOTENT_BURST_CASE,
    );
    expect([...outcomes]).toEqual([[IDEMPOTENT_BURST_CASE, undefined]]);
  });

  it('say that holdWrites needs whenBlocked', async () => {
    const outcomes = await outcomesOf((test) =>
      runCategoryStoreConformance(test, {
        createStore: () => ({ store: testCategoryStore(), holdWrites: writeGate().hold }),
        capabilities: { capacity: false },
      }),
      IDEMPOTENT_BURST_CASE,
    );
    expect(outcomes.get(IDEMPOTENT_BURST_CASE)).toMatch(/holdWrites\(\) but no whenBlocked\(count\)/);
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

type Decide = (previous: RateLimitState | undefined, request: ConsumeRequest) => ConsumeDecision;

/** (a) An admitted request forgets the rejections its subject had counted toward a ban. */
const forgetsRejectionsWhenAdmitted: Decide = (previous, request) => {
  const decision = decideConsume(previous, request);
  const own = decision.state.bans[request.banSubject];
  if (!decision.result.allowed || own?.rejected === undefined) return decision;
  const bans = { ...decision.state.bans };
  if (own.bannedUntilMs > 0) bans[request.banSubject] = { rejected: undefined, bannedUntilMs: own.bannedUntilMs };
  else delete bans[request.banSubject];
  return { ...decision, state: { ...decision.state, bans } };
};

/** (b) A request refused for its rate charges the windows that had room for it. */
const chargesWindowsWithRoomWhenRefused: Decide = (previous, request) => {
  const decision = decideConsume(previous, request);
  if (decision.result.allowed || decision.result.reason !== 'rate_limited') return decision;
  const counters = { ...decision.state.counters };
  for (const window of request.windows) {
    const counter = counters[window.name];
    if (counter !== undefined && counter.count + request.cost <= window.limit) counters[window.name] = { ...counter, count: counter.count + request.cost };
  }
  return { ...decision, state: { ...decision.state, counters } };
};

/** (c) A ban that starts one rejection late. */
const banOneRejectionLate: Decide = (previous, request) =>
  decideConsume(previous, request.ban === undefined ? request : { ...request, ban: { ...request.ban, rejectedThreshold: request.ban.rejectedThreshold + 1 } });

/** (d) A window boundary off by one millisecond: a window still counts at the instant it ends. */
const windowEndsOneMillisecondLate: Decide = (previous, request) => {
  if (previous === undefined) return decideConsume(previous, request);
  const counters = { ...previous.counters };
  for (const [name, counter] of Object.entries(counters)) {
    if (counter.startMs + counter.windowMs === request.nowMs) counters[name] = { ...counter, startMs: request.nowMs };
  }
  return decideConsume({ ...previous, counters }, request);
};

/** (e) Ours: a request is admitted while every window has any room left, whatever its cost (a `remaining > 0` test). */
const admitsWhileAnyRoomIsLeft: Decide = (previous, request) => {
  if (!decideConsume(previous, { ...request, cost: 1 }).result.allowed) return decideConsume(previous, request);
  // Room for one unit: charged the full cost, past the limit if need be.
  const unlimited = request.windows.map((window) => ({ ...window, limit: Number.MAX_SAFE_INTEGER }));
  const decision = decideConsume(previous, { ...request, windows: unlimited });
  const counters = { ...decision.state.counters };
  const windows: WindowUsage[] = request.windows.map((window, index) => {
    counters[window.name] = { ...(counters[window.name] as RateLimitState['counters'][string]), limit: window.limit };
    const used = (decision.result.windows[index] as WindowUsage).used;
    return { ...(decision.result.windows[index] as WindowUsage), limit: window.limit, remaining: Math.max(0, window.limit - used) };
  });
  return { ...decision, state: { ...decision.state, counters }, result: { allowed: true, nowMs: request.nowMs, windows } };
};

/** A store over a broken decision. */
function brokenHarness(decide: Decide): RateLimitModelHarness {
  const store = testRateLimitStore({ decide });
  return { store, readState: (key) => store.readState(key) };
}

/** (f) Ours: a store whose reset clears the windows of a record and keeps its bans. */
function resetKeepsBansHarness(): RateLimitModelHarness {
  const entries = new Map<string, { state: RateLimitState; expiresAtMs: number }>();
  const live = (key: string, nowMs: number) => {
    const entry = entries.get(key);
    return entry !== undefined && entry.expiresAtMs > nowMs ? entry.state : undefined;
  };
  return {
    readState: async (key) => entries.get(key)?.state,
    store: {
      async consume(key, request) {
        const decision = decideConsume(live(key, request.nowMs), request);
        entries.set(key, { state: decision.state, expiresAtMs: decision.expiresAtMs });
        return decision.result;
      },
      peek: async (key, nowMs) => peekState(live(key, nowMs), nowMs),
      async reset(key) {
        const entry = entries.get(key);
        if (entry === undefined || Object.keys(entry.state.bans).length === 0) entries.delete(key);
        else entry.state = { counters: {}, bans: entry.state.bans };
      },
    },
  };
}

describe('the model comparison catches mutations of the decision', () => {
  const mutations: Array<[string, () => RateLimitModelHarness]> = [
    ['(a) an admitted request resets the rejection count', () => brokenHarness(forgetsRejectionsWhenAdmitted)],
    ['(b) a rejected request charges the windows that had room', () => brokenHarness(chargesWindowsWithRoomWhenRefused)],
    ['(c) a ban starts one rejection late', () => brokenHarness(banOneRejectionLate)],
    ['(d) a window boundary off by one millisecond', () => brokenHarness(windowEndsOneMillisecondLate)],
    ['(e) a cost admitted while any unit is left', () => brokenHarness(admitsWhileAnyRoomIsLeft)],
    ['(f) a reset that keeps the bans', resetKeepsBansHarness],
  ];
  for (const [mutation, harness] of mutations) {
    it(`fails ${mutation}, on every seed, naming the seed and step`, async () => {
      const outcomes = await outcomesOf((test) => runRateLimitModelComparison({ ...test, harness, seeds: [1, 2, 3] }));
      expect(outcomes.size).toBe(3);
      for (const [name, failure] of outcomes) {
        expect(failure, name).toMatch(/^seed \d+, (after )?step \d+/);
      }
    });
  }

  it('passes the model itself, and a store that copies its states', async () => {
    const outcomes = await outcomesOf((test) => runRateLimitModelComparison({ ...test, harness: () => brokenHarness(decideConsume), seeds: [1, 2, 3] }));
    expect([...outcomes.values()]).toEqual([undefined, undefined, undefined]);
  });
});

/**
 * The model comparison: a {@link RateLimitStore} run against the model (`decideConsume` over a `Map` of states)
 * on seeded random sequences, comparing every answer and, after every step, the record the store kept. Where the
 * conformance suite checks behaviour case by case, this finds the step where a store (a Lua script, a SQL
 * function, a cache in front of them) stops deciding exactly as the model does.
 *
 * ```ts
 * import { describe, it } from 'vitest';
 * import { runRateLimitModelComparison } from '@petstore/core/testing';
 * runRateLimitModelComparison({ describe, it, harness: () => ({ store, readState: async (key) => myDecode(key) }) });
 * ```
 */
import assert from 'node:assert/strict';
import { decideConsume, peekState, windowStartMs, type BanState, type RateLimitState, type WindowCounter } from '../rate-limit/decide.js';
import { counterEndMs } from '../rate-limit/window-algorithms.js';
import { DAY_MS, MINUTE_MS } from '../rate-limit/plans.js';
import type { BanPolicy, ConsumeRequest, ConsumeResult, RateLimitAlgorithm, RateLimitStore, RateLimitWindow } from '../rate-limit/types.js';
import { seededRandom } from './seeded-random.js';
import type { ConformanceTestApi } from './test-api.js';

/** A fresh store for one seed's run, and a way to read what it keeps. */
export interface RateLimitModelHarness {
  /** The store under test. It must decide at `request.nowMs` (configure stores with their own clock so). */
  store: RateLimitStore;
  /**
   * The record the store keeps for `key` (the engine's key, before any prefix of the store's own), decoded into a
   * `RateLimitState`; `undefined` when it holds none. A record kept past the end of everything in it (a TTL that
   * runs on another clock than the requests' time) may be returned: it is accepted when nothing in it is live.
   */
  readState(key: string): Promise<RateLimitState | undefined>;
  /** Releases the store's resources after the run. */
  close?(): Promise<void>;
}

/** Options of {@link runRateLimitModelComparison}: your runner's `describe` and `it`, and the harness. */
export interface RateLimitModelComparisonOptions extends ConformanceTestApi {
  /** Name shown in the test report. Default `RateLimitStore against the model`. */
  name?: string;
  /** Creates a fresh, empty store for one seed's run. */
  harness(): RateLimitModelHarness | Promise<RateLimitModelHarness>;
  /** The seeds, one test case each: a seed reproduces its run exactly. Default 1 to 6. */
  seeds?: readonly number[];
  /** Steps per seed, at least 100 (a step is one consume, a burst, a peek or a reset). Default 400. */
  steps?: number;
  /** Per-seed timeout in ms, for networked stores. Default 60,000. */
  timeoutMs?: number;
}

/** One record of a run: its key, the subjects that consume it, its plans and its ban policy. */
interface RecordSpec {
  key: string;
  subjects: readonly string[];
  plans: readonly (readonly RateLimitWindow[])[];
  ban: BanPolicy | undefined;
}

const minuteAndDay = (perMinute: number, perDay: number, algorithm: RateLimitAlgorithm = 'fixed'): readonly RateLimitWindow[] =>
  Object.freeze(
    [
      { name: 'minute', limit: perMinute, windowMs: MINUTE_MS },
      { name: 'day', limit: perDay, windowMs: DAY_MS },
    ].map((window) => Object.freeze(algorithm === 'fixed' ? window : { ...window, algorithm })),
  );

/**
 * The records every run uses: an account whose three keys share it (plan changes among its plans, which use
 * different algorithms when the store implements several), an account of one key, an anonymous address, and an
 * account without a ban policy. Limits are small, so the windows and bans are reached and end many times within a
 * run. Each record's algorithm is the one named here when the store implements it, else the first it implements.
 */
function recordsFor(algorithms: readonly RateLimitAlgorithm[]): readonly RecordSpec[] {
  const use = (algorithm: RateLimitAlgorithm): RateLimitAlgorithm => (algorithms.includes(algorithm) ? algorithm : (algorithms[0] as RateLimitAlgorithm));
  return Object.freeze([
    {
      key: 'account:acme',
      subjects: ['k1', 'k2', 'k3'],
      plans: [minuteAndDay(8, 40), minuteAndDay(8, 40, use('sliding')), minuteAndDay(14, 30, use('gcra'))],
      ban: { rejectedThreshold: 3, intervalMs: MINUTE_MS, durationMs: 4 * MINUTE_MS + 500 },
    },
    // A ban interval longer than the minute: rejections of one minute still count after admissions in the next.
    {
      key: 'account:solo',
      subjects: ['k4'],
      // 7 per minute: a gcra unit drains in 8,571.4 ms, so retries and ends fall between whole milliseconds.
      plans: [minuteAndDay(7, 20, use('gcra'))],
      ban: { rejectedThreshold: 4, intervalMs: 5 * MINUTE_MS, durationMs: 90_000 },
    },
    {
      key: 'anon:198.51.100.7',
      subjects: [''],
      plans: [minuteAndDay(4, 15, use('sliding'))],
      ban: { rejectedThreshold: 2, intervalMs: 30_000, durationMs: MINUTE_MS },
    },
    { key: 'account:lenient', subjects: ['k5', 'k6'], plans: [minuteAndDay(6, 25)], ban: undefined },
  ]);
}

/** 2.5 minutes before a day boundary: the first day ends early in every run. */
const START_MS = Date.UTC(2026, 0, 1, 23, 57, 30);
const COSTS = [1, 1, 1, 1, 2, 3, 4, 5] as const;


/** A state reduced to what it means: no `rejected: undefined`, keys in one order; for comparing and printing. */
function canonical(state: RateLimitState): unknown {
  const counters: Record<string, WindowCounter> = {};
  for (const name of Object.keys(state.counters).sort()) {
    const { startMs, count, limit, windowMs, algorithm, previousCount } = state.counters[name] as WindowCounter;
    const counter: WindowCounter = { startMs, count, limit, windowMs };
    if (algorithm !== undefined) counter.algorithm = algorithm;
    if (previousCount !== undefined) counter.previousCount = previousCount;
    counters[`${name}`] = counter;
  }
  const bans: Record<string, { rejected?: { startMs: number; count: number }; bannedUntilMs: number }> = {};
  for (const subject of Object.keys(state.bans).sort()) {
    const { rejected, bannedUntilMs } = state.bans[subject] as BanState;
    bans[`ban ${JSON.stringify(subject)}`] =
      rejected === undefined ? { bannedUntilMs } : { rejected: { startMs: rejected.startMs, count: rejected.count }, bannedUntilMs };
  }
  return { counters, bans };
}

/** Whether anything in `state` still matters at `nowMs`: a current window, a live ban or a live rejection count. */
function isLive(state: RateLimitState, nowMs: number, ban: BanPolicy | undefined): boolean {
  for (const counter of Object.values(state.counters)) if (counterEndMs(counter) > nowMs) return true;
  for (const entry of Object.values(state.bans)) {
    if (entry.bannedUntilMs > nowMs) return true;
    if (ban !== undefined && entry.rejected !== undefined && entry.rejected.startMs + ban.intervalMs > nowMs) return true;
  }
  return false;
}

/** The model: the state of each record and until when it matters, as a store applying `decideConsume` keeps them. */
class Model {
  private readonly records = new Map<string, { state: RateLimitState; expiresAtMs: number }>();

  /** The live state of `key` at `nowMs`, or `undefined`. */
  stateAt(key: string, nowMs: number): RateLimitState | undefined {
    const record = this.records.get(key);
    return record !== undefined && record.expiresAtMs > nowMs ? record.state : undefined;
  }

  consume(key: string, request: ConsumeRequest): ConsumeResult {
    const decision = decideConsume(this.stateAt(key, request.nowMs), request);
    if (decision.expiresAtMs > request.nowMs) this.records.set(key, { state: decision.state, expiresAtMs: decision.expiresAtMs });
    else this.records.delete(key);
    return decision.result;
  }

  reset(key: string): void {
    this.records.delete(key);
  }

  /** The live bans' ends at `nowMs`, across records. */
  banEnds(nowMs: number): number[] {
    const ends: number[] = [];
    for (const key of this.records.keys()) {
      const state = this.stateAt(key, nowMs);
      if (state !== undefined) for (const entry of Object.values(state.bans)) if (entry.bannedUntilMs > nowMs) ends.push(entry.bannedUntilMs);
    }
    return ends;
  }
}

/**
 * What a run went through, so that a run that never reached a case cannot pass as a proof of it: answers by kind
 * (and admissions and refusals per algorithm), refusals of a cost above what is left while every window has some
 * left (`costRefusals`), ban subjects of one account banned at once (`sharedRecordBans`), bursts, peeks, resets,
 * day boundaries crossed, and plan changes to another algorithm over a live record (`algorithmChanges`).
 */
type Coverage = Map<string, number>;

/**
 * Registers one case per seed. Each runs `steps` random steps against a fresh store from `harness` and against
 * the model, over four records (an account shared by three keys, an account of one key, an anonymous address,
 * and an account without a ban policy), with times that cross minute, day and ban boundaries (often exactly at
 * them, and one millisecond before), costs 1–5, every algorithm the store lists in `algorithms` (`fixed` alone
 * when it lists none; records of different algorithms, and plan changes from one algorithm to another over a live
 * record), plan changes, bursts of 2–8 identical parallel consumes on one
 * record (compared as a multiset of answers, then by the final state), peeks and resets. After each step the
 * record the store kept (`readState`) must equal the model's; at the end every record is compared. A failure names
 * the seed, the step and what the step did; the same seed replays the same run. Assertions use
 * `node:assert/strict`.
 *
 * @throws TypeError at registration when `steps` is below 100 or a seed is not a whole number.
 */
export function runRateLimitModelComparison(options: RateLimitModelComparisonOptions): void {
  const seeds = options.seeds ?? [1, 2, 3, 4, 5, 6];
  const steps = options.steps ?? 400;
  if (!Number.isSafeInteger(steps) || steps < 100) throw new TypeError(`runRateLimitModelComparison: steps must be a whole number >= 100, got ${String(steps)}`);
  for (const seed of seeds) {
    if (!Number.isSafeInteger(seed)) throw new TypeError(`runRateLimitModelComparison: seeds must be whole numbers, got ${String(seed)}`);
  }
  const { describe, it } = options;
  describe(options.name ?? 'RateLimitStore against the model', () => {
    for (const seed of seeds) {
      it(
        `decides and keeps its records as the model does, seed ${seed} (${steps} steps)`,
        async () => {
          const harness = await options.harness();
          try {
            await compareRun(harness, seed, steps);
          } finally {
            await harness.close?.();
          }
        },
        options.timeoutMs ?? 60_000,
      );
    }
  });
}

async function compareRun(harness: RateLimitModelHarness, seed: number, steps: number): Promise<void> {
  const { store } = harness;
  const { random, pick, between } = seededRandom(seed);
  const model = new Model();
  const algorithms = store.algorithms ?? ['fixed'];
  const RECORDS = recordsFor(algorithms);
  // The shared account twice as often as each other record.
  const RECORD_DRAW: readonly RecordSpec[] = [RECORDS[0] as RecordSpec, ...RECORDS];
  const required = ['allowed', 'rate_limited', 'banned', 'costRefusals', 'sharedRecordBans', 'bursts', 'peeks', 'resets', 'dayBoundaries'];
  for (const algorithm of algorithms) required.push(`allowed (${algorithm})`, `rate_limited (${algorithm})`);
  if (algorithms.length > 1) required.push('algorithmChanges');
  const coverage: Coverage = new Map(required.map((what) => [what, 0]));
  const bump = (what: string) => coverage.set(what, (coverage.get(what) ?? 0) + 1);
  const planOf = new Map(RECORDS.map((record) => [record.key, record.plans[0] as readonly RateLimitWindow[]]));
  const algorithmOf = (windows: readonly RateLimitWindow[]): RateLimitAlgorithm => windows[0]?.algorithm ?? 'fixed';
  let nowMs = START_MS;

  /** Compares the record the store kept for `spec` with the model's at `nowMs`. */
  const compareState = async (spec: RecordSpec) => {
    const expected = model.stateAt(spec.key, nowMs);
    const actual = await harness.readState(spec.key);
    if (expected === undefined) {
      if (actual !== undefined && isLive(actual, nowMs, spec.ban)) {
        assert.fail(`the store keeps a live record of ${spec.key} where the model has none: ${JSON.stringify(canonical(actual))}`);
      }
      return;
    }
    assert.ok(actual !== undefined, `the store keeps no record of ${spec.key} where the model has ${JSON.stringify(canonical(expected))}`);
    assert.deepStrictEqual(canonical(actual), canonical(expected), `the record the store kept of ${spec.key} differs from the model's`);
  };

  const count = (result: ConsumeResult, windows: readonly RateLimitWindow[]) => {
    bump(result.allowed ? 'allowed' : result.reason);
    if (result.allowed || result.reason === 'rate_limited') bump(`${result.allowed ? 'allowed' : 'rate_limited'} (${algorithmOf(windows)})`);
    if (!result.allowed && result.reason === 'rate_limited' && result.windows.every((window) => window.remaining > 0)) bump('costRefusals');
  };

  for (let step = 1; step <= steps; step++) {
    const previousMs = nowMs;
    nowMs = nextTime(nowMs, random, pick, model.banEnds(nowMs));
    if (windowStartMs(nowMs, DAY_MS) !== windowStartMs(previousMs, DAY_MS)) bump('dayBoundaries');
    const spec = pick(RECORD_DRAW);
    if (random() < 0.04) {
      const plan = pick(spec.plans);
      // A counter one algorithm wrote, read by another.
      if (algorithmOf(plan) !== algorithmOf(planOf.get(spec.key) ?? plan) && model.stateAt(spec.key, nowMs) !== undefined) bump('algorithmChanges');
      planOf.set(spec.key, plan);
    }
    const roll = random();
    let what = '';
    try {
      if (roll < 0.6) {
        const request: ConsumeRequest = {
          windows: planOf.get(spec.key) as readonly RateLimitWindow[],
          cost: pick(COSTS),
          nowMs,
          ban: spec.ban,
          banSubject: pick(spec.subjects),
        };
        what = `consume ${describeRequest(spec.key, request)}`;
        const expected = model.consume(spec.key, request);
        const actual = await store.consume(spec.key, request);
        assert.deepStrictEqual(actual, expected, "the answer differs from the model's");
        count(expected, request.windows);
      } else if (roll < 0.78) {
        const size = between(2, 8);
        const request: ConsumeRequest = {
          windows: planOf.get(spec.key) as readonly RateLimitWindow[],
          cost: pick(COSTS),
          nowMs,
          ban: spec.ban,
          banSubject: pick(spec.subjects),
        };
        what = `burst of ${size} × consume ${describeRequest(spec.key, request)}`;
        const expected = Array.from({ length: size }, () => model.consume(spec.key, request));
        const actual = await Promise.all(Array.from({ length: size }, () => store.consume(spec.key, request)));
        const sorted = (results: ConsumeResult[]) => results.map((result) => JSON.stringify(result)).sort();
        assert.deepStrictEqual(sorted(actual), sorted(expected), "the answers differ from the model's (as a multiset)");
        for (const result of expected) count(result, request.windows);
        bump('bursts');
      } else if (roll < 0.96) {
        what = `peek ${spec.key} at ${new Date(nowMs).toISOString()}`;
        const actual = await store.peek(spec.key, nowMs);
        assert.deepStrictEqual(actual, peekState(model.stateAt(spec.key, nowMs), nowMs), "the snapshot differs from the model's");
        bump('peeks');
      } else {
        what = `reset ${spec.key} at ${new Date(nowMs).toISOString()}`;
        model.reset(spec.key);
        await store.reset(spec.key);
        assert.equal(await harness.readState(spec.key), undefined, 'the store still keeps a record after its reset');
        bump('resets');
      }
      await compareState(spec);
      const state = model.stateAt(spec.key, nowMs);
      if (state !== undefined && Object.values(state.bans).filter((entry) => entry.bannedUntilMs > nowMs).length >= 2) bump('sharedRecordBans');
    } catch (error) {
      throw withContext(error, `seed ${seed}, step ${step} (${what})`);
    }
  }
  for (const spec of RECORDS) {
    try {
      await compareState(spec);
    } catch (error) {
      throw withContext(error, `seed ${seed}, after step ${steps}`);
    }
  }
  // A run that never reached a case proves nothing about it.
  for (const [what, reached] of coverage) {
    assert.ok(reached > 0, `seed ${seed}: the run of ${steps} steps never reached "${what}"; use more steps or another seed`);
  }
}

/** The next instant of a run: often the same, often exactly at (or 1 ms before) a minute, day or ban boundary. */
function nextTime(nowMs: number, random: () => number, pick: <T>(items: readonly T[]) => T, banEnds: number[]): number {
  const nextMinute = windowStartMs(nowMs, MINUTE_MS) + MINUTE_MS;
  const nextDay = windowStartMs(nowMs, DAY_MS) + DAY_MS;
  const roll = random();
  if (roll < 0.35) return nowMs;
  if (roll < 0.65) return nowMs + pick([1, 250, 999, 2_000, 7_000]);
  if (roll < 0.75) return pick([nextMinute - 1, nextMinute, nextMinute + 1]);
  if (roll < 0.83) {
    if (banEnds.length === 0) return nowMs + 1_000;
    const end = pick(banEnds);
    return Math.max(nowMs, pick([end - 1, end, end]));
  }
  if (roll < 0.85) return pick([nextDay - 1, nextDay, nowMs + 10 * MINUTE_MS]);
  if (roll < 0.855) return nowMs + DAY_MS / 3;
  return nowMs + pick([3_000, 11_000, 45_000]);
}

function describeRequest(key: string, request: ConsumeRequest): string {
  const windows = request.windows.map((window) => `${window.name} ${window.limit}`).join(' + ');
  return `${key} as ${JSON.stringify(request.banSubject)}, cost ${request.cost}, ${windows}, at ${new Date(request.nowMs).toISOString()}`;
}

/** The error with `context` in front of its message (an AssertionError keeps its diff). */
function withContext(error: unknown, context: string): Error {
  if (error instanceof Error) {
    error.message = `${context}: ${error.message}`;
    return error;
  }
  return new Error(`${context}: ${String(error)}`);
}

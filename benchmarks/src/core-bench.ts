/**
 * Core rate-limit micro-benchmark: decisions per second for a minute window plus a day window, our memory store
 * (with fixed windows, and with sliding and gcra ones) against rate-limiter-flexible's `RateLimiterMemory`, over
 * 1,000 and 1,000,000 distinct keys.
 *
 * - Every decision charges the next key of a pre-built key array (cycling), with limits so high that nothing is
 *   rejected (a rejection fails the run).
 * - Each store is filled with every key before it is measured: steady state, not insertion.
 * - A tinybench sample is a batch of {@link BATCH} awaited decisions. One decision takes a few hundred
 *   nanoseconds, the order of tinybench's own per-sample cost, which would otherwise flatten the differences.
 * - The machine is noisy: contenders are measured in interleaved rounds, samples pooled, so a slow spell hits
 *   every contender rather than one. Each round fills a fresh store and frees it afterwards, so only one
 *   contender's keys are in the heap at a time (a major GC marks the whole heap: a neighbour's million keys
 *   would slow the contender that allocates most).
 *
 * The peer runs in three configurations: two limiters with key prefixes (`minute`, `day`: the shape of its
 * documentation's examples; its default prefix is `rlflx`), two limiters without prefix (`keyPrefix: ''`: the
 * fastest, as it then builds no prefixed key string per call), and `RateLimiterUnion`, its documented way to
 * combine limits (needs distinct prefixes). `ratios` compare against the fastest of them.
 *
 * Try it: `node --expose-gc --import tsx src/core-bench.ts [--quick]` from benchmarks/.
 */
import { DAY_MS, DEFAULT_BAN_POLICY, MINUTE_MS, type RateLimitAlgorithm, type RateLimitWindow } from '@petstore/core';
import { memoryRateLimitStore } from '@petstore/storage-memory';
import { RateLimiterMemory, RateLimiterUnion } from 'rate-limiter-flexible';
import { Bench } from 'tinybench';
import { pathToFileURL } from 'node:url';
import { distinctKeys } from './keys.js';

/** One contender at one key count. */
export interface CoreBenchRow {
  name: string;
  keys: number;
  /** Median decisions per second over the pooled samples. */
  opsPerSecond: number;
  /** Relative margin of error of the mean decisions per second, in percent (95 %), over the pooled samples. */
  rme: number;
  /** Samples (batches of {@link BATCH} decisions) measured. */
  samples: number;
}

/**
 * Rows per contender and key count. `ratios`: per key count, our median over the fastest peer configuration's
 * median; `peer` names that configuration.
 */
export interface CoreBenchResult {
  rows: CoreBenchRow[];
  ratios: { keys: number; oursOverPeer: number; peer: string }[];
  /** Per key count, the CPU per decision of the sliding and gcra windows over the fixed ones' (fixed ops/s over theirs). */
  algorithms: { keys: number; sliding: number; gcra: number }[];
}

/** Decisions per tinybench sample. */
export const BATCH = 1000;
/** Limits no run can reach: nothing is rejected. */
const UNREACHABLE_LIMIT = 1_000_000_000;

const WINDOWS: readonly RateLimitWindow[] = [
  { name: 'minute', limit: UNREACHABLE_LIMIT, windowMs: MINUTE_MS },
  { name: 'day', limit: UNREACHABLE_LIMIT, windowMs: DAY_MS },
];

/**
 * The sliding and gcra windows: limits within their exact range (`limit × windowMs <= 2^50`) that no run reaches
 * either (a key is charged a few thousand times per run).
 */
const windowsOf = (algorithm: Exclude<RateLimitAlgorithm, 'fixed'>): readonly RateLimitWindow[] => [
  { name: 'minute', limit: 10_000_000, windowMs: MINUTE_MS, algorithm },
  { name: 'day', limit: 10_000_000, windowMs: DAY_MS, algorithm },
];

/** A contender filled with every key, ready to measure. */
interface PreparedContender {
  /** Runs `count` decisions, each on the next key, each awaited. */
  run(count: number): Promise<void>;
  /** Frees what the contender holds (rate-limiter-flexible keeps a timer per key, which holds its map). */
  dispose(): Promise<void>;
}

interface Contender {
  name: string;
  peer: boolean;
  /** A fresh store, then one decision for every key. */
  prepare(keys: readonly string[]): Promise<PreparedContender>;
}

/** Cycles through `keys`: each call answers the next one. */
function cycle(keys: readonly string[]): () => string {
  let cursor = 0;
  return () => {
    const key = keys[cursor] as string;
    cursor = cursor + 1 === keys.length ? 0 : cursor + 1;
    return key;
  };
}

/** Our memory store, charging `windows`. */
function oursWith(name: string, windows: readonly RateLimitWindow[]): Contender {
  return {
    name,
    peer: false,
    async prepare(keys) {
      const store = memoryRateLimitStore({ maxKeys: keys.length + 1000 });
      const nextKey = cycle(keys);
      const run = async (count: number): Promise<void> => {
        for (let i = 0; i < count; i++) {
          // A new request per decision with the current time, as the engine builds it.
          const result = await store.consume(nextKey(), { windows, cost: 1, nowMs: Date.now(), ban: DEFAULT_BAN_POLICY, banSubject: '' });
          if (!result.allowed) throw new Error(`benchmark decision rejected: ${result.reason}`);
        }
      };
      await run(keys.length);
      if (store.size !== keys.length) throw new Error(`prefill left ${store.size} keys, expected ${keys.length}`);
      return { run, dispose: async () => {} };
    },
  };
}

const ours = oursWith('ours: memoryRateLimitStore.consume (minute + day, atomic)', WINDOWS);
const oursSliding = oursWith('ours, sliding: memoryRateLimitStore.consume (minute + day, atomic)', windowsOf('sliding'));
const oursGcra = oursWith('ours, gcra: memoryRateLimitStore.consume (minute + day, atomic)', windowsOf('gcra'));

/** rate-limiter-flexible: one `RateLimiterMemory` per window (points per duration in seconds). */
function peerLimiters(prefixes: readonly [string, string]): [RateLimiterMemory, RateLimiterMemory] {
  return [
    new RateLimiterMemory({ keyPrefix: prefixes[0], points: UNREACHABLE_LIMIT, duration: MINUTE_MS / 1000 }),
    new RateLimiterMemory({ keyPrefix: prefixes[1], points: UNREACHABLE_LIMIT, duration: DAY_MS / 1000 }),
  ];
}

/** Deletes every key, which also clears rate-limiter-flexible's timers (else they keep its maps for a day). */
async function deleteAll(limiters: readonly RateLimiterMemory[], keys: readonly string[]): Promise<void> {
  // `delete` works synchronously and answers a settled promise: no need to await each.
  const deletions: Promise<boolean>[] = [];
  for (const limiter of limiters) {
    for (const key of keys) deletions.push(limiter.delete(key));
  }
  await Promise.all(deletions);
}

/** Two limiters, consumed one after the other per decision; a rejection rejects and fails the run. */
function peerSequential(name: string, prefixes: readonly [string, string]): Contender {
  return {
    name,
    peer: true,
    async prepare(keys) {
      const [minute, day] = peerLimiters(prefixes);
      const nextKey = cycle(keys);
      const run = async (count: number): Promise<void> => {
        for (let i = 0; i < count; i++) {
          const key = nextKey();
          await minute.consume(key);
          await day.consume(key);
        }
      };
      await run(keys.length);
      return { run, dispose: () => deleteAll([minute, day], keys) };
    },
  };
}

const peerUnion: Contender = {
  name: 'peer: RateLimiterUnion(minute, day) of RateLimiterMemory',
  peer: true,
  async prepare(keys) {
    const limiters = peerLimiters(['minute', 'day']);
    const union = new RateLimiterUnion(...limiters);
    const nextKey = cycle(keys);
    const run = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++) await union.consume(nextKey());
    };
    await run(keys.length);
    return { run, dispose: () => deleteAll(limiters, keys) };
  },
};

const CONTENDERS: readonly Contender[] = [
  ours,
  oursSliding,
  oursGcra,
  peerSequential("peer: 2 × RateLimiterMemory, keyPrefix 'minute'/'day', consume minute then day", ['minute', 'day']),
  peerSequential("peer: 2 × RateLimiterMemory, keyPrefix '', consume minute then day", ['', '']),
  peerUnion,
];

interface Plan {
  /** Rounds per key count: fewer with many keys, where filling the stores dominates the time. */
  rounds(keyCount: number): number;
  /** tinybench warmup per contender and round, ms. */
  warmupTimeMs: number;
  /** tinybench time per contender and round, ms. */
  timeMs: number;
  quick: boolean;
}

/** One round of one contender: its throughput samples, in decisions per second (one per batch). */
async function sampleRound(prepared: PreparedContender, name: string, keyCount: number, plan: Plan): Promise<number[]> {
  // With many keys, the measured decisions of all rounds together cover every key at least once.
  const iterations = plan.quick ? 16 : Math.max(32, Math.ceil(keyCount / BATCH / plan.rounds(keyCount)));
  const bench = new Bench({
    name: `${name} @ ${keyCount} keys`,
    time: plan.timeMs,
    warmupTime: plan.warmupTimeMs,
    warmupIterations: plan.quick ? 4 : 16,
    iterations,
    retainSamples: true,
    throws: true,
  });
  bench.add(name, () => prepared.run(BATCH), { async: true });
  await bench.run();
  const result = bench.tasks[0]?.result;
  if (result?.state !== 'completed') throw new Error(`benchmark ${name} did not complete: ${result?.state}`);
  const samples = result.throughput.samples;
  if (samples === undefined) throw new Error(`benchmark ${name} kept no samples`);
  return samples.map((batchesPerSecond) => batchesPerSecond * BATCH);
}

/** Median, and relative margin of error (95 %, normal approximation) of the mean, of pooled samples. */
function summarise(name: string, keys: number, samples: readonly number[]): CoreBenchRow {
  const sorted = samples.slice().sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  const median =
    sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
  const mean = sorted.reduce((sum, value) => sum + value, 0) / sorted.length;
  const variance = sorted.reduce((sum, value) => sum + (value - mean) ** 2, 0) / Math.max(1, sorted.length - 1);
  const rme = (100 * 1.96 * Math.sqrt(variance / sorted.length)) / mean;
  return { name, keys, opsPerSecond: Math.round(median), rme: Number(rme.toFixed(2)), samples: sorted.length };
}

/** Every contender at one key count, in interleaved rounds, each round on a freshly filled store. */
async function measureKeyCount(keyCount: number, plan: Plan): Promise<CoreBenchRow[]> {
  const keys = distinctKeys(keyCount);
  const samples: number[][] = CONTENDERS.map(() => []);
  for (let round = 0; round < plan.rounds(keyCount); round++) {
    for (const [index, contender] of CONTENDERS.entries()) {
      globalThis.gc?.();
      const prepared = await contender.prepare(keys);
      globalThis.gc?.();
      (samples[index] as number[]).push(...(await sampleRound(prepared, contender.name, keyCount, plan)));
      await prepared.dispose();
    }
  }
  globalThis.gc?.();
  return CONTENDERS.map((contender, index) => summarise(contender.name, keyCount, samples[index] as number[]));
}

/**
 * Runs the micro-benchmark: interleaved rounds (3 with 1,000 keys, 2 with 1,000,000); in each, every contender
 * is filled with all keys, warmed up for 0.3 s and measured for at least 0.6 s (and with many keys for at least
 * one decision per key over all rounds). `quick`: a smoke run (one round of 0.2 s, 100,000 instead of 1,000,000
 * keys). Wants `--expose-gc` for a GC between contenders (runs without, less evenly).
 * @returns one row per contender and key count, and our median over the fastest peer configuration's.
 * @throws Error when any decision is rejected (the limits are meant to be unreachable).
 */
export async function runCoreBenchmark(options: { quick?: boolean } = {}): Promise<CoreBenchResult> {
  const quick = options.quick ?? false;
  const plan: Plan = quick
    ? { rounds: () => 1, warmupTimeMs: 50, timeMs: 200, quick }
    : { rounds: (keyCount) => (keyCount > 100_000 ? 2 : 3), warmupTimeMs: 300, timeMs: 600, quick };
  const keyCounts = quick ? [1000, 100_000] : [1000, 1_000_000];
  const rows: CoreBenchRow[] = [];
  const ratios: CoreBenchResult['ratios'] = [];
  const algorithms: CoreBenchResult['algorithms'] = [];
  for (const keyCount of keyCounts) {
    const measured = await measureKeyCount(keyCount, plan);
    rows.push(...measured);
    const oursRow = measured[CONTENDERS.indexOf(ours)] as CoreBenchRow;
    const overFixed = (contender: Contender) =>
      Number((oursRow.opsPerSecond / (measured[CONTENDERS.indexOf(contender)] as CoreBenchRow).opsPerSecond).toFixed(2));
    algorithms.push({ keys: keyCount, sliding: overFixed(oursSliding), gcra: overFixed(oursGcra) });
    const peerRows = measured.filter((_, index) => CONTENDERS[index]?.peer);
    const fastestPeer = peerRows.reduce((best, row) => (row.opsPerSecond > best.opsPerSecond ? row : best));
    ratios.push({
      keys: keyCount,
      oursOverPeer: Number((oursRow.opsPerSecond / fastestPeer.opsPerSecond).toFixed(2)),
      peer: fastestPeer.name,
    });
  }
  return { rows, ratios, algorithms };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const started = performance.now();
  const result = await runCoreBenchmark({ quick: process.argv.includes('--quick') });
  console.log(JSON.stringify(result, null, 1));
  console.error(`core benchmark: ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

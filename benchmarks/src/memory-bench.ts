/**
 * Memory per tracked key of the memory rate-limit store, its bound under a flood of distinct keys, and what
 * creating a petstore on the memory stores (their defaults) costs before its first request.
 *
 * Needs `--expose-gc`. Memory is `heapUsed + arrayBuffers` from `process.memoryUsage()` after a full GC:
 * lru-cache keeps its linked list in typed arrays, whose bytes live outside the JS heap, so `heapUsed` alone
 * would undercount. The keys are built during the fill as the engine builds them (`key:<22-char base64url>`),
 * so the key strings the store keeps are counted too.
 *
 * Try it: `node --expose-gc --import tsx src/memory-bench.ts [--quick]` from benchmarks/.
 */
import { createPetstore, DAY_MS, DEFAULT_BAN_POLICY, MINUTE_MS, staticApiKeys, type Petstore, type RateLimitWindow } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore, type MemoryRateLimitStore } from '@petstore/storage-memory';
import { pathToFileURL } from 'node:url';
import { keySource } from './keys.js';

/**
 * `heapBytesPerKey`: bytes per key with `keys` keys in a store whose `maxKeys` is `keys`.
 * `flood`: `inserted` distinct keys into a store of `maxKeys`; `sizeAfter` its size at the end (it never exceeds
 * `maxKeys`, checked after every insert), `heapBytesPerKeyAtMax` the bytes per key at the end, against `maxKeys`.
 */
export interface MemoryBenchResult {
  keys: number;
  heapBytesPerKey: number;
  flood: { maxKeys: number; inserted: number; sizeAfter: number; heapBytesPerKeyAtMax: number };
  /**
   * `createPetstore` with `memoryCategoryStore()` and `memoryRateLimitStore()` (their default bounds) and one static
   * key, `count` times: CPU µs per creation (user + system), and bytes (JS heap + ArrayBuffers, after a full GC)
   * each petstore holds before its first request.
   */
  creation: { count: number; cpuMicros: number; bytes: number };
}

/** The free plan's windows (docs/http-api.md, "Plans"): one request per key never comes near them. */
const WINDOWS: readonly RateLimitWindow[] = [
  { name: 'minute', limit: 60, windowMs: MINUTE_MS },
  { name: 'day', limit: 1000, windowMs: DAY_MS },
];

function requireGc(): () => void {
  const gc = globalThis.gc;
  if (gc === undefined) throw new Error('the memory benchmark needs `node --expose-gc`');
  return gc;
}

/** JS heap plus ArrayBuffer bytes, after full collections. */
function usedBytes(gc: () => void): number {
  gc();
  gc();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

/** Charges one request to each of `count` new distinct keys; when `maxKeys` is given, checks the bound after each. */
async function fill(store: MemoryRateLimitStore, count: number, maxKeys?: number): Promise<void> {
  const nextKey = keySource();
  for (let i = 0; i < count; i++) {
    const result = await store.consume(nextKey(), { windows: WINDOWS, cost: 1, nowMs: Date.now(), ban: DEFAULT_BAN_POLICY, banSubject: '' });
    if (!result.allowed) throw new Error(`fill decision rejected: ${result.reason}`);
    if (maxKeys !== undefined && store.size > maxKeys) {
      throw new Error(`store holds ${store.size} keys, more than maxKeys ${maxKeys}`);
    }
  }
}

/**
 * Runs the memory benchmark: 1,000,000 keys, then a flood of 3,000,000 distinct keys into `maxKeys` 1,000,000
 * (`quick`: 100,000 and 300,000 into 100,000). Bytes are rounded to whole bytes.
 * @throws Error without `--expose-gc`, or when the store ever holds more than `maxKeys`.
 */
export async function runMemoryBenchmark(options: { quick?: boolean } = {}): Promise<MemoryBenchResult> {
  const gc = requireGc();
  const keys = options.quick ? 100_000 : 1_000_000;
  const floodKeys = 3 * keys;

  let before = usedBytes(gc);
  let store: MemoryRateLimitStore | undefined = memoryRateLimitStore({ maxKeys: keys });
  await fill(store, keys);
  if (store.size !== keys) throw new Error(`store holds ${store.size} keys after the fill, expected ${keys}`);
  const filledBytes = usedBytes(gc);
  const heapBytesPerKey = (filledBytes - before) / store.size; // reads `store` after measuring: it stays reachable
  store = undefined;

  before = usedBytes(gc);
  store = memoryRateLimitStore({ maxKeys: keys });
  await fill(store, floodKeys, keys);
  const floodedBytes = usedBytes(gc);
  const sizeAfter = store.size;
  const heapBytesPerKeyAtMax = (floodedBytes - before) / keys;
  store = undefined;

  return {
    keys,
    heapBytesPerKey: Math.round(heapBytesPerKey),
    flood: { maxKeys: keys, inserted: floodKeys, sizeAfter, heapBytesPerKeyAtMax: Math.round(heapBytesPerKeyAtMax) },
    creation: measureCreation(gc, options.quick ? 20 : 100),
  };
}

/** CPU and retained bytes of `count` petstores on the memory stores, created one after another and all kept. */
function measureCreation(gc: () => void, count: number): MemoryBenchResult['creation'] {
  const create = () =>
    createPetstore({
      apiKeys: staticApiKeys([{ key: 'memory-bench-key-0123456789', plan: 'free' }]),
      categories: memoryCategoryStore(),
      rateLimit: { store: memoryRateLimitStore() },
    });
  create(); // the first creation loads and compiles what the others reuse
  const before = usedBytes(gc);
  const kept: Petstore[] = [];
  const cpu = process.cpuUsage();
  for (let i = 0; i < count; i++) kept.push(create());
  const { user, system } = process.cpuUsage(cpu);
  const bytes = (usedBytes(gc) - before) / kept.length; // reads `kept` after measuring: every petstore stays reachable
  return { count, cpuMicros: Math.round((user + system) / count), bytes: Math.round(bytes) };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const started = performance.now();
  const result = await runMemoryBenchmark({ quick: process.argv.includes('--quick') });
  console.log(JSON.stringify(result, null, 1));
  console.error(`memory benchmark: ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

/**
 * Scale-out: K app processes sharing one Redis, ours (`fastify-petstore-redis`: minute + day windows and the
 * ban, checked and charged atomically by the consume script) against the peer (`fastify-peer-redis`:
 * @fastify/rate-limit's Redis store, one window, no ban), and the peer with ioredis's `enableAutoPipelining`
 * (`fastify-peer-redis-pipelined`, an option its users can set). With one hot API key (every request on one
 * key) and with 1,000 keys (each connection cycles through them). Each process gets its own autocannon load
 * on its own port; the rounds visit every setup in turn. Reported per setup: total req/s over the K
 * processes, and Redis CPU per answered request — the redis-server process's user + system time
 * (`INFO cpu`) over the round ÷ the 200 answers.
 *
 * Also the Redis cost of a banned key's flood: a banned key's requests sent one after another through the engine
 * for a few seconds, Redis calls counted at the client, with the block cache on (the default: at most one call
 * per `blockCache.maxAgeMs`, 1 s, per banned key and process) and off.
 */
import { type ChildProcess } from 'node:child_process';
import { cpus } from 'node:os';
import autocannon from 'autocannon';
import { createRateLimiter, DEFAULT_BAN_POLICY } from '@petstore/core';
import { DEFAULT_BLOCK_CACHE_MAX_AGE_MS, redisRateLimitStore } from '@petstore/storage-redis';
import { startRedisServer } from '@petstore/storage-redis/testing';
import { Redis } from 'ioredis';
import { median, startServerProcess } from './http-bench.js';
import { benchKeys, type ServerName } from './servers.js';

export interface ScaleOutRow {
  instances: number;
  name: ServerName;
  /** API keys the requests are spread over. */
  keys: number;
  requestsPerSecond: number;
  redisCpuMicrosPerRequest: number;
  /** Every round's total req/s. */
  rounds: number[];
  non2xx: number;
}

export interface FloodRow {
  blockCache: boolean;
  requests: number;
  redisCalls: number;
  /** How long the flood ran, ms (this process's clock). */
  durationMs: number;
  /** The block cache's `maxAgeMs`: how long a banned key is answered from memory before Redis is asked again. */
  maxAgeMs: number;
}

export interface ScaleOutResult {
  rows: ScaleOutRow[];
  flood: FloodRow[];
  instanceCounts: number[];
  settings: { rounds: number; durationSeconds: number; warmupSeconds: number; connections: number };
}

/** The setups, in the order of the report: one hot key, then 1,000 keys. */
export const SCALE_OUT_SETUPS: readonly { name: ServerName; keys: number }[] = [
  { name: 'fastify-petstore-redis', keys: 1 },
  { name: 'fastify-peer-redis', keys: 1 },
  { name: 'fastify-peer-redis-pipelined', keys: 1 },
  { name: 'fastify-petstore-redis', keys: 1000 },
  { name: 'fastify-peer-redis', keys: 1000 },
];

/** Redis's own CPU time so far, µs (user + system of the server process, from `INFO cpu`). */
export async function redisCpuMicros(client: Redis): Promise<number> {
  const info = await client.info('cpu');
  const field = (name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)?.[1] ?? Number.NaN);
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
}

function load(ports: number[], keys: number, seconds: number, connections: number): Promise<autocannon.Result[]> {
  // Each connection sends the requests in turn, one key after another.
  const requests = benchKeys(keys).map((key) => ({ method: 'GET' as const, path: '/v1/categories', headers: { authorization: `Bearer ${key}` } }));
  return Promise.all(
    ports.map((port) => autocannon({ url: `http://127.0.0.1:${port}`, requests, connections, duration: seconds })),
  );
}

/** The Redis calls a banned key's requests cost when it sends them one after another for `durationMs`. */
async function floodCost(url: string, blockCache: boolean, durationMs: number): Promise<FloodRow> {
  const client = new Redis(url);
  let calls = 0;
  const sendCommand = client.sendCommand.bind(client);
  client.sendCommand = ((...args: Parameters<typeof sendCommand>) => {
    calls += 1;
    return sendCommand(...args);
  }) as typeof client.sendCommand;
  try {
    await client.ping();
    const store = redisRateLimitStore({ client, keyPrefix: `bench:flood:${blockCache}:`, blockCache: blockCache ? undefined : false });
    const limiter = createRateLimiter({ store, clock: { now: () => Date.now() }, plans: { free: { requestsPerMinute: 1, requestsPerDay: 100 } } });
    const principal = { keyId: 'flood', accountId: 'a', plan: 'free' as const };
    // Use up the minute, then get banned (the default ban: rejectedThreshold rejections within a minute).
    for (let i = 0; i < 1 + DEFAULT_BAN_POLICY.rejectedThreshold; i++) await limiter.consume({ principal });
    const before = calls;
    const started = performance.now();
    let requests = 0;
    while (performance.now() - started < durationMs) {
      // A few requests between two looks at the clock: the clock is not what is measured.
      for (let i = 0; i < 100; i++) await limiter.consume({ principal });
      requests += 100;
    }
    return { blockCache, requests, redisCalls: calls - before, durationMs: Math.round(performance.now() - started), maxAgeMs: DEFAULT_BLOCK_CACHE_MAX_AGE_MS };
  } finally {
    client.disconnect();
  }
}

export async function runScaleOutBenchmark(options: { quick: boolean }, log: (line: string) => void): Promise<ScaleOutResult> {
  const settings = options.quick
    ? { rounds: 1, durationSeconds: 2, warmupSeconds: 1, connections: 25 }
    : { rounds: 3, durationSeconds: 5, warmupSeconds: 2, connections: 25 };
  // One core for Redis and about one per app process and its load; at least 2 processes.
  const instanceCounts = [...new Set([1, Math.max(2, Math.floor((cpus().length - 1) / 2))])];
  const redis = await startRedisServer();
  const stats = new Redis(redis.url);
  const rows: ScaleOutRow[] = [];
  try {
    const samples = new Map<string, { rps: number[]; cpu: number[]; non2xx: number }>();
    const sampleKey = (instances: number, setup: { name: ServerName; keys: number }) => `${instances}:${setup.name}:${setup.keys}`;
    for (let round = 1; round <= settings.rounds; round++) {
      for (const instances of instanceCounts) {
        for (const setup of SCALE_OUT_SETUPS) {
          const children: ChildProcess[] = [];
          try {
            const ports: number[] = [];
            for (let i = 0; i < instances; i++) {
              const { port, child } = await startServerProcess(setup.name, { redisUrl: redis.url }, undefined, setup.keys);
              children.push(child);
              ports.push(port);
            }
            await load(ports, setup.keys, settings.warmupSeconds, settings.connections);
            const before = await redisCpuMicros(stats);
            const results = await load(ports, setup.keys, settings.durationSeconds, settings.connections);
            const after = await redisCpuMicros(stats);
            const answers = results.reduce((sum, result) => sum + result['2xx'], 0);
            const rps = results.reduce((sum, result) => sum + result.requests.average, 0);
            const sample = samples.get(sampleKey(instances, setup)) ?? { rps: [], cpu: [], non2xx: 0 };
            sample.rps.push(rps);
            sample.cpu.push((after - before) / answers);
            sample.non2xx += results.reduce((sum, result) => sum + result.non2xx + result.errors + result.timeouts, 0);
            samples.set(sampleKey(instances, setup), sample);
            log(`scale-out round ${round}/${settings.rounds}, ${instances} × ${setup.name}, ${setup.keys} key(s): ${Math.round(rps)} req/s, Redis ${((after - before) / answers).toFixed(1)} µs/req`);
          } finally {
            for (const child of children) child.kill('SIGTERM');
          }
        }
      }
    }
    for (const setup of SCALE_OUT_SETUPS) {
      for (const instances of instanceCounts) {
        const sample = samples.get(sampleKey(instances, setup)) as { rps: number[]; cpu: number[]; non2xx: number };
        rows.push({
          instances,
          name: setup.name,
          keys: setup.keys,
          requestsPerSecond: median(sample.rps),
          redisCpuMicrosPerRequest: median(sample.cpu),
          rounds: sample.rps.map(Math.round),
          non2xx: sample.non2xx,
        });
      }
    }
    log('banned-key flood');
    const floodMs = options.quick ? 2000 : 5000;
    const flood = [await floodCost(redis.url, true, floodMs), await floodCost(redis.url, false, floodMs)];
    return { rows, flood, instanceCounts, settings };
  } finally {
    stats.disconnect();
    await redis.stop();
  }
}

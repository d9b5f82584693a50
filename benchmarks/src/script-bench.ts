/**
 * Where a rate-limit decision's Redis time goes: the redis-server process's CPU time (`INFO cpu`) per call of
 * our consume script (one consume alone, with fixed, sliding or gcra windows; eight of one key in one call,
 * eight of eight keys in one call), @fastify/rate-limit's script, and the pieces our script is made of, each
 * measured alone on top of an empty script with the same arguments. 20 connections send calls one at a time
 * each (P = 1, as an app server's client sends them) or 16 pipelined at a time (P = 16, where the fixed cost of
 * a command is shared and what the script itself costs shows). Rounds visit every variant in turn; the lowest round is reported (the
 * machine is shared: other load only ever adds time).
 */
import { startRedisServer } from '@petstore/storage-redis/testing';
import { Redis } from 'ioredis';
import { CONSUME_LUA } from '../../packages/storage-redis/src/rate-limit-script.js';

export interface ScriptRow {
  name: string;
  /** Consumes (or calls, for pieces and the peer) a call stands for: Redis CPU is reported per consume. */
  consumesPerCall: number;
  /** Redis CPU µs per consume, by pipelining depth. */
  microsPerConsume: Record<number, number>;
}

export interface ScriptBenchResult {
  rows: ScriptRow[];
  depths: number[];
  calls: number;
  rounds: number;
}

/** @fastify/rate-limit 11's script (store/RedisStore.js), as its Redis store defines it. */
const PEER_LUA = `local key = KEYS[1]
local timeWindow = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local continueExceeding = ARGV[3] == 'true'
local exponentialBackoff = ARGV[4] == 'true'
local MAX_SAFE_INTEGER = (2^53) - 1
local current = redis.call('INCR', key)
if current == 1 or (continueExceeding and current > max) then
  redis.call('PEXPIRE', key, timeWindow)
elseif exponentialBackoff and current > max then
  local backoffExponent = current - max - 1
  timeWindow = math.min(timeWindow * (2 ^ backoffExponent), MAX_SAFE_INTEGER)
  redis.call('PEXPIRE', key, timeWindow)
else
  timeWindow = redis.call('PTTL', key)
end
return {current, timeWindow}`;

/** The consume script's policy arguments for minute + day windows of `limit` units and `ban` (see rate-limit-script.ts). */
function policyArgs(limit: number, ban: [threshold: number, intervalMs: number, durationMs: number]): string[] {
  return [`[["minute",${limit},60000],["day",${limit},86400000]]`, '<BI4dddd', JSON.stringify([2, ...ban, limit, limit, 60_000, 86_400_000])];
}

/** The consume script's arguments for `keys` (minute + day windows, the default ban), cost 1 for key k1, server time. */
function consumeArgs(keys: string[]): (string | number)[] {
  return [keys.length, ...keys, 'server', '1', ...policyArgs(1e9, [20, 60_000, 900_000]), ...keys.flatMap(() => ['1', '1', 'k1'])];
}

/**
 * One consume of key k1 under minute + day windows of `algorithm` (10^7 units each: limit × windowMs stays within
 * 2^50), the default ban, server time.
 */
function algorithmArgs(algorithm: 'sliding' | 'gcra'): (string | number)[] {
  const [limit, code] = [10_000_000, algorithm === 'sliding' ? 1 : 2];
  const signature = `[["minute",${limit},60000,"${algorithm}"],["day",${limit},86400000,"${algorithm}"]]`;
  const numbers = JSON.stringify([2, 20, 60_000, 900_000, limit, limit, 60_000, 86_400_000, code, code]);
  return [1, 'petstore:rl:account:a1', 'server', '1', '1', signature, '<BI4dddd', numbers, '1', '1', 'k1'];
}

/** Bans key k2 of the account for a long time: its record then holds a ban besides the windows. */
const BAN_ANOTHER_KEY = [1, 'petstore:rl:account:a1', 'server', '1', ...policyArgs(0, [1, 60_000, 1e12]), '1', '1', 'k2'];

const ONE = consumeArgs(['petstore:rl:account:a1']);
/** An empty script with the arguments of one consume: what any call costs before the script does anything. */
const piece = (name: string, lua: string): Variant => ({ name, lua, args: ONE, consumesPerCall: 1 });

interface Variant {
  name: string;
  lua: string;
  args: (string | number)[];
  consumesPerCall: number;
  /** Arguments of one call made before the variant is measured (after the database is emptied). */
  setup?: (string | number)[];
}

const VARIANTS: Variant[] = [
  { name: "@fastify/rate-limit's script (INCR, PTTL; one window)", lua: PEER_LUA, args: [1, 'rl:Bearer k1', 60_000, 1e9, 'false', 'false'], consumesPerCall: 1 },
  { name: 'ours, one consume per call', lua: CONSUME_LUA, args: ONE, consumesPerCall: 1 },
  { name: 'ours, one consume per call, sliding windows', lua: CONSUME_LUA, args: algorithmArgs('sliding'), consumesPerCall: 1 },
  { name: 'ours, one consume per call, gcra windows', lua: CONSUME_LUA, args: algorithmArgs('gcra'), consumesPerCall: 1 },
  { name: "ours, one consume per call, the record holding another key's ban", lua: CONSUME_LUA, args: ONE, consumesPerCall: 1, setup: BAN_ANOTHER_KEY },
  { name: 'ours, 8 consumes of one key per call', lua: CONSUME_LUA, args: consumeArgs(Array(8).fill('petstore:rl:account:a1')), consumesPerCall: 8 },
  {
    name: 'ours, 8 consumes of 8 keys per call',
    lua: CONSUME_LUA,
    args: consumeArgs(Array.from({ length: 8 }, (_, i) => `petstore:rl:account:a${i}`)),
    consumesPerCall: 8,
  },
  piece('piece: an empty script (the fixed cost of a call)', 'return 1'),
  piece('piece: empty + TIME', "redis.call('TIME') return 1"),
  piece('piece: empty + GET', "redis.call('GET', KEYS[1]) return 1"),
  piece('piece: empty + SET … PX', "redis.call('SET', KEYS[1], ARGV[5], 'PX', 60000) return 1"),
  piece('piece: empty + cjson.decode of the policy', 'cjson.decode(ARGV[5]) return 1'),
  piece('piece: empty + a five-integer reply', 'return {0, 1795996860123, 0, 12345, 67890}'),
];

export async function runScriptBenchmark(options: { quick: boolean }, log: (line: string) => void): Promise<ScriptBenchResult> {
  const calls = options.quick ? 20_000 : 100_000;
  const rounds = options.quick ? 1 : 5;
  const depths = [1, 16];
  const redis = await startRedisServer();
  const stats = new Redis(redis.url);
  const clients = await Promise.all(
    Array.from({ length: 20 }, async () => {
      const client = new Redis(redis.url);
      await client.ping();
      return client;
    }),
  );
  const cpuMicros = async () => {
    const info = await stats.info('cpu');
    const field = (name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)?.[1] ?? Number.NaN);
    return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
  };
  const samples = new Map<string, number[]>();
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const depth of depths) {
        for (const variant of VARIANTS) {
          const sha = (await stats.script('LOAD', variant.lua)) as string;
          await stats.flushdb();
          if (variant.setup) await stats.evalsha(sha, variant.setup[0] as number, ...variant.setup.slice(1));
          const send = async (total: number) => {
            let left = total;
            await Promise.all(
              clients.map(async (client) => {
                while (left > 0) {
                  left -= depth;
                  const pipeline = client.pipeline();
                  for (let i = 0; i < depth; i++) pipeline.evalsha(sha, variant.args[0] as number, ...variant.args.slice(1));
                  const replies = (await pipeline.exec()) ?? [];
                  const failed = replies.find(([error]) => error !== null);
                  if (failed) throw failed[0];
                }
              }),
            );
          };
          await send(calls / 10);
          const before = await cpuMicros();
          await send(calls);
          const micros = (await cpuMicros()) - before;
          const key = `${depth}:${variant.name}`;
          samples.set(key, [...(samples.get(key) ?? []), micros / calls / variant.consumesPerCall]);
        }
        log(`script round ${round}/${rounds}, P = ${depth}`);
      }
    }
  } finally {
    for (const client of clients) client.disconnect();
    stats.disconnect();
    await redis.stop();
  }
  const rows = VARIANTS.map((variant) => ({
    name: variant.name,
    consumesPerCall: variant.consumesPerCall,
    microsPerConsume: Object.fromEntries(depths.map((depth) => [depth, Math.min(...(samples.get(`${depth}:${variant.name}`) as number[]))])),
  }));
  return { rows, depths, calls, rounds };
}

/**
 * Mutation runs: each mutation is applied to a copy of the consume script (through the client's
 * `defineCommand`, never to the script the package ships) and the model comparison of `@petstore/core/testing`
 * must fail on it. `npm test` runs every mutation marked `mustCatch` on Redis, Redis Cluster and Valkey, seed
 * after seed until one catches it (a few dozen steps each). On demand, every seed, and the rate-limit
 * conformance suite too, with the table of what caught what (seed and step) printed for the record. (g) is
 * caught by rate-limit-store.test.ts ("keeps usage per window name across a plan change"), (h) by the
 * conformance suite's expiry case: the comparison's plans keep their window lengths, and its harness keeps keys
 * longer than asked (see `keepKeysAnHourLonger`). (l) and (o) are caught by rate-limit-algorithms.test.ts: the
 * comparison's clock never goes back (l), and its limits divide their windows, so a gcra retry is always a whole
 * number of ms (o).
 *
 *   PETSTORE_MUTATIONS=1 npx vitest run packages/storage-redis/src/model-mutations.test.ts
 */
import { runRateLimitModelComparison, runRateLimitStoreConformance, type ConformanceTestApi } from '@petstore/core/testing';
import type { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisRateLimitStore } from './rate-limit-store.js';
import {
  connect,
  connectCluster,
  connectValkey,
  keepKeysAnHourLonger,
  patchConsumeScript,
  readRateLimitState,
  replaceOnce,
  skipCluster,
  skipRedis,
  skipValkey,
  uniquePrefix,
} from '../test-support/redis.js';

interface Mutation {
  name: string;
  /** Whether the comparison must catch it (the others are recorded as they come out). */
  mustCatch: boolean;
  patch(lua: string): string;
}

const MUTATIONS: Mutation[] = [
  {
    name: '(a) an admitted request resets the subject’s rejection count',
    mustCatch: true,
    // In the loop that keeps each subject's live ban state: the admitted subject's own count goes.
    patch: (lua) =>
      replaceOnce(
        lua,
        'local rejectedStart, rejectedCount, bannedUntil = bans[b + 1], bans[b + 2], bans[b + 3]\n',
        'local rejectedStart, rejectedCount, bannedUntil = bans[b + 1], bans[b + 2], bans[b + 3]\n      if b == own then rejectedStart, rejectedCount = 0, 0 end\n',
      ),
  },
  {
    name: '(b) a refused request charges the windows that had room',
    mustCatch: true,
    patch: (lua) => replaceOnce(lua, 'if hasRoom then used[i] = used[i] + cost end', 'if hasRoom or used[i] + cost <= numbers[4 + i] then used[i] = used[i] + cost end'),
  },
  {
    name: '(c) a ban that starts one rejection late',
    mustCatch: true,
    patch: (lua) => replaceOnce(lua, 'if count >= banThreshold then', 'if count > banThreshold then'),
  },
  {
    name: '(d) a window boundary off by one millisecond',
    mustCatch: true,
    patch: (lua) => replaceOnce(lua, 'local start = now - now % windowMs', 'local start = (now - 1) - (now - 1) % windowMs'),
  },
  {
    name: '(e) ours: a ban falls on every key of the account (any banned subject is taken for the caller)',
    mustCatch: true,
    patch: (lua) => replaceOnce(lua, 'if bans[b] == subject then own = b break end', 'if bans[b] == subject or bans[b + 3] > now then own = b break end'),
  },
  {
    name: '(f) ours: a ban that ends exactly now is kept in the record',
    mustCatch: true,
    patch: (lua) => replaceOnce(lua, 'if bannedUntil <= now then bannedUntil = 0 end', 'if bannedUntil < now then bannedUntil = 0 end'),
  },
  {
    name: '(g) ours: a count carries over a plan change that changes a window’s length',
    mustCatch: false,
    patch: (lua) => replaceOnce(lua, 'if j and stored[j][3] == windowMs and st[2 + j] == start then', 'if j and st[2 + j] == start then'),
  },
  {
    name: '(h) ours: the record expires with its windows, whatever bans it holds',
    mustCatch: false,
    patch: (lua) => replaceOnce(lua, '  for b = 1, k, 4 do\n    at = max(at, kept[b + 3])', '  for b = 1, 0, 4 do\n    at = max(at, kept[b + 3])'),
  },
  {
    name: '(i) sliding: the previous window weighted from the wrong end (by the part of it already gone)',
    mustCatch: true,
    patch: (lua) => replaceEvery(lua, 'cp * (windowMs - (now - cs))', 'cp * (now - cs)'),
  },
  {
    name: '(j) sliding: the window before is dropped at the boundary (its count not carried as the previous count)',
    mustCatch: true,
    patch: (lua) => replaceOnce(lua, 'if ss == start then cc, cp = sc, sp elseif ss == start - windowMs then cp = sc end', 'if ss == start then cc, cp = sc, sp end'),
  },
  {
    name: '(k) gcra: an admission advances the counter by the cost, not by cost × windowMs',
    mustCatch: true,
    patch: (lua) => replaceOnce(lua, 'if a == 2 then counts[i] = counts[i] + cost * numbers[4 + n + i] else', 'if a == 2 then counts[i] = counts[i] + cost else'),
  },
  {
    name: '(l) gcra: a counter charged ahead of now (another clock) is read at now, not at its own time',
    mustCatch: false,
    patch: (lua) => replaceOnce(lua, 'cs = max(now, ss)', 'cs = now'),
  },
  {
    name: '(m) conversion: the units another algorithm held rounded down (floor), freeing one unit',
    mustCatch: true,
    patch: (lua) => replaceOnce(lua, 'units = ceil(heldOf(sa, windowMs, sL, ss, sc, sp, now) / windowMs)', 'units = floor(heldOf(sa, windowMs, sL, ss, sc, sp, now) / windowMs)'),
  },
  {
    name: '(n) usage: the units held reported rounded down (floor instead of ceil of used)',
    mustCatch: true,
    patch: (lua) => replaceOnce(lua, 'local u = ceil(held / windowMs)', 'local u = floor(held / windowMs)'),
  },
  {
    name: '(o) gcra: retryAtMs rounded down, one millisecond early',
    mustCatch: false,
    patch: (lua) => replaceOnce(lua, 'retry = cs + ceil(excess / limit)', 'retry = cs + floor(excess / limit)'),
  },
  {
    name: '(p) sliding: the record expires one window early (its count still weighs in the next window)',
    mustCatch: true,
    patch: (lua) => replaceOnce(lua, 'if a == 1 then return startMs + 2 * windowMs end', 'if a == 1 then return startMs + windowMs end'),
  },
];

/** `text` with every occurrence of `from` replaced by `to`; throws when there is none. */
function replaceEvery(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`expected ${JSON.stringify(from)} in the script`);
  return text.split(from).join(to);
}

const BACKENDS: Array<{ on: string; skip: boolean; connect: () => Redis | Cluster; prefix: () => string }> = [
  { on: 'Redis', skip: skipRedis, connect: () => connect(), prefix: () => uniquePrefix() },
  { on: 'Redis Cluster', skip: skipCluster, connect: () => connectCluster(), prefix: () => uniquePrefix('cluster') },
  { on: 'Valkey', skip: skipValkey, connect: () => connectValkey(), prefix: () => uniquePrefix('valkey') },
];

/** Registers a suite into a collector instead of the runner, then runs every case: name → failure message. */
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

const EVERY_SEED = process.env['PETSTORE_MUTATIONS'] === '1';

/** The comparison against the mutated script, seed after seed until one fails: that failure, or undefined. */
async function firstCatch(mutation: Mutation, backend: (typeof BACKENDS)[number]): Promise<string | undefined> {
  const cases: Array<() => Promise<void>> = [];
  runRateLimitModelComparison({
    describe: (_name, body) => body(),
    it: (_name, body) => cases.push(body),
    harness() {
      const client = patchConsumeScript(backend.connect(), (lua) => keepKeysAnHourLonger(mutation.patch(lua)));
      const store = redisRateLimitStore({ client, keyPrefix: backend.prefix(), time: 'request', blockCache: false });
      return { store, readState: (key) => readRateLimitState(client, store.redisKey(key)) };
    },
  });
  for (const body of cases) {
    const failure = await body().then(
      () => undefined,
      (error: unknown) => String(error instanceof Error ? error.message : error),
    );
    if (failure !== undefined) return failure;
  }
  return undefined;
}

if (!EVERY_SEED) {
  describe('the model comparison catches mutations of the consume script', () => {
    for (const mutation of MUTATIONS.filter((each) => each.mustCatch)) {
      for (const backend of BACKENDS) {
        it.skipIf(backend.skip)(`${mutation.name}, on ${backend.on}`, { timeout: 120_000 }, async () => {
          expect(await firstCatch(mutation, backend), 'the first seed that failed, with its step').toMatch(/^seed \d+, (after )?step \d+/);
        });
      }
    }
  });
}

if (EVERY_SEED) {
  describe('mutations of the consume script', () => {
    const table: string[] = ['| mutation | backend | model comparison (first failure) | seeds failed | conformance cases failed |', '|---|---|---|---|---|'];

    for (const mutation of MUTATIONS) {
      for (const backend of BACKENDS) {
        it.skipIf(backend.skip)(`${mutation.name}, on ${backend.on}`, { timeout: 300_000 }, async () => {
          const storeOf = (time: 'request', blockCache: false) => {
            const client = patchConsumeScript(backend.connect(), (lua) => keepKeysAnHourLonger(mutation.patch(lua)));
            return { client, store: redisRateLimitStore({ client, keyPrefix: backend.prefix(), time, blockCache }) };
          };
          const comparison = await outcomesOf((test) =>
            runRateLimitModelComparison({
              ...test,
              harness() {
                const { client, store } = storeOf('request', false);
                return { store, readState: (key) => readRateLimitState(client, store.redisKey(key)) };
              },
            }),
          );
          const failures = [...comparison.values()].filter((message): message is string => message !== undefined);
          const conformance = await outcomesOf((test) =>
            runRateLimitStoreConformance(test, {
              name: 'conformance',
              capabilities: { expiry: true, lostTtl: false },
              createStore() {
                // The conformance suite's expiry case reads the TTL the mutated script sets, so no longer TTL here.
                const client = patchConsumeScript(backend.connect(), mutation.patch);
                const store = redisRateLimitStore({ client, keyPrefix: backend.prefix(), time: 'request', blockCache: false });
                return {
                  store,
                  async remainingTtlMs(key) {
                    const ttl = await client.pttl(store.redisKey(key));
                    return ttl === -2 ? undefined : ttl === -1 ? Number.POSITIVE_INFINITY : ttl;
                  },
                };
              },
            }),
          );
          const failedCases = [...conformance].filter(([, message]) => message !== undefined).map(([name]) => name);
          const first = failures[0]?.split('\n')[0]?.slice(0, 220) ?? 'not caught';
          const cases = failedCases.length === 0 ? 'none' : `${failedCases.length} of ${conformance.size}, e.g. "${failedCases[0]}"`;
          table.push(`| ${mutation.name} | ${backend.on} | ${first} | ${failures.length} of ${comparison.size} | ${cases} |`);
          if (mutation.mustCatch) expect(failures.length, 'seeds on which the comparison failed').toBeGreaterThan(0);
        });
      }
    }

    it('prints the table', () => {
      console.log(table.join('\n'));
    });
  });
}

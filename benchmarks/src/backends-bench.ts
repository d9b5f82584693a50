/**
 * Backends: our Fastify adapter with its categories and rate limits in memory, Redis or PostgreSQL, side by
 * side in one run. Set up as the HTTP benchmark (GET /v1/categories, one API key, every server in its own
 * process pinned to one core, autocannon in this process pinned to the other, a warm-up per server, then
 * rounds that visit every server in turn, median round), with one throwaway Redis and one throwaway
 * PostgreSQL (`resolveTestRedis`, `resolveTestPostgres`: `REDIS_URL` / `DATABASE_URL` when set). Reported per
 * server: req/s, the server process's CPU per answered request, and the database's: redis-server's user +
 * system time (`INFO cpu`), and the PostgreSQL server's — the CPU time of the postmaster and every process it
 * started (backends, background workers), read from /proc in nanoseconds (`schedstat`), with the time of its exited
 * children — over the round ÷ the 200 answers.
 *
 * Beside them, API keys at scale: the memory server with 1,000 static keys, and with 1,000 managed keys
 * (`managedApiKeys`) over a Redis or a PostgreSQL record store, the requests spread over the keys; for the managed
 * ones, the record store's lookups (`findByDigest` calls) per 10,000 requests. And the flood: the record-store
 * lookups 100,000 random tokens and 100,000 well-formed unknown keys from one address cost, sent in process through
 * `petstore.handle` with the record store on Redis and on PostgreSQL.
 *
 * `BENCH_SERVERS=a,b` measures some of the servers only (and skips the flood), e.g. to compare two trees.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { createPetstore, managedApiKeys, type ApiKeyRecordStore, type PetstoreRequest } from '@petstore/core';
import { memoryApiKeyRecordStore, memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { postgresApiKeyRecordStore } from '@petstore/storage-postgres';
import { resolveTestPostgres } from '@petstore/storage-postgres/testing';
import { redisApiKeyRecordStore } from '@petstore/storage-redis';
import { resolveTestRedis } from '@petstore/storage-redis/testing';
import { Redis } from 'ioredis';
import pg from 'pg';
import { load, median, pinSelf, serverStats, startServerProcess, unpinSelf, type HttpRow } from './http-bench.js';
import { redisCpuMicros } from './scaleout-bench.js';
import {
  BENCH_KEY,
  CATEGORIES,
  HUGE_QUOTA,
  PETSTORE_BACKENDS,
  POSTGRES_POOL_SIZE,
  benchKeys,
  seedPostgres,
  serverNeeds,
  type ApiKeysBackend,
  type Backend,
  type PetstoreServerName,
  type ServerDatabases,
} from './servers.js';

/** The servers, in the order of the report. */
export const BACKEND_SERVERS = [
  'fastify-petstore',
  'fastify-petstore-redis',
  'fastify-petstore-postgres-limits',
  'fastify-petstore-postgres',
  'fastify-petstore-postgres-redis',
  'fastify-petstore-redis-all',
  'fastify-petstore-static-1000',
  'fastify-petstore-managed-redis',
  'fastify-petstore-managed-postgres',
] as const satisfies readonly PetstoreServerName[];
type BackendServer = (typeof BACKEND_SERVERS)[number];

/** The API keys the requests to a server are spread over: 1,000 for the servers of the API-keys rows, else {@link BENCH_KEY} alone. */
export const KEYS_PER_SERVER: Record<BackendServer, number> = {
  'fastify-petstore': 1,
  'fastify-petstore-redis': 1,
  'fastify-petstore-postgres-limits': 1,
  'fastify-petstore-postgres': 1,
  'fastify-petstore-postgres-redis': 1,
  'fastify-petstore-redis-all': 1,
  'fastify-petstore-static-1000': 1000,
  'fastify-petstore-managed-redis': 1000,
  'fastify-petstore-managed-postgres': 1000,
};

/** Requests of each flood of {@link FloodRow}. */
export const FLOOD_REQUESTS = 100_000;

/** One flood: the record-store lookups its requests cost, and how they were answered. */
export interface FloodRow {
  /** Where the records are. */
  records: 'redis' | 'postgres';
  /** `random`: tokens shaped like managed keys (prefix, length, alphabet) but with no valid checksum, each from its own address; `unknown`: well-formed managed keys no record has, all from one address. */
  tokens: 'random' | 'unknown';
  requests: number;
  /** Calls of the record store's `findByDigest`. */
  lookups: number;
  /** How many requests got each status. */
  statuses: Record<number, number>;
  durationMs: number;
}

/** One server's result: the HTTP table's columns (medians over the rounds), plus where it keeps what and database CPU. */
export interface BackendRow extends Omit<HttpRow, 'name'> {
  name: BackendServer;
  categories: Backend;
  rateLimits: Backend;
  apiKeys: ApiKeysBackend;
  /** API keys the requests were spread over. */
  keys: number;
  /** Record-store lookups (`findByDigest` calls) per 10,000 answered requests, over the measured rounds (managed keys only). */
  apiKeyLookupsPer10k?: number;
  /** redis-server's CPU time per answered request, µs (servers on Redis only). */
  redisCpuMicrosPerRequest?: number;
  /** The PostgreSQL server's CPU time per answered request, µs (servers on PostgreSQL, when measurable). */
  postgresCpuMicrosPerRequest?: number;
  /** Server + database CPU per answered request, µs, median of the rounds' sums (when every part was measured). */
  totalCpuMicrosPerRequest?: number;
  /** Statements the server's `pg.Pool` ran per answered request. */
  postgresStatementsPerRequest?: number;
}

export interface BackendsResult {
  rows: BackendRow[];
  /** Absent when `BENCH_SERVERS` narrowed the run. */
  flood?: FloodRow[];
  pinned: boolean;
  /** Why the PostgreSQL server's CPU was not measured; absent when it was. */
  postgresCpuUnmeasured?: string;
  /** The PostgreSQL server's `server_version`, `fsync` and `synchronous_commit`, and each server's pool size. */
  postgres: { version: string; fsync: string; synchronousCommit: string; poolSize: number };
  redisVersion: string;
  settings: BackendsBenchOptions;
}

export interface BackendsBenchOptions {
  rounds: number;
  durationSeconds: number;
  warmupSeconds: number;
  connections: number;
}

const isLoopback = (url: string) => ['127.0.0.1', 'localhost', '[::1]', '::1'].includes(new URL(url).hostname);

/** The fields of `/proc/<pid>/stat` after the command name (which may hold spaces), or undefined when gone. */
function procStat(pid: number): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}
/** The time `pid` has spent on a CPU, µs, from `/proc/<pid>/schedstat` (nanoseconds); undefined when it is not there. */
function runMicros(pid: number): number | undefined {
  try {
    const nanos = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
    return Number.isFinite(nanos) ? nanos / 1000 : undefined;
  } catch {
    return undefined;
  }
}
// Indexes into procStat's fields (proc(5) numbers them from 1 with pid and comm first).
const PPID = 1;
const UTIME = 11;
const STIME = 12;
const CUTIME = 13;
const CSTIME = 14;

/** Lets `pid` (every thread) run on every core: the database servers are not pinned, whatever this process is. */
function unpin(pid: number): void {
  try {
    execFileSync('taskset', ['-a', '-cp', `0-${cpus().length - 1}`, String(pid)], { stdio: 'ignore' });
  } catch {
    // no taskset, or the process is gone: it runs where the system puts it
  }
}

/**
 * The PostgreSQL server's CPU time so far, µs: the time the postmaster and every process it started that is still
 * running have spent on a CPU, plus the time of its children that have exited (`cutime`, `cstime` of the
 * postmaster). Found from the pid of one of `pool`'s backends; needs the server on this machine (/proc).
 *
 * A running process's time is read in nanoseconds from `/proc/<pid>/schedstat` (its first field, the scheduler's
 * run time) where the kernel has it, else from `/proc/<pid>/stat` in clock ticks (10 ms): a round of 3,000 consumes
 * at 30 µs each is 9 ticks, so ticks alone move a round's figure in steps of 11 %.
 */
export async function postgresCpu(pool: pg.Pool, url: string): Promise<{ postmaster: number; micros(): number } | { reason: string }> {
  if (process.platform !== 'linux') return { reason: 'no /proc on this system' };
  if (!isLoopback(url)) return { reason: 'the PostgreSQL server is not on this machine' };
  const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const backend = procStat((rows[0] as { pid: number }).pid);
  if (backend === undefined) return { reason: "the PostgreSQL server's processes are not visible here (another container?)" };
  const postmaster = Number(backend[PPID]);
  const comm = (() => {
    try {
      return readFileSync(`/proc/${postmaster}/comm`, 'utf8').trim();
    } catch {
      return '';
    }
  })();
  if (!comm.startsWith('postgres')) return { reason: `the backend's parent process is ${comm || 'unknown'}, not the postmaster` };
  const microsPerTick = 1e6 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  return {
    postmaster,
    micros() {
      let micros = 0;
      for (const entry of readdirSync('/proc')) {
        if (!/^\d+$/.test(entry)) continue;
        const pid = Number(entry);
        const stat = procStat(pid);
        if (stat === undefined || (pid !== postmaster && Number(stat[PPID]) !== postmaster)) continue;
        micros += runMicros(pid) ?? (Number(stat[UTIME]) + Number(stat[STIME])) * microsPerTick;
        if (pid === postmaster) micros += (Number(stat[CUTIME]) + Number(stat[CSTIME])) * microsPerTick;
      }
      return micros;
    },
  };
}

/** Checks that a server answers the benchmark's three categories (one request with `key`). */
async function checkAnswer(name: string, port: number, key = BENCH_KEY): Promise<void> {
  const response = await fetch(`http://127.0.0.1:${port}/v1/categories`, { headers: { authorization: `Bearer ${key}` } });
  const body = await response.text();
  if (response.status !== 200 || JSON.stringify(JSON.parse(body)) !== JSON.stringify(CATEGORIES)) {
    throw new Error(`${name} answered ${response.status} ${body}, not the three categories`);
  }
}

/** One request with each of `keys`, 50 at a time, each answered with the three categories. */
async function touchEveryKey(name: string, port: number, keys: readonly string[]): Promise<void> {
  for (let start = 0; start < keys.length; start += 50) {
    await Promise.all(keys.slice(start, start + 50).map((key) => checkAnswer(name, port, key)));
  }
}

/** Issues `count` managed keys into `records`, each of its own account, with a quota no run uses up; answers the keys. */
async function issueKeys(records: ApiKeyRecordStore, count: number): Promise<string[]> {
  const manager = managedApiKeys({ store: records });
  const keys: string[] = [];
  try {
    for (let start = 0; start < count; start += 50) {
      const issued = await Promise.all(
        Array.from({ length: Math.min(50, count - start) }, (_, i) =>
          manager.issue({
            accountId: `bench-account-${start + i}`,
            plan: 'enterprise',
            limits: { requestsPerMinute: HUGE_QUOTA, requestsPerDay: HUGE_QUOTA },
          }),
        ),
      );
      keys.push(...issued.map(({ key }) => key));
    }
  } finally {
    await manager.close();
    await records.close?.();
  }
  return keys;
}

/** `count` well-formed managed keys (prefix `pet_`, valid checksum) that no record of any other store holds: rotations of one key in a store of their own. */
async function unknownKeys(count: number): Promise<string[]> {
  const manager = managedApiKeys({ store: memoryApiKeyRecordStore() });
  const { keyId } = await manager.issue({ accountId: 'nobody', plan: 'free' });
  const keys: string[] = [];
  for (let i = 0; i < count; i++) keys.push((await manager.rotate(keyId, { graceMs: 0 })).key);
  await manager.close();
  return keys;
}

/** Strings shaped like managed keys — `pet_` and 38 base62 characters — whose checksum (almost surely) fails. */
function randomTokens(count: number): string[] {
  const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  const bytes = randomBytes(count * 38);
  return Array.from({ length: count }, (_, n) => {
    let token = 'pet_';
    for (let i = 0; i < 38; i++) token += alphabet[(bytes[n * 38 + i] as number) % 62];
    return token;
  });
}

/**
 * The flood: {@link FLOOD_REQUESTS} requests, one after another, through `petstore.handle` of a petstore whose
 * only API keys are managed ones over `records` (its `findByDigest` calls counted), categories and rate limits in
 * memory with the default anonymous limits and ban: random tokens each from its own address (the rate limiter
 * never refuses them, so only the format check stands before the store), then well-formed unknown keys from one
 * address.
 */
async function runFlood(records: ApiKeyRecordStore, where: FloodRow['records'], log: (line: string) => void): Promise<FloodRow[]> {
  let lookups = 0;
  const findByDigest = records.findByDigest.bind(records);
  records.findByDigest = (digest) => {
    lookups += 1;
    return findByDigest(digest);
  };
  const keys = managedApiKeys({ store: records });
  await keys.ready();
  const categories = memoryCategoryStore();
  const petstore = createPetstore({ apiKeys: keys, categories, rateLimit: { store: memoryRateLimitStore(), anonymousStore: memoryRateLimitStore() } });
  const rows: FloodRow[] = [];
  try {
    const floods: { tokens: FloodRow['tokens']; values: string[]; address: (n: number) => string }[] = [
      { tokens: 'random', values: randomTokens(FLOOD_REQUESTS), address: (n) => `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}` },
      { tokens: 'unknown', values: await unknownKeys(FLOOD_REQUESTS), address: () => '198.51.100.7' },
    ];
    for (const { tokens, values, address } of floods) {
      const before = lookups;
      const statuses: Record<number, number> = {};
      const started = performance.now();
      for (let n = 0; n < values.length; n++) {
        const request: PetstoreRequest = { method: 'GET', path: '/categories', headers: { authorization: `Bearer ${values[n] as string}` }, clientAddress: address(n) };
        const { status } = await petstore.handle(request);
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
      const row: FloodRow = { records: where, tokens, requests: values.length, lookups: lookups - before, statuses, durationMs: Math.round(performance.now() - started) };
      log(`flood, records in ${where}, ${tokens} tokens: ${row.lookups} lookups for ${row.requests} requests, statuses ${JSON.stringify(statuses)}`);
      rows.push(row);
    }
  } finally {
    await keys.close();
    await records.close?.();
  }
  return rows;
}

/** Runs the backends benchmark; `log` reports progress. */
export async function runBackendsBenchmark(options: BackendsBenchOptions, log: (line: string) => void): Promise<BackendsResult> {
  const redis = await resolveTestRedis();
  if ('skipReason' in redis) throw new Error(`the backends benchmark needs Redis: ${redis.skipReason}`);
  const postgres = await resolveTestPostgres();
  if ('skipReason' in postgres) {
    await redis.stop();
    throw new Error(`the backends benchmark needs PostgreSQL: ${postgres.skipReason}`);
  }
  // A schema of its own: with DATABASE_URL, the benchmark's tables and rows stay apart and are dropped after.
  const schema = `petstore_bench_${randomBytes(4).toString('hex')}`;
  const pool = new pg.Pool({ connectionString: postgres.url, max: 1 });
  let stopping = false;
  // An idle connection that drops emits 'error' on the pool (also while the server stops at the end, expected).
  pool.on('error', (error) => {
    if (!stopping) log(`an idle PostgreSQL connection failed: ${error.message}`);
  });
  const redisStats = new Redis(redis.url);
  // The managed keys' records in Redis under a prefix of their own: with REDIS_URL, deleted after.
  const redisKeyPrefix = `${schema}:`;
  const wanted = process.env['BENCH_SERVERS']?.split(',');
  const selected = BACKEND_SERVERS.filter((name) => wanted === undefined || wanted.includes(name));
  const servers = new Map<BackendRow['name'], { port: number; child: ChildProcess }>();
  try {
    await seedPostgres(pool, schema);
    // The keys each server's requests are spread over; the managed ones issued into its record store now.
    const keysOf = new Map<BackendServer, string[]>();
    for (const name of selected) {
      const apiKeys = PETSTORE_BACKENDS[name].apiKeys;
      const count = KEYS_PER_SERVER[name];
      if (apiKeys === 'managed-redis') keysOf.set(name, await issueKeys(redisApiKeyRecordStore({ client: redisStats, keyPrefix: redisKeyPrefix }), count));
      else if (apiKeys === 'managed-postgres') keysOf.set(name, await issueKeys(postgresApiKeyRecordStore({ pool, schema }), count));
      else keysOf.set(name, benchKeys(count));
      if (apiKeys !== 'static') log(`issued ${count} managed keys for ${name}`);
    }
    const keysFor = (name: BackendServer) => keysOf.get(name) as string[];
    const loadKeys = (name: BackendServer) => (KEYS_PER_SERVER[name] === 1 ? undefined : keysFor(name));
    const setting = async (name: string) => ((await pool.query<{ value: string }>(`SELECT current_setting('${name}') AS value`)).rows[0] as { value: string }).value;
    const postgresInfo = {
      version: await setting('server_version'),
      fsync: await setting('fsync'),
      synchronousCommit: await setting('synchronous_commit'),
      poolSize: POSTGRES_POOL_SIZE,
    };
    const redisVersion = /redis_version:(\S+)/.exec(await redisStats.info('server'))?.[1] ?? 'unknown';
    const pgCpu = await postgresCpu(pool, postgres.url);
    // The servers are started after this process may have been pinned (by an earlier benchmark of the run),
    // and inherited its core: let them run anywhere.
    if ('postmaster' in pgCpu) {
      unpin(pgCpu.postmaster);
      for (const entry of readdirSync('/proc')) {
        if (/^\d+$/.test(entry) && Number(procStat(Number(entry))?.[PPID]) === pgCpu.postmaster) unpin(Number(entry));
      }
    }
    const redisPid = Number(/process_id:(\d+)/.exec(await redisStats.info('server'))?.[1]);
    if (isLoopback(redis.url) && Number.isSafeInteger(redisPid)) unpin(redisPid);

    const pinned = pinSelf(1);
    const databases: ServerDatabases = { redisUrl: redis.url, redisKeyPrefix, postgres: { url: postgres.url, schema } };
    for (const name of selected) {
      const isStatic = PETSTORE_BACKENDS[name].apiKeys === 'static';
      const server = await startServerProcess(name, databases, pinned ? 0 : undefined, isStatic ? KEYS_PER_SERVER[name] : 1);
      servers.set(name, server);
      await checkAnswer(name, server.port, keysFor(name)[0]);
    }
    for (const name of selected) {
      log(`warm-up ${name}`);
      await load((servers.get(name) as { port: number }).port, options.warmupSeconds, options.connections, loadKeys(name));
    }
    type Sample = {
      rps: number[];
      p50: number[];
      p99: number[];
      cpu: number[];
      redisCpu: number[];
      postgresCpu: number[];
      totalCpu: number[];
      non2xx: number;
      redisCommands: number;
      postgresStatements: number;
      apiKeyLookups: number;
      answers: number;
    };
    const samples = new Map<BackendRow['name'], Sample>();
    for (const name of selected) {
      samples.set(name, {
        rps: [],
        p50: [],
        p99: [],
        cpu: [],
        redisCpu: [],
        postgresCpu: [],
        totalCpu: [],
        non2xx: 0,
        redisCommands: 0,
        postgresStatements: 0,
        apiKeyLookups: 0,
        answers: 0,
      });
    }
    for (let round = 1; round <= options.rounds; round++) {
      for (const name of selected) {
        const sample = samples.get(name) as Sample;
        const { port, child } = servers.get(name) as { port: number; child: ChildProcess };
        const needs = serverNeeds(name);
        const measurePostgres = needs.postgres && 'postmaster' in pgCpu;
        // A round of this server comes longer after its last one than the managed keys' cache TTL (30 s): one
        // request per key first (not measured), so every round starts with the cache warm, as under steady load.
        if (KEYS_PER_SERVER[name] > 1) await touchEveryKey(name, port, keysFor(name));
        const before = await serverStats(child);
        const redisBefore = needs.redis ? await redisCpuMicros(redisStats) : 0;
        const postgresBefore = measurePostgres ? pgCpu.micros() : 0;
        const result = await load(port, options.durationSeconds, options.connections, loadKeys(name));
        const postgresAfter = measurePostgres ? pgCpu.micros() : 0;
        const redisAfter = needs.redis ? await redisCpuMicros(redisStats) : 0;
        const after = await serverStats(child);
        const answers = result['2xx'];
        const cpu = (after.cpuMicros - before.cpuMicros) / answers;
        const redisCpu = (redisAfter - redisBefore) / answers;
        const postgresCpu = (postgresAfter - postgresBefore) / answers;
        sample.cpu.push(cpu);
        if (needs.redis) sample.redisCpu.push(redisCpu);
        if (measurePostgres) sample.postgresCpu.push(postgresCpu);
        sample.totalCpu.push(cpu + redisCpu + postgresCpu);
        sample.redisCommands += after.redisCommands - before.redisCommands;
        sample.postgresStatements += after.postgresStatements - before.postgresStatements;
        sample.apiKeyLookups += after.apiKeyLookups - before.apiKeyLookups;
        sample.answers += answers;
        sample.rps.push(result.requests.average);
        sample.p50.push(result.latency.p50);
        sample.p99.push(result.latency.p99);
        sample.non2xx += result.non2xx + result.errors + result.timeouts;
        const databaseCpu = [needs.redis ? `Redis ${redisCpu.toFixed(1)}` : '', measurePostgres ? `PostgreSQL ${postgresCpu.toFixed(1)}` : ''].filter(Boolean);
        log(
          `round ${round}/${options.rounds} ${name}: ${Math.round(result.requests.average)} req/s, p99 ${result.latency.p99} ms, server ${cpu.toFixed(1)} µs/req${databaseCpu.length > 0 ? `, ${databaseCpu.join(', ')} µs/req` : ''}${PETSTORE_BACKENDS[name].apiKeys === 'static' ? '' : `, ${after.apiKeyLookups - before.apiKeyLookups} record lookups`}`,
        );
      }
    }
    const rows = selected.map((name): BackendRow => {
      const sample = samples.get(name) as Sample;
      const needs = serverNeeds(name);
      const measured = !needs.postgres || 'postmaster' in pgCpu;
      return {
        name,
        ...PETSTORE_BACKENDS[name],
        keys: KEYS_PER_SERVER[name],
        ...(PETSTORE_BACKENDS[name].apiKeys === 'static' ? {} : { apiKeyLookupsPer10k: (sample.apiKeyLookups / sample.answers) * 10_000 }),
        requestsPerSecond: median(sample.rps),
        p50Ms: median(sample.p50),
        p99Ms: median(sample.p99),
        rounds: sample.rps.map(Math.round),
        non2xx: sample.non2xx,
        cpuMicrosPerRequest: median(sample.cpu),
        ...(needs.redis ? { redisCpuMicrosPerRequest: median(sample.redisCpu), redisCommandsPerRequest: sample.redisCommands / sample.answers } : {}),
        ...(needs.postgres ? { postgresStatementsPerRequest: sample.postgresStatements / sample.answers } : {}),
        ...(needs.postgres && measured ? { postgresCpuMicrosPerRequest: median(sample.postgresCpu) } : {}),
        ...(measured ? { totalCpuMicrosPerRequest: median(sample.totalCpu) } : {}),
      };
    });
    unpinSelf();
    let flood: FloodRow[] | undefined;
    if (wanted === undefined) {
      log('flood: record-store lookups of random tokens and of well-formed unknown keys');
      flood = [
        ...(await runFlood(redisApiKeyRecordStore({ client: redisStats, keyPrefix: `${redisKeyPrefix}flood:` }), 'redis', log)),
        ...(await runFlood(postgresApiKeyRecordStore({ pool, schema }), 'postgres', log)),
      ];
    }
    return {
      rows,
      ...(flood === undefined ? {} : { flood }),
      pinned,
      ...('reason' in pgCpu ? { postgresCpuUnmeasured: pgCpu.reason } : {}),
      postgres: postgresInfo,
      redisVersion,
      settings: options,
    };
  } finally {
    unpinSelf();
    // The servers close their pools before the database stops (SIGKILL after 5 s).
    await Promise.all([...servers.values()].map(({ child }) => stopServer(child)));
    // The managed keys' records (with REDIS_URL, a Redis the benchmark does not throw away).
    await deleteKeys(redisStats, `${redisKeyPrefix}*`).catch((error: unknown) => log(`deleting the benchmark's Redis keys failed: ${String(error)}`));
    redisStats.disconnect();
    try {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    } finally {
      stopping = true;
      await pool.end();
      await postgres.stop();
      await redis.stop();
    }
  }
}

/** SIGTERM, then SIGKILL when the server has not exited after 5 s. */
async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/** Deletes the keys matching `pattern` (SCAN, then DEL in batches). */
async function deleteKeys(redis: Redis, pattern: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}

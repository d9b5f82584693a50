/**
 * Backends: our Fastify adapter with its categories and rate limits in memory, Redis or PostgreSQL, side by
 * side in one run. Set up as the HTTP benchmark (GET /v1/categories, one API key, every server in its own
 * process pinned to one core, autocannon in this process pinned to the other, a warm-up per server, then
 * rounds that visit every server in turn, median round), with one throwaway Redis and one throwaway
 * PostgreSQL (`resolveTestRedis`, `resolveTestPostgres`: `REDIS_URL` / `DATABASE_URL` when set). Reported per
 * server: req/s, the server process's CPU per answered request, and the database's: redis-server's user +
 * system time (`INFO cpu`), and the PostgreSQL server's — the user + system time of the postmaster and every
 * process it started (backends, background workers), read from /proc, with the time of its exited children —
 * over the round ÷ the 200 answers.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { resolveTestPostgres } from '@petstore/storage-postgres/testing';
import { resolveTestRedis } from '@petstore/storage-redis/testing';
import { Redis } from 'ioredis';
import pg from 'pg';
import { load, median, pinSelf, serverStats, startServerProcess, unpinSelf, type HttpRow } from './http-bench.js';
import { redisCpuMicros } from './scaleout-bench.js';
import {
  BENCH_KEY,
  CATEGORIES,
  PETSTORE_BACKENDS,
  POSTGRES_POOL_SIZE,
  seedPostgres,
  serverNeeds,
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
] as const satisfies readonly PetstoreServerName[];

/** One server's result: medians over the rounds. */
/** One server's result: the HTTP table's columns (medians over the rounds), plus where it keeps what and database CPU. */
export interface BackendRow extends Omit<HttpRow, 'name'> {
  name: (typeof BACKEND_SERVERS)[number];
  categories: Backend;
  rateLimits: Backend;
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
 * The PostgreSQL server's CPU time so far, µs: user + system time of the postmaster and of every process it
 * started that is still running, plus the time of its children that have exited (`cutime`, `cstime` of the
 * postmaster). Found from the pid of one of `pool`'s backends; needs the server on this machine (/proc).
 */
async function postgresCpu(pool: pg.Pool, url: string): Promise<{ postmaster: number; micros(): number } | { reason: string }> {
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
      let ticks = 0;
      for (const entry of readdirSync('/proc')) {
        if (!/^\d+$/.test(entry)) continue;
        const pid = Number(entry);
        const stat = procStat(pid);
        if (stat === undefined) continue;
        if (pid === postmaster) ticks += Number(stat[UTIME]) + Number(stat[STIME]) + Number(stat[CUTIME]) + Number(stat[CSTIME]);
        else if (Number(stat[PPID]) === postmaster) ticks += Number(stat[UTIME]) + Number(stat[STIME]);
      }
      return ticks * microsPerTick;
    },
  };
}

/** Checks that a server answers the benchmark's three categories (one request). */
async function checkAnswer(name: string, port: number): Promise<void> {
  const response = await fetch(`http://127.0.0.1:${port}/v1/categories`, { headers: { authorization: `Bearer ${BENCH_KEY}` } });
  const body = await response.text();
  if (response.status !== 200 || JSON.stringify(JSON.parse(body)) !== JSON.stringify(CATEGORIES)) {
    throw new Error(`${name} answered ${response.status} ${body}, not the three categories`);
  }
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
  const servers = new Map<BackendRow['name'], { port: number; child: ChildProcess }>();
  try {
    await seedPostgres(pool, schema);
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
    const databases: ServerDatabases = { redisUrl: redis.url, postgres: { url: postgres.url, schema } };
    for (const name of BACKEND_SERVERS) {
      const server = await startServerProcess(name, databases, pinned ? 0 : undefined);
      servers.set(name, server);
      await checkAnswer(name, server.port);
    }
    for (const name of BACKEND_SERVERS) {
      log(`warm-up ${name}`);
      await load((servers.get(name) as { port: number }).port, options.warmupSeconds, options.connections);
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
      answers: number;
    };
    const samples = new Map<BackendRow['name'], Sample>();
    for (const name of BACKEND_SERVERS) {
      samples.set(name, { rps: [], p50: [], p99: [], cpu: [], redisCpu: [], postgresCpu: [], totalCpu: [], non2xx: 0, redisCommands: 0, postgresStatements: 0, answers: 0 });
    }
    for (let round = 1; round <= options.rounds; round++) {
      for (const name of BACKEND_SERVERS) {
        const sample = samples.get(name) as Sample;
        const { port, child } = servers.get(name) as { port: number; child: ChildProcess };
        const needs = serverNeeds(name);
        const measurePostgres = needs.postgres && 'postmaster' in pgCpu;
        const before = await serverStats(child);
        const redisBefore = needs.redis ? await redisCpuMicros(redisStats) : 0;
        const postgresBefore = measurePostgres ? pgCpu.micros() : 0;
        const result = await load(port, options.durationSeconds, options.connections);
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
        sample.answers += answers;
        sample.rps.push(result.requests.average);
        sample.p50.push(result.latency.p50);
        sample.p99.push(result.latency.p99);
        sample.non2xx += result.non2xx + result.errors + result.timeouts;
        const databaseCpu = [needs.redis ? `Redis ${redisCpu.toFixed(1)}` : '', measurePostgres ? `PostgreSQL ${postgresCpu.toFixed(1)}` : ''].filter(Boolean);
        log(
          `round ${round}/${options.rounds} ${name}: ${Math.round(result.requests.average)} req/s, p99 ${result.latency.p99} ms, server ${cpu.toFixed(1)} µs/req${databaseCpu.length > 0 ? `, ${databaseCpu.join(', ')} µs/req` : ''}`,
        );
      }
    }
    const rows = BACKEND_SERVERS.map((name): BackendRow => {
      const sample = samples.get(name) as Sample;
      const needs = serverNeeds(name);
      const measured = !needs.postgres || 'postmaster' in pgCpu;
      return {
        name,
        ...PETSTORE_BACKENDS[name],
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
    return {
      rows,
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

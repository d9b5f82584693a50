/**
 * `npm run bench`: the HTTP benchmark against the peer stacks, our adapter on memory, Redis and PostgreSQL
 * side by side, the core rate-limit micro-benchmark, memory per tracked key, and server CPU per request for
 * hostile 1 MiB request bodies; writes BENCHMARKS.md at the repository root.
 *
 * Flags: `--quick` (short runs, for trying the harness),
 * `--only=http,backends,scaleout,script,algorithms,core,memory,hostile,list,observability` (all by default; with `--only`, the
 * other sections of the existing BENCHMARKS.md are kept). `PETSTORE_BASELINE_CORE=<built core dist/index.js>` adds
 * the core of another commit to the Observability section (see observability-bench.ts).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem, type as osType, release } from 'node:os';
import { fileURLToPath } from 'node:url';
import { DEFAULT_ANONYMOUS_LIMITS } from '@petstore/core';
import { resolveTestRedis } from '@petstore/storage-redis/testing';
import { runHttpBenchmark, type HttpRow } from './http-bench.js';
import type { BackendsResult } from './backends-bench.js';
import type { CoreBenchResult } from './core-bench.js';
import type { PgAlgorithmsResult } from './pg-algorithms-bench.js';
import type { HostileBenchResult } from './hostile-bench.js';
import type { ListBenchResult } from './list-bench.js';
import type { MemoryBenchResult } from './memory-bench.js';
import type { VariantResult } from './ns-per-call.js';
import type { ScaleOutResult } from './scaleout-bench.js';
import type { ScriptBenchResult } from './script-bench.js';
import { mergeReport, SECTION_HEADINGS, SECTION_KEYS, type SectionKey } from './report-merge.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const onlyFlag = args.find((arg) => arg.startsWith('--only='))?.slice(7);
const only = new Set(onlyFlag?.split(',') ?? SECTION_KEYS);
const unknown = [...only].filter((key) => !(SECTION_KEYS as readonly string[]).includes(key));
if (unknown.length > 0) throw new Error(`unknown --only key(s) ${unknown.join(', ')}; known: ${SECTION_KEYS.join(', ')}`);
const log = (line: string) => console.log(`[bench] ${line}`);
/** The 1-minute load average when the run and each of its sections started (the run's own earlier sections count in it). */
const loadAtStart = loadavg()[0] ?? 0;
const sectionLoads: Partial<Record<SectionKey, number>> = {};
const starting = (key: SectionKey) => {
  sectionLoads[key] = loadavg()[0] ?? 0;
};

const settings = quick
  ? { rounds: 1, durationSeconds: 2, warmupSeconds: 1, connections: 50 }
  : { rounds: 5, durationSeconds: 5, warmupSeconds: 3, connections: 50 };

let http: { rows: HttpRow[]; pinned: boolean } | undefined;
if (only.has('http')) {
  starting('http');
  const redis = await resolveTestRedis();
  if ('skipReason' in redis) throw new Error(`the Redis rows need Redis: ${redis.skipReason}`);
  try {
    http = await runHttpBenchmark({ redisUrl: redis.url, ...settings }, log);
  } finally {
    await redis.stop();
  }
}
let backends: BackendsResult | undefined;
if (only.has('backends')) {
  starting('backends');
  log('backends: our Fastify adapter on memory, Redis and PostgreSQL');
  backends = await (await import('./backends-bench.js')).runBackendsBenchmark(settings, log);
}
let scaleOut: ScaleOutResult | undefined;
if (only.has('scaleout')) {
  starting('scaleout');
  log('scale-out: K app processes on one Redis');
  scaleOut = await (await import('./scaleout-bench.js')).runScaleOutBenchmark({ quick }, log);
}
let script: ScriptBenchResult | undefined;
if (only.has('script')) {
  starting('script');
  log('Redis CPU per call of the consume script and its pieces');
  script = await (await import('./script-bench.js')).runScriptBenchmark({ quick }, log);
}
let algorithms: PgAlgorithmsResult | undefined;
if (only.has('algorithms')) {
  starting('algorithms');
  log('PostgreSQL CPU per decision by algorithm');
  algorithms = await (await import('./pg-algorithms-bench.js')).runPgAlgorithmsBenchmark({ quick }, log);
}
let core: CoreBenchResult | undefined;
if (only.has('core')) {
  starting('core');
  log('core micro-benchmark');
  core = await (await import('./core-bench.js')).runCoreBenchmark({ quick });
}
let memory: MemoryBenchResult | undefined;
if (only.has('memory')) {
  starting('memory');
  log('memory benchmark');
  memory = await (await import('./memory-bench.js')).runMemoryBenchmark({ quick });
}

let hostile: HostileBenchResult | undefined;
if (only.has('hostile')) {
  starting('hostile');
  log('hostile request bodies');
  hostile = await (await import('./hostile-bench.js')).runHostileBenchmark({ quick }, log);
}

let list: ListBenchResult | undefined;
if (only.has('list')) {
  starting('list');
  log('list: GET /v1/categories with 100,000 categories on memory, Redis and PostgreSQL');
  list = await (await import('./list-bench.js')).runListBenchmark({ quick }, log);
}

let observability: VariantResult[] | undefined;
if (only.has('observability')) {
  starting('observability');
  log('observability: the hot path with and without subscribers');
  observability = await (await import('./observability-bench.js')).runObservabilityBenchmark({ quick });
}

const fresh = withLoads(renderReport({ http, backends, scaleOut, script, algorithms, core, memory, hostile, list, observability, settings, quick }));
const target = fileURLToPath(new URL('../../BENCHMARKS.md', import.meta.url));
let report = fresh;
if (onlyFlag !== undefined && existsSync(target)) {
  // Only some sections were measured: keep the others of the existing file.
  const previous = readFileSync(target, 'utf8');
  const machine = (text: string) => /^Machine: .*$/m.exec(text)?.[0];
  const elsewhere = machine(previous) !== machine(fresh) ? ` ${machine(fresh) ?? ''}` : '';
  const note = `_This section: measured ${new Date().toISOString().slice(0, 10)} by \`npm run bench -- ${args.join(' ')}\`${quick ? ' (--quick: short runs, not for comparison)' : ''}, apart from the run named at the top.${elsewhere}_`;
  report = mergeReport(previous, fresh, only as Set<SectionKey>, note, log);
  log(`kept the other sections of ${target}`);
}
writeFileSync(target, report);
console.log(report);
log(`written to ${target}`);

/**
 * Why a server of the Backends table shows other figures than the HTTP table's row of the same name: the same server,
 * placed and loaded the same way, measured in rounds of its own among other servers.
 */
function sameServersLine(rows: readonly BackendsResult['rows'][number][], httpRows: readonly HttpRow[] | undefined): string {
  const shared = rows.filter((row) => httpRows?.some((other) => other.name === row.name));
  const figures = shared.map((row) => {
    const other = httpRows?.find((candidate) => candidate.name === row.name) as HttpRow;
    return `${row.name} ${row.cpuMicrosPerRequest.toFixed(1)} µs/req (${Math.round(row.requestsPerSecond).toLocaleString('en-US')} req/s) here, ${other.cpuMicrosPerRequest.toFixed(1)} (${Math.round(other.requestsPerSecond).toLocaleString('en-US')}) there`;
  });
  return `\`fastify-petstore\` and \`fastify-petstore-redis\` are the same servers as the HTTP table's rows of those names, pinned and loaded the same way; each table measures them in rounds of its own, among other servers, so their figures differ by the spread between rounds (the rounds column), not by method${figures.length > 0 ? `: in this run ${figures.join('; ')}` : ''}.`;
}

/** `report` with, under each section's heading, the load average when that section started. */
function withLoads(report: string): string {
  return report
    .split('\n')
    .flatMap((line) => {
      const key = SECTION_KEYS.find((candidate) => SECTION_HEADINGS[candidate] === line);
      const load = key === undefined ? undefined : sectionLoads[key];
      return load === undefined ? [line] : [line, '', `_1-minute load average when this section started: ${load.toFixed(2)}._`];
    })
    .join('\n');
}

interface ReportInput {
  http: { rows: HttpRow[]; pinned: boolean } | undefined;
  backends: BackendsResult | undefined;
  scaleOut: ScaleOutResult | undefined;
  script: ScriptBenchResult | undefined;
  algorithms: PgAlgorithmsResult | undefined;
  core: CoreBenchResult | undefined;
  memory: MemoryBenchResult | undefined;
  hostile: HostileBenchResult | undefined;
  list: ListBenchResult | undefined;
  observability: VariantResult[] | undefined;
  settings: typeof settings;
  quick: boolean;
}

function renderReport({ http, backends, scaleOut, script, algorithms, core, memory, hostile, list, observability, settings, quick }: ReportInput): string {
  const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const ratio = (n: number) => `${n.toFixed(2)}×`;
  const verdict = (ok: boolean) => (ok ? 'met' : '**missed**');
  const lines: string[] = [];
  const cpu = cpus();
  lines.push(
    '# Benchmarks',
    '',
    `Measured ${new Date().toISOString().slice(0, 10)} by \`npm run bench\`${quick ? ' (--quick: short runs, not for comparison)' : ''}.`,
    '',
    `Machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? 'unknown CPU'}, ${fmt(totalmem() / 2 ** 30, 1)} GiB, ${osType()} ${release()}, Node.js ${process.version}. A shared, noisy machine: compare ratios within one run, not absolute numbers across runs.`,
    '',
    `1-minute load average at the start of the run: ${loadAtStart.toFixed(2)}. Each section says how its servers and load generator were placed on the cores and the load average when it started (the run's own earlier sections count in it).`,
    '',
  );
  const budget: string[] = [];
  if (http) {
    const by = new Map(http.rows.map((row) => [row.name, row]));
    const rps = (name: HttpRow['name']) => by.get(name)?.requestsPerSecond ?? Number.NaN;
    const ceilingOf = (name: string) => (name.startsWith('fastify') ? 'fastify-bare' : 'express-bare');
    const peerOf = (name: string) =>
      name.endsWith('-redis') ? 'fastify-peer-redis' : name.startsWith('fastify') ? 'fastify-peer' : 'express-peer';
    lines.push(
      SECTION_HEADINGS.http,
      '',
      `autocannon, ${settings.connections} connections, ${settings.warmupSeconds} s warm-up per server, then ${settings.rounds} rounds × ${settings.durationSeconds} s visiting every server in turn; the median round is reported. ${http.pinned ? 'Servers pinned to core 0, autocannon to core 1 (taskset).' : 'No pinning was possible on this machine.'} The quota is large enough never to reject (non-200 answers: ${http.rows.reduce((sum, row) => sum + row.non2xx, 0)}). Ours enforces a minute and a day window per key; the peers one window. "Server CPU µs/req" is the server process's CPU time per answered request (median round): on this 2-core machine one autocannon core is often the bottleneck, so req/s understates differences between servers and CPU per request shows them.`,
      '',
      '| server | req/s (median) | p50 ms | p99 ms | × ceiling | × peer | server CPU µs/req | rounds (req/s) |',
      '|---|---:|---:|---:|---:|---:|---:|---|',
    );
    for (const row of http.rows) {
      const ceiling = rps(ceilingOf(row.name) as HttpRow['name']) || row.requestsPerSecond;
      const peer = row.name.includes('petstore') ? rps(peerOf(row.name) as HttpRow['name']) : undefined;
      lines.push(
        `| ${row.name} | ${fmt(row.requestsPerSecond)} | ${row.p50Ms} | ${row.p99Ms} | ${ratio(row.requestsPerSecond / ceiling)} | ${peer ? ratio(row.requestsPerSecond / peer) : '—'} | ${row.cpuMicrosPerRequest.toFixed(1)} | ${row.rounds.join(', ')} |`,
      );
    }
    lines.push('', 'Servers: `*-bare` is the framework route alone (no auth, no limits) — the ceiling; `*-petstore` is our adapter (memory storage, or Redis for `*-redis`); `fastify-peer` is @fastify/bearer-auth + @fastify/rate-limit; `express-peer` is a bearer check (SHA-256, constant-time) + express-rate-limit; `fastify-peer-redis` is @fastify/bearer-auth + @fastify/rate-limit with its Redis store. Redis rows keep categories in memory and rate limits in Redis.', '');
    const redisRows = http.rows.filter((row) => row.redisCommandsPerRequest !== undefined);
    if (redisRows.length > 0) {
      lines.push('Redis round trips per answered request (commands sent by the server\'s Redis client, counted at the client, over the measured rounds ÷ the answers with status 200; commands run inside a server-side script are not round trips; ours sends the consumes of one event-loop turn as one command):', '');
      for (const row of redisRows) lines.push(`- ${row.name}: ${(row.redisCommandsPerRequest as number).toFixed(3)}`);
      lines.push('');
    }
    budget.push(
      `- Fastify adapter ≥ 0.90× bare Fastify: ${ratio(rps('fastify-petstore') / rps('fastify-bare'))} — ${verdict(rps('fastify-petstore') >= 0.9 * rps('fastify-bare'))}`,
      `- Fastify adapter above the peer stack: ${ratio(rps('fastify-petstore') / rps('fastify-peer'))} — ${verdict(rps('fastify-petstore') > rps('fastify-peer'))}`,
      `- Express adapter ≥ 0.90× bare Express: ${ratio(rps('express-petstore') / rps('express-bare'))} — ${verdict(rps('express-petstore') >= 0.9 * rps('express-bare'))}`,
      `- Express adapter above the peer stack: ${ratio(rps('express-petstore') / rps('express-peer'))} — ${verdict(rps('express-petstore') > rps('express-peer'))}`,
      `- Redis: at most one round trip per admitted request: ${redisRows.filter((row) => row.name.includes('petstore')).map((row) => `${row.name} ${(row.redisCommandsPerRequest as number).toFixed(3)}`).join(', ')} — ${verdict(redisRows.filter((row) => row.name.includes('petstore')).every((row) => (row.redisCommandsPerRequest as number) <= 1.005))}`,
      `- Redis: above @fastify/rate-limit's Redis store: fastify ${ratio(rps('fastify-petstore-redis') / rps('fastify-peer-redis'))} — ${verdict(rps('fastify-petstore-redis') > rps('fastify-peer-redis'))}`,
    );
    // Server CPU per request (median rounds): what decides the servers' cost where autocannon's core, not the
    // server, bounds req/s.
    const cpuOf = (name: HttpRow['name']) => by.get(name)?.cpuMicrosPerRequest ?? Number.NaN;
    const cpuLine = (text: string, ours: HttpRow['name'], other: HttpRow['name'], meets: (ratioToOther: number) => boolean) => {
      const ratioToOther = cpuOf(ours) / cpuOf(other);
      return `- ${text}: ${cpuOf(ours).toFixed(1)} vs ${cpuOf(other).toFixed(1)} µs, ${ratio(ratioToOther)} — ${verdict(meets(ratioToOther))}`;
    };
    budget.push(
      cpuLine("Fastify adapter's server CPU per request at most the peer stack's", 'fastify-petstore', 'fastify-peer', (r) => r <= 1),
      cpuLine("Fastify adapter's server CPU per request at most 1.15× bare Fastify's", 'fastify-petstore', 'fastify-bare', (r) => r <= 1.15),
      cpuLine("Express adapter's server CPU per request below the peer stack's", 'express-petstore', 'express-peer', (r) => r < 1),
    );
  }
  if (backends) {
    const { rows, settings: run, postgres } = backends;
    const memoryRps = rows.find((row) => row.name === 'fastify-petstore')?.requestsPerSecond ?? Number.NaN;
    const micros = (n: number | undefined) => (n === undefined ? '—' : n.toFixed(1));
    const where = { memory: 'memory', redis: 'Redis', postgres: 'PostgreSQL' } as const;
    const apiKeysWhere = { static: 'static', 'managed-redis': 'managed, Redis', 'managed-postgres': 'managed, PostgreSQL' } as const;
    const staticMany = rows.find((row) => row.name === 'fastify-petstore-static-1000');
    const managed = rows.filter((row) => row.apiKeys !== 'static');
    const roundTrips = rows.filter((row) => row.redisCommandsPerRequest !== undefined || row.postgresStatementsPerRequest !== undefined);
    lines.push(
      SECTION_HEADINGS.backends,
      '',
      `Our Fastify adapter answering GET /v1/categories (authenticated, three categories, as in the HTTP table) with its categories and its rate limits (minute + day windows and the ban) in memory, in Redis ${backends.redisVersion} or in PostgreSQL ${postgres.version}, one server per process; autocannon, ${run.connections} connections, ${run.warmupSeconds} s warm-up per server, then ${run.rounds} rounds × ${run.durationSeconds} s visiting every server in turn; the median round is reported. ${backends.pinned ? 'Servers pinned to core 0, autocannon to core 1 (taskset); redis-server and PostgreSQL run on either core.' : 'No pinning was possible on this machine.'} One throwaway redis-server and one throwaway PostgreSQL (initdb defaults, fsync=${postgres.fsync}, synchronous_commit=${postgres.synchronousCommit}) on this machine. Each PostgreSQL server has a \`pg.Pool\` of ${postgres.poolSize} connections, and every store operation is one statement: the list versions read in one event-loop turn one SELECT (one MGET on Redis), each read sent after its requests asked; the consumes a server starts in one event-loop turn one call of the batch consume function (up to 32: lock each record's row once, in key order, decide its consumes in arrival order, update it, commit), and those of the turns while one runs wait for it and go together. The servers with one key in the keys column authenticate every request with one static API key, so all consumes go to one Redis key or one PostgreSQL row; the three with 1,000 spread the requests over 1,000 keys (below). "Server CPU" is the server process's CPU time per answered request; "Redis CPU" is redis-server's user + system time (\`INFO cpu\`) and "PostgreSQL CPU" that of the PostgreSQL server's processes (the postmaster, its backends and background processes: each one's run time in nanoseconds from /proc/<pid>/schedstat) over the round ÷ the answered requests; "total" is their sum (median of the rounds' sums), what one request costs the machine apart from the load generator. Non-200 answers: ${rows.reduce((sum, row) => sum + row.non2xx, 0)}.${postgres.fsync === 'off' ? ' With fsync off, commits do not wait for the disk; a PostgreSQL with fsync on also waits at every consume for its write-ahead log to reach the disk, which this table does not measure.' : ''}${backends.postgresCpuUnmeasured === undefined ? '' : ` PostgreSQL CPU not measured: ${backends.postgresCpuUnmeasured}.`}`,
      '',
      '| server | categories | rate limits | API keys | keys | req/s (median) | p50 ms | p99 ms | × memory | server CPU µs/req | Redis CPU µs/req | PostgreSQL CPU µs/req | total CPU µs/req | rounds (req/s) |',
      '|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
      ...rows.map(
        (row) =>
          `| ${row.name} | ${where[row.categories]} | ${where[row.rateLimits]} | ${apiKeysWhere[row.apiKeys]} | ${fmt(row.keys)} | ${fmt(row.requestsPerSecond)} | ${row.p50Ms} | ${row.p99Ms} | ${ratio(row.requestsPerSecond / memoryRps)} | ${micros(row.cpuMicrosPerRequest)} | ${micros(row.redisCpuMicrosPerRequest)} | ${micros(row.postgresCpuMicrosPerRequest)} | ${micros(row.totalCpuMicrosPerRequest)} | ${row.rounds.join(', ')} |`,
      ),
      '',
      "Database round trips per answered request (Redis commands counted at the server's client, PostgreSQL statements at its pool, over the measured rounds ÷ the answers with status 200):",
      '',
      ...roundTrips.map(
        (row) =>
          `- ${row.name}: ${[
            row.redisCommandsPerRequest === undefined ? '' : `${row.redisCommandsPerRequest.toFixed(3)} Redis`,
            row.postgresStatementsPerRequest === undefined ? '' : `${row.postgresStatementsPerRequest.toFixed(3)} PostgreSQL`,
          ]
            .filter(Boolean)
            .join(', ')}`,
      ),
      '',
      sameServersLine(rows, http?.rows),
      '',
    );
    // The stores' lists and consumes per event-loop turn: categories and rate limits both in the database.
    const allPostgres = rows.find((row) => row.name === 'fastify-petstore-postgres');
    if (allPostgres?.postgresStatementsPerRequest !== undefined) {
      const share = allPostgres.requestsPerSecond / memoryRps;
      const statements = allPostgres.postgresStatementsPerRequest;
      budget.push(`- PostgreSQL categories + limits ≥ 0.5× the memory server's req/s: ${ratio(share)} — ${verdict(share >= 0.5)}`);
      budget.push(`- PostgreSQL categories + limits ≤ 0.2 statements per request: ${statements.toFixed(3)} — ${verdict(statements <= 0.2)}`);
    }
    const allRedis = rows.find((row) => row.name === 'fastify-petstore-redis-all')?.redisCommandsPerRequest;
    if (allRedis !== undefined) budget.push(`- Redis categories + limits ≤ 0.2 commands per request: ${allRedis.toFixed(3)} — ${verdict(allRedis <= 0.2)}`);
    if (managed.length > 0 || staticMany !== undefined) {
      lines.push(
        `API keys at scale: the memory server (categories and rate limits in memory) authenticating with 1,000 static keys (\`staticApiKeys\`, \`fastify-petstore-static-1000\`) or with 1,000 managed keys (\`managedApiKeys\` with its default cache: 10,000 known and 10,000 unknown keys, 30 s and 10 s) over a Redis (\`redisApiKeyRecordStore\`) or PostgreSQL (\`postgresApiKeyRecordStore\`, the same pool as above) record store, which the managed keys were issued into before the servers started, each key of its own account. Each autocannon connection sends the 1,000 keys in turn, one after another (autocannon's \`requests\`), so each round spreads its requests evenly over them. A server's rounds are further apart than the cache's 30 s TTL, so before each round (not measured) every key is sent once: each round starts with the cache warm, as on a server under steady load. "Record lookups" are the calls of the record store's \`findByDigest\`, counted by a wrapper of the store in the server, over the measured rounds; Redis commands and PostgreSQL statements are counted as above. Target: managed keys within 10 % of static keys in server CPU per request.`,
        '',
      );
      const base = staticMany?.cpuMicrosPerRequest;
      for (const row of managed) {
        const cpuRatio = base === undefined ? undefined : row.cpuMicrosPerRequest / base;
        lines.push(
          `- ${row.name}: server CPU ${row.cpuMicrosPerRequest.toFixed(1)} µs/req${cpuRatio === undefined ? '' : ` vs ${(base as number).toFixed(1)} with 1,000 static keys, ${ratio(cpuRatio)}`}; ${fmt(row.apiKeyLookupsPer10k ?? Number.NaN, 2)} record lookups per 10,000 requests`,
        );
        if (cpuRatio !== undefined) {
          budget.push(
            `- Managed keys (${apiKeysWhere[row.apiKeys]}) within 10 % of static keys, server CPU per request, 1,000 keys: ${row.cpuMicrosPerRequest.toFixed(1)} vs ${(base as number).toFixed(1)} µs, ${ratio(cpuRatio)} — ${verdict(cpuRatio <= 1.1)}`,
          );
        }
      }
      lines.push(
        '',
        `Under steady load the cache fetches each key again once its 30 s TTL has passed (and at once when the store announces a change to it): 1,000 keys cost about ${fmt(1000 / 30, 0)} lookups per second whatever the load, i.e. ${managed.map((row) => `${fmt((1000 / 30 / row.requestsPerSecond) * 10_000, 1)} per 10,000 requests at ${row.name}'s ${fmt(row.requestsPerSecond)} req/s`).join(', ')} (computed from the TTL, not measured).`,
        '',
      );
    }
    if (backends.flood !== undefined) {
      const floods = backends.flood;
      const status = (counts: Record<number, number>) =>
        Object.entries(counts)
          .map(([code, count]) => `${fmt(count)} × ${code}`)
          .join(', ');
      lines.push(
        `Floods of unknown tokens (in process, through \`petstore.handle\`, ${fmt(floods[0]?.requests ?? 0)} requests one after another; a petstore whose only API keys are managed ones over the record store of the row, categories and rate limits in memory, the default anonymous limit (${DEFAULT_ANONYMOUS_LIMITS.requestsPerMinute} requests per minute per address) and ban; record lookups counted by a wrapper of the record store's \`findByDigest\`). "Random" tokens are shaped like managed keys (\`pet_\` and 38 base62 characters) but their checksum fails, each sent from its own address so no rate limit refuses it first; "unknown" ones are well-formed managed keys (valid checksum, made by rotating a key in a store of their own) that no record holds, all from one address.`,
        '',
        '| record store | tokens | requests | record lookups | answers | took s |',
        '|---|---|---:|---:|---|---:|',
        ...floods.map(
          (row) =>
            `| ${row.records === 'redis' ? 'Redis' : 'PostgreSQL'} | ${row.tokens === 'random' ? 'random (failed checksum), each from its own address' : 'well-formed unknown keys, one address'} | ${fmt(row.requests)} | ${fmt(row.lookups)} | ${status(row.statuses)} | ${(row.durationMs / 1000).toFixed(1)} |`,
        ),
        '',
      );
      for (const row of floods) {
        const limit = row.tokens === 'random' ? 0 : DEFAULT_ANONYMOUS_LIMITS.requestsPerMinute + 1;
        budget.push(
          `- Flood (${row.records === 'redis' ? 'Redis' : 'PostgreSQL'} records): ${fmt(row.requests)} ${row.tokens === 'random' ? 'random tokens cost no record lookup' : `well-formed unknown keys from one address cost at most the anonymous quota + 1 lookups (${limit})`}: ${fmt(row.lookups)} — ${verdict(row.lookups <= limit)}`,
        );
      }
    }
  }
  if (scaleOut) {
    const { rows, flood, settings: scale } = scaleOut;
    const row = (instances: number, name: string, keys: number) =>
      rows.find((candidate) => candidate.instances === instances && candidate.name === name && candidate.keys === keys) as (typeof rows)[number];
    lines.push(
      SECTION_HEADINGS.scaleout,
      '',
      `Ours (\`fastify-petstore-redis\`: minute + day windows and the ban, checked and charged atomically by the consume script; the consumes a process starts in one event-loop turn go to Redis as one call) against @fastify/rate-limit's Redis store (\`fastify-peer-redis\`: one window, no ban, one script call per request), and against the same peer with ioredis's \`enableAutoPipelining\` (\`fastify-peer-redis-pipelined\`: an option of the client its users can set, which sends the commands of one turn in one write). K server processes each loaded by its own autocannon (${scale.connections} connections) on one throwaway redis-server, every request on one hot API key, then spread over 1,000 keys (each connection cycles through them); ${scale.warmupSeconds} s warm-up, then ${scale.rounds} rounds × ${scale.durationSeconds} s visiting every setup in turn, median round. "Redis CPU µs/req" is the redis-server process's user + system time (\`INFO cpu\`) over the round ÷ the answered requests. No pinning: on this machine the K processes, their load and Redis share the cores, so req/s is bounded by the CPU all of them need per request; Redis CPU per request is the figure that decides how many Redis shards a fleet needs.`,
      '',
      '| keys | K | server | req/s (median, all K) | × peer | Redis CPU µs/req | × peer | rounds (req/s) |',
      '|---:|---:|---|---:|---:|---:|---:|---|',
    );
    for (const entry of rows) {
      const peer = row(entry.instances, 'fastify-peer-redis', entry.keys);
      const ours = entry.name === 'fastify-petstore-redis';
      lines.push(
        `| ${fmt(entry.keys)} | ${entry.instances} | ${entry.name} | ${fmt(entry.requestsPerSecond)} | ${ours ? ratio(entry.requestsPerSecond / peer.requestsPerSecond) : '—'} | ${entry.redisCpuMicrosPerRequest.toFixed(1)} | ${ours ? ratio(entry.redisCpuMicrosPerRequest / peer.redisCpuMicrosPerRequest) : '—'} | ${entry.rounds.join(', ')} |`,
      );
    }
    lines.push(
      '',
      `Non-200 answers during the scale-out rounds: ${rows.reduce((sum, entry) => sum + entry.non2xx, 0)}.`,
      '',
      "Redis calls for a banned key's flood (the engine with the Redis store, Free-like plan of 1 request per minute and the default ban; the key is banned first, then sends its requests one after another; calls counted at the client; with the block cache on, a banned key is answered from memory and Redis is asked again once per `blockCache.maxAgeMs`, so that a reset made on another instance is obeyed within it):",
      '',
      ...flood.map(
        (entry) =>
          `- block cache ${entry.blockCache ? `on (default, maxAgeMs ${fmt(entry.maxAgeMs)})` : 'off'}: ${fmt(entry.redisCalls)} Redis call${entry.redisCalls === 1 ? '' : 's'} for ${fmt(entry.requests)} requests in ${(entry.durationMs / 1000).toFixed(1)} s`,
      ),
      '',
    );
    for (const keys of [1, 1000]) {
      for (const instances of scaleOut.instanceCounts) {
        const ours = row(instances, 'fastify-petstore-redis', keys);
        const peer = row(instances, 'fastify-peer-redis', keys);
        const cpuRatio = ours.redisCpuMicrosPerRequest / peer.redisCpuMicrosPerRequest;
        const rpsRatio = ours.requestsPerSecond / peer.requestsPerSecond;
        const what = keys === 1 ? 'one hot key' : `${fmt(keys)} keys`;
        budget.push(
          `- Redis CPU per request ≤ 1.5× @fastify/rate-limit's, K = ${instances}, ${what}: ${ours.redisCpuMicrosPerRequest.toFixed(1)} vs ${peer.redisCpuMicrosPerRequest.toFixed(1)} µs, ${ratio(cpuRatio)} — ${verdict(cpuRatio <= 1.5)}`,
          `- Throughput with K = ${instances} instances ≥ the peer's, ${what}: ${ratio(rpsRatio)} — ${verdict(rpsRatio >= 1)}`,
        );
      }
    }
    const cached = flood.find((entry) => entry.blockCache);
    if (cached) {
      // One call per maxAgeMs at most: the first answer from memory starts the first period.
      const allowed = Math.ceil(cached.durationMs / cached.maxAgeMs);
      budget.push(
        `- A banned key's flood costs each process at most one Redis call per blockCache.maxAgeMs (${fmt(cached.maxAgeMs)} ms): ${cached.redisCalls} call${cached.redisCalls === 1 ? '' : 's'} for ${fmt(cached.requests)} requests in ${(cached.durationMs / 1000).toFixed(1)} s (at most ${allowed}) — ${verdict(cached.redisCalls <= allowed)}`,
      );
    }
  }
  if (script) {
    lines.push(
      SECTION_HEADINGS.script,
      '',
      `The redis-server process's CPU time (\`INFO cpu\`) per consume, ${fmt(script.calls)} calls per round from 20 connections, each sending one call at a time (P = 1, as an app server's client does) or 16 pipelined (P = 16, where the fixed cost of a command is shared and the script's own cost shows); the lowest of ${script.rounds} rounds (other load on a shared machine only adds time). Not pinned: redis-server and this process (the 20 connections) run on either core. Ours checks a minute and a day window and the ban at Redis's clock (TIME); a call of 8 consumes is what a batch of the consumes started in one event-loop turn looks like. The pieces are each measured alone on top of an empty script with the arguments of one consume: what a call costs before its script does anything, and what each Redis call or step inside our script adds.`,
      '',
      `| call | ${script.depths.map((depth) => `P = ${depth}: µs per consume`).join(' | ')} |`,
      `|---|${script.depths.map(() => '---:').join('|')}|`,
      ...script.rows.map((row) => `| ${row.name} | ${script.depths.map((depth) => (row.microsPerConsume[depth] as number).toFixed(2)).join(' | ')} |`),
      '',
    );
    const perConsume = (name: string) => script.rows.find((row) => row.name === name)?.microsPerConsume;
    const fixed = perConsume('ours, one consume per call');
    for (const algorithm of ['sliding', 'gcra'] as const) {
      const own = perConsume(`ours, one consume per call, ${algorithm} windows`);
      const ratios = script.depths.map((depth) => (own?.[depth] ?? Number.NaN) / (fixed?.[depth] ?? Number.NaN));
      budget.push(
        `- \`${algorithm}\` windows on Redis within 1.2× of fixed windows, redis-server CPU per consume (${script.depths.map((depth, index) => `P = ${depth}: ${ratio(ratios[index] as number)}`).join(', ')}) — ${verdict(ratios.every((value) => value <= 1.2))}`,
      );
    }
  }
  if (algorithms) {
    lines.push(
      SECTION_HEADINGS.algorithms,
      '',
      `The PostgreSQL rate-limit store (PostgreSQL ${algorithms.version}) consuming a minute and a day window counted by each algorithm (a quota no run uses up, no ban), one consume per statement and 16 per statement (the consumes of one event-loop turn share one); ${fmt(algorithms.consumes)} consumes per algorithm and round, ${algorithms.rounds} rounds visiting the three in turn, the median round. Not pinned: PostgreSQL and this process (its client) run on either core. "PostgreSQL CPU" is that of the PostgreSQL server's processes (each one's run time in nanoseconds, /proc/<pid>/schedstat; the clock ticks of /proc/<pid>/stat, 10 ms, would move a round of 16 per statement in steps of about 10 %) ÷ consumes. "× fixed" is each round's own ratio to fixed (the three algorithms ran one after another in the round, on the machine as it was then; a busy moment moves all three), the median of the rounds, and the rounds' lowest and highest. The last two columns take each algorithm's lowest round instead (other load on a shared machine only adds CPU time, so the lowest round is the one least disturbed; as the script rows above and \`bench:compare\` read it): its CPU, and its ratio to fixed's lowest round. Redis: the script rows of the section before; memory: the Core section.`,
      '',
      '| algorithm | consumes per statement | PostgreSQL CPU µs per decision (median round) | × fixed (median of rounds) | × fixed, lowest–highest round | PostgreSQL CPU µs per decision (lowest round) | × fixed (lowest rounds) |',
      '|---|---:|---:|---:|---:|---:|---:|',
    );
    for (const { algorithm, batch, micros, overFixed, overFixedRange: [low, high], lowestMicros, lowestOverFixed } of algorithms.rows) {
      lines.push(`| ${algorithm} | ${batch} | ${micros.toFixed(1)} | ${ratio(overFixed)} | ${ratio(low)}–${ratio(high)} | ${lowestMicros.toFixed(1)} | ${ratio(lowestOverFixed)} |`);
    }
    lines.push('');
    for (const algorithm of ['sliding', 'gcra'] as const) {
      const rows = algorithms.rows.filter((row) => row.algorithm === algorithm);
      budget.push(
        `- \`${algorithm}\` windows on PostgreSQL within 1.2× of fixed windows, PostgreSQL CPU per decision, median of the rounds' ratios (${rows.map((row) => `${row.batch} per statement: ${ratio(row.overFixed)}`).join(', ')}) — ${verdict(rows.every((row) => row.overFixed <= 1.2))}`,
      );
    }
  }
  if (core) {
    lines.push(
      SECTION_HEADINGS.core,
      '',
      'Ours: `memoryRateLimitStore().consume` (both windows checked and charged atomically), with fixed windows (the default), and with sliding and gcra windows (`rateLimit.algorithm`). Peer: rate-limiter-flexible `RateLimiterMemory`, one limiter per window, both consumed per decision. tinybench, median; every contender in each round, interleaved. One process, not pinned.',
      '',
      '| implementation | keys | decisions/s (median) | ± % | samples |',
      '|---|---:|---:|---:|---:|',
    );
    for (const row of core.rows) lines.push(`| ${row.name} | ${fmt(row.keys)} | ${fmt(row.opsPerSecond)} | ${row.rme.toFixed(1)} | ${row.samples} |`);
    lines.push('');
    for (const { keys, oursOverPeer } of core.ratios) {
      budget.push(`- Core ≥ 1.5× rate-limiter-flexible over ${fmt(keys)} keys: ${ratio(oursOverPeer)} — ${verdict(oursOverPeer >= 1.5)}`);
    }
    for (const { keys, sliding, gcra } of core.algorithms) {
      lines.push(`- CPU per decision against fixed windows over ${fmt(keys)} keys (same run): sliding ${ratio(sliding)}, gcra ${ratio(gcra)}.`);
    }
    lines.push('');
  }
  if (memory) {
    lines.push(
      SECTION_HEADINGS.memory,
      '',
      `- Heap per tracked key with ${fmt(memory.keys)} keys (minute + day counters, key \`key:<22 chars>\`): **${fmt(memory.heapBytesPerKey)} bytes**.`,
      `- Flood: ${fmt(memory.flood.inserted)} distinct keys into a store with maxKeys ${fmt(memory.flood.maxKeys)} → ${fmt(memory.flood.sizeAfter)} keys held, ${fmt(memory.flood.heapBytesPerKeyAtMax)} heap bytes per key at the maximum.`,
      `- Creating a petstore on \`memoryCategoryStore()\` and \`memoryRateLimitStore()\` (default bounds: 100,000 rate-limit keys, a second store like it for anonymous callers, 10,000 categories, 100,000 idempotency keys), before its first request: **${fmt(memory.creation.cpuMicros)} µs** of CPU and **${fmt(memory.creation.bytes / 1024)} KiB** held (JS heap + ArrayBuffers, ${fmt(memory.creation.count)} petstores kept). The stores' and the core's caches are bounded by lru-cache's \`maxSize\` with a size of 1 per entry, which allocates as entries come (bounded by \`max\`, lru-cache allocates its arrays for every entry when a cache is created).`,
      '',
    );
    budget.push(
      `- Memory store: ${fmt(memory.heapBytesPerKey)} bytes per tracked key; no growth past maxKeys under a flood (${fmt(memory.flood.sizeAfter)} of ${fmt(memory.flood.maxKeys)}) — ${verdict(memory.flood.sizeAfter <= memory.flood.maxKeys)}`,
    );
  }
  if (hostile) {
    const ms = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : '—');
    const cell = (server: string, shape: string) => hostile.cells[server as keyof typeof hostile.cells][shape];
    lines.push(
      SECTION_HEADINGS.hostile,
      '',
      `Bodies of (just under) 1 MiB — the body limit — built to make a server work hard, beside the largest bodies that pass the bounds and a normal small create; valid key with a quota that never rejects, \`Content-Type: application/json\`, our adapters with memory storage. Requests one at a time on one keep-alive connection; ${hostile.warmupRequests} warm-up request(s) per body, then ${hostile.rounds} rounds × ${hostile.requestsPerRound} requests per body, every round visiting every server and body in turn. "CPU ms/req" is the server process's CPU time per request (user + system, read over IPC around each round, less ${hostile.statsOverheadMicros.toFixed(0)} µs for reading it; median round); "wall ms/req" the time from sending the request to reading the answer at the client (median request). ${hostile.pinned ? 'Servers pinned to core 0, the client to core 1 (taskset).' : 'No pinning was possible on this machine.'} Took ${hostile.seconds.toFixed(0)} s.`,
      '',
      `| body | bytes | answer | ${hostile.servers.map((server) => `${server} CPU ms/req | ${server} wall ms/req`).join(' | ')} |`,
      `|---|---:|---|${hostile.servers.map(() => '---:|---:').join('|')}|`,
    );
    for (const shape of hostile.shapes) {
      const seen = [...new Set(hostile.servers.flatMap((server) => cell(server, shape.name)?.answers ?? []))];
      const answer =
        seen.length === 1 && seen[0] === shape.expected
          ? shape.expected
          : `**unexpected:** ${hostile.servers.map((server) => `${server} ${(cell(server, shape.name)?.answers ?? []).join(' / ')}`).join('; ')} (documented: ${shape.expected})`;
      lines.push(
        `| ${shape.name} | ${fmt(shape.bytes)} | ${answer} | ${hostile.servers.map((server) => `${ms(cell(server, shape.name)?.cpuMs ?? Number.NaN, 3)} | ${ms(cell(server, shape.name)?.wallMs ?? Number.NaN)}`).join(' | ')} |`,
      );
    }
    const concurrent = hostile.servers.map((server) => hostile.concurrent[server as keyof typeof hostile.concurrent]);
    const getAnswers = [...new Set(concurrent.flatMap((get) => get.answers))];
    lines.push(
      `| GET /v1/categories on a second connection while the hostile bodies are sent: latency p50 / max | — | ${getAnswers.length === 1 && getAnswers[0] === '200' ? '200' : `**unexpected:** ${getAnswers.join(' / ')} (documented: 200)`} | ${concurrent.map((get) => `— | ${ms(get.underHostile.p50Ms)} / ${ms(get.underHostile.maxMs)}`).join(' | ')} |`,
      '',
      `The GET row: GET /v1/categories (three categories; it runs before any create) sent one at a time on a second connection while the hostile bodies that create nothing are sent one at a time on the first — each GET waits for the body being handled, so its worst case follows the costliest body. ${hostile.servers
        .map((server, index) => {
          const get = concurrent[index] as (typeof concurrent)[number];
          return `${server}: ${fmt(get.underHostile.requests)} GETs during ${fmt(get.underHostile.hostileRequests)} hostile bodies, the slowest sent during "${get.underHostile.maxDuring}"; alone, p50 ${ms(get.alone.p50Ms)} ms, max ${ms(get.alone.maxMs)} ms over ${fmt(get.alone.requests)} GETs.`;
        })
        .join(' ')} Server CPU counts every thread of the process (V8 collects garbage on helper threads), so it can exceed the wall time; a sequential request costs far more CPU than one of a loaded keep-alive stream (compare the normal small create with the HTTP table).`,
      '',
    );
    const worst = hostile.worst;
    const unexpected = hostile.shapes
      .filter((shape) => hostile.servers.some((server) => (cell(server, shape.name)?.answers ?? []).some((answer) => answer !== shape.expected)))
      .map((shape) => shape.name);
    if (getAnswers.some((answer) => answer !== '200')) unexpected.push('concurrent GET');
    budget.push(
      `- Worst 1 MiB body: ${worst.shape} ${ms(worst.cpuMs)} ms server CPU per request (${worst.server}) — met if < 100 ms: ${verdict(worst.cpuMs < 100)}`,
      `- Every hostile body answered as documented (bounds refuse, status and code): ${unexpected.length === 0 ? 'all' : unexpected.join(', ')} — ${verdict(unexpected.length === 0)}`,
    );
  }
  if (list) {
    const us = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '—' : fmt(n, n < 100 ? 1 : 0));
    const row = (store: string, request: string) => list.rows.find((entry) => entry.store === store && entry.request === request);
    lines.push(
      SECTION_HEADINGS.list,
      '',
      `GET /v1/categories with ${fmt(list.categories)} categories (names \`category <n>\`, every second one with a description), in process through \`petstore.handle\` (no HTTP framing; the rate limit in memory; not pinned: this process and the store's server run on either core), one request at a time: ${list.rounds} rounds of ${Object.entries(list.requestsPerRound).map(([request, count]) => `${fmt(count)} × ${request}`).join(', ')}, every round visiting every store and request in turn (after a warm-up round of a tenth); the median round is reported. "App CPU" is this process's user + system time per request, the store client's work included; "store CPU" is redis-server's (\`INFO cpu\`, Redis ${list.redisVersion}) or the PostgreSQL ${list.postgresVersion} server processes' (/proc), per request; for memory the store is inside the app. "full list, no listVersion" is the core with a store that has no \`listVersion\` (tagged by a hash of the body): on Redis and PostgreSQL it reads and serialises the list for every request, what every full list cost before ETags; the memory store answers one frozen array until the next create, whose JSON and tag the core reuses, as it reused the JSON before ETags. PostgreSQL's CPU is counted in clock ticks (10 ms), so its small per-request figures are coarse. "page of 100" asks for \`?limit=100&after=<random>\`; the 304 rows send the current tag in \`If-None-Match\`. Seeded directly (memory: its \`create\`; Redis: pipelined \`HSET\`; PostgreSQL: one \`INSERT … SELECT FROM generate_series\`), not through the API. Took ${fmt(list.seconds)} s.${list.postgresCpuUnmeasured === undefined ? '' : ` PostgreSQL CPU not measured: ${list.postgresCpuUnmeasured}.`}`,
      '',
      '| store | request | status | body bytes | app CPU µs/req | store CPU µs/req |',
      '|---|---|---|---:|---:|---:|',
      ...list.rows.map(
        (entry) =>
          `| ${entry.store} | ${entry.request} | ${entry.statuses.join(' / ')} | ${fmt(entry.bodyBytes)} | ${us(entry.appMicros)} | ${entry.store === 'memory' ? '(in app)' : us(entry.storeMicros)} |`,
      ),
      '',
    );
    // Memory answers one frozen array, whose JSON the core reused before ETags too: no read-and-serialise to compare with.
    for (const store of ['redis', 'postgres']) {
      const before = row(store, 'full list, no listVersion');
      const cached = row(store, 'full list');
      const notModified = row(store, '304 full list');
      const page = row(store, 'page of 100');
      if (before === undefined || cached === undefined || notModified === undefined || page === undefined) continue;
      const total = (entry: typeof before) => entry.appMicros + (entry.storeMicros ?? 0);
      budget.push(
        `- List: ${store}, ${fmt(list.categories)} categories, app + store CPU per request against a full list read and serialised (${us(total(before))} µs): an unchanged full list ${us(total(cached))} µs (${fmt(total(before) / total(cached))}× less), a 304 ${us(total(notModified))} µs (${fmt(total(before) / total(notModified))}× less, ${fmt(notModified.bodyBytes)} body bytes instead of ${fmt(before.bodyBytes)}), a page of 100 ${us(total(page))} µs (${fmt(total(before) / total(page))}× less)`,
      );
    }
  }
  if (observability) {
    const none = observability.find((result) => result.name === 'no subscriber') as VariantResult;
    const baseline = observability.find((result) => result.name.startsWith('baseline'));
    lines.push(
      SECTION_HEADINGS.observability,
      '',
      `CPU per request of the pipeline alone (\`petstore.handle\` called in process as the adapters call it: an authenticated GET /v1/categories, three categories, memory stores), with nothing subscribed to the core's diagnostics channels, with a subscriber that does nothing on both (the contexts and \`tracePromise\` alone), and with \`@petstore/opentelemetry\` recording into the OpenTelemetry SDK (metrics: a MeterProvider aggregating, never exported here; spans: a BasicTracerProvider sampling every span, exporting none). One process, not pinned, ${observability[0]?.rounds.length ?? 0} interleaved rounds (benchmarks/src/observability-bench.ts), median ns per request of each round, then the median round.${baseline ? ' The baseline row is the core of the commit before the channels, built from its sources with tsup into a folder outside the workspace and loaded with PETSTORE_BASELINE_CORE, on the same memory stores.' : ''}`,
      '',
      '| variant | ns/request (median) | × no subscriber | rounds (ns/request) |',
      '|---|---:|---:|---|',
      ...observability.map((result) => `| ${result.name} | ${fmt(result.medianNs)} | ${ratio(result.medianNs / none.medianNs)} | ${result.rounds.map((ns) => fmt(ns)).join(', ')} |`),
      '',
      'Per measurement the OpenTelemetry SDK hashes the attributes into a key (`hashAttributes`, a JSON string): a request records five measurements (its duration, its rate-limit decision, three store calls), which is where the metrics row spends its time. Spans add an `AsyncLocalStorage` bound to the request channel (to make store calls children of their request), which slows every promise of the process on Node 20 and 22.',
      '',
    );
    if (baseline) {
      const ratioToBaseline = none.medianNs / baseline.medianNs;
      budget.push(`- Observability: no subscriber ${ratio(ratioToBaseline)} the baseline core's CPU per request — met if within noise (≤ 1.05×): ${verdict(ratioToBaseline <= 1.05)}`);
    }
  }
  lines.push('## Budget', '', ...budget, '');
  return lines.join('\n');
}

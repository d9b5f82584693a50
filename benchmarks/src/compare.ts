/**
 * `npm run bench:compare -- <base commit> [servers] [--rounds=7] [--seconds=5] [--connections=50]`: the HTTP
 * benchmark of two commits in one interleaved run, for a before/after figure.
 *
 * Both commits' benchmark servers (benchmarks/src/server-entry.ts) are bundled from their sources with esbuild, the
 * base one from `git archive <base commit>` in a temporary directory (its `@petstore/*` imports resolved to its own
 * packages' sources; third-party packages from this checkout's node_modules). Each server runs alone in its own
 * process pinned to core 0, autocannon in this process pinned to core 1; every round visits every server in turn,
 * every other round in reverse order (so the drift of a noisy machine, and what one server's load leaves to the next,
 * spread over all of them), and the table shows medians of the rounds and each server's lowest round (noise only adds
 * CPU time: of one commit against itself, 11 rounds, the medians came 9.4 % apart, the lowest rounds 1.8 %), then each
 * petstore server's CPU over its base's, its peer's and bare's round by round (the median of those ratios). The
 * petstore servers run in both versions (`base:<name>`), the peer and bare servers once.
 *
 * Servers on Redis or PostgreSQL (`fastify-petstore-postgres`, …) get a throwaway redis-server or PostgreSQL
 * (`resolveTestRedis`, `resolveTestPostgres`: `REDIS_URL` / `DATABASE_URL` when set). Each commit gets a schema (and a
 * Redis key prefix) of its own, migrated and seeded by that commit's own code (its `seedPostgres`, bundled like its
 * servers), so a change to the SQL is measured too. Their rows add the statements or commands sent per answered
 * request, and the PostgreSQL server's CPU per answered request (its processes' CPU while that server alone was under
 * load, /proc in nanoseconds; one server runs at a time).
 *
 * Default servers: fastify-petstore, fastify-peer, fastify-bare, express-petstore, express-peer, express-bare.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { load, median, pinSelf, serverStats, startServerProcess, unpinSelf } from './http-bench.js';
import { resolveTestPostgres } from '@petstore/storage-postgres/testing';
import { postgresCpu } from './backends-bench.js';
import { resolveTestRedis } from '@petstore/storage-redis/testing';
import pg from 'pg';
import { SERVER_NAMES, seedPostgres, serverNeeds, type ServerDatabases, type ServerName } from './servers.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const args = process.argv.slice(2);
const option = (name: string, fallback: number) => Number(args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
const [base, list] = args.filter((arg) => !arg.startsWith('--'));
if (base === undefined) {
  console.error('usage: npm run bench:compare -- <base commit> [server,server,…] [--rounds=7] [--seconds=5] [--connections=50]');
  process.exit(2);
}
const rounds = option('rounds', 7);
const seconds = option('seconds', 5);
const connections = option('connections', 50);
const names = (list ?? 'fastify-petstore,fastify-peer,fastify-bare,express-petstore,express-peer,express-bare').split(',') as ServerName[];
const unknown = names.filter((name) => !SERVER_NAMES.includes(name));
if (unknown.length > 0) throw new Error(`unknown server(s) ${unknown.join(', ')}; known: ${SERVER_NAMES.join(', ')}`);
const log = (line: string) => console.error(`[compare] ${line}`);

/** Resolves `@petstore/<package>[/<entry>]` to that package's source in `tree` (src/index.ts, src/<entry>.ts or src/<entry>/index.ts). */
function sourcesOf(tree: string): Plugin {
  return {
    name: 'petstore-sources',
    setup(builder) {
      builder.onResolve({ filter: /^@petstore\/[^/]+(?:\/.+)?$/ }, (resolve) => {
        const [, name, entry] = /^@petstore\/([^/]+)(?:\/(.+))?$/.exec(resolve.path) as RegExpExecArray;
        const directory = join(tree, 'packages', name as string);
        const candidates = entry === undefined ? ['src/index.ts'] : [`src/${entry}.ts`, `src/${entry}/index.ts`];
        const found = candidates.map((candidate) => join(directory, candidate)).find((path) => existsSync(path));
        return found === undefined ? undefined : { path: found };
      });
    },
  };
}

async function bundle(tree: string, outfile: string, entry = 'benchmarks/src/server-entry.ts'): Promise<void> {
  await build({
    entryPoints: [join(tree, entry)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile,
    plugins: [sourcesOf(tree)],
    nodePaths: [join(root, 'node_modules')],
    // Bundled CommonJS dependencies call require().
    banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
    logLevel: 'error',
  });
}


const work = mkdtempSync(join(tmpdir(), 'petstore-compare-'));
const servers = new Map<string, { port: number; child: ChildProcess }>();
const needs = { redis: names.some((name) => serverNeeds(name).redis), postgres: names.some((name) => serverNeeds(name).postgres) };
const stops: Array<() => Promise<void>> = [];
try {
  const databases: ServerDatabases = {};
  const baseDatabases: ServerDatabases = {};
  const baseTree = join(work, 'base');
  execFileSync('mkdir', ['-p', baseTree]);
  execFileSync('sh', ['-c', `git -C "${root}" archive "$1" | tar -x -C "${baseTree}"`, 'archive', base]);
  if (needs.redis) {
    const redis = await resolveTestRedis();
    if ('skipReason' in redis) throw new Error(`these servers need Redis: ${redis.skipReason}`);
    stops.push(() => redis.stop());
    const prefix = `petstore_compare_${randomBytes(4).toString('hex')}`;
    Object.assign(databases, { redisUrl: redis.url, redisKeyPrefix: `${prefix}:` });
    Object.assign(baseDatabases, { redisUrl: redis.url, redisKeyPrefix: `${prefix}_base:` });
  }
  let postgresMicros: (() => number) | undefined;
  if (needs.postgres) {
    const postgres = await resolveTestPostgres();
    if ('skipReason' in postgres) throw new Error(`these servers need PostgreSQL: ${postgres.skipReason}`);
    stops.push(() => postgres.stop());
    const schema = `petstore_compare_${randomBytes(4).toString('hex')}`;
    const pool = new pg.Pool({ connectionString: postgres.url, max: 1 });
    stops.unshift(() => pool.end());
    await seedPostgres(pool, schema);
    // The base commit's schema, migrated and seeded by the base commit's own code.
    await bundle(baseTree, join(work, 'base.seed.mjs'), 'benchmarks/src/servers.ts');
    const baseSeed = (await import(join(work, 'base.seed.mjs'))) as { seedPostgres: typeof seedPostgres };
    await baseSeed.seedPostgres(pool, `${schema}_base`);
    databases.postgres = { url: postgres.url, schema };
    baseDatabases.postgres = { url: postgres.url, schema: `${schema}_base` };
    const cpu = await postgresCpu(pool, postgres.url);
    if ('postmaster' in cpu) postgresMicros = () => cpu.micros();
    else log(`the PostgreSQL server's CPU is not measured: ${cpu.reason}`);
  }
  const baseCommit = execFileSync('git', ['-C', root, 'rev-parse', '--short', base], { encoding: 'utf8' }).trim();
  const headCommit = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const dirty = execFileSync('git', ['-C', root, 'status', '--porcelain', '--', 'packages', 'benchmarks'], { encoding: 'utf8' }).trim() !== '';
  log(`bundling ${baseCommit} and the working tree (${headCommit}${dirty ? ' with uncommitted changes' : ''})`);
  await bundle(baseTree, join(work, 'base.bundle.mjs'));
  await bundle(root, join(work, 'head.bundle.mjs'));

  const runs: Array<{ label: string; name: ServerName; bundlePath: string }> = [];
  for (const name of names) {
    if (name.includes('petstore')) runs.push({ label: `base:${name}`, name, bundlePath: join(work, 'base.bundle.mjs') });
    runs.push({ label: name, name, bundlePath: join(work, 'head.bundle.mjs') });
  }
  const [load1] = loadavg();
  const pinned = pinSelf(1);
  if (!pinned) log('taskset is missing: the servers and the load generator are not pinned');
  for (const run of runs) {
    const forRun = run.label.startsWith('base:') ? baseDatabases : databases;
    servers.set(run.label, await startServerProcess(run.name, forRun, pinned ? 0 : undefined, 1, run.bundlePath));
  }
  for (const run of runs) {
    log(`warm-up ${run.label}`);
    await load((servers.get(run.label) as { port: number }).port, 3, connections);
  }
  /** One server's rounds: req/s, its CPU and PostgreSQL's per answered request, and its totals. */
  type Sample = { rps: number[]; cpu: number[]; postgresCpu: number[]; non2xx: number; roundTrips: number; answers: number };
  const samples = new Map(runs.map((run): [string, Sample] => [run.label, { rps: [], cpu: [], postgresCpu: [], non2xx: 0, roundTrips: 0, answers: 0 }]));
  for (let round = 1; round <= rounds; round++) {
    // Every other round visits the servers in reverse order, so that none always follows the same one: work one server
    // leaves to the database (WAL writing, vacuum) falls on the next one's period, and a fixed order would always
    // charge it to the same server (an earlier run of one commit against itself showed 69 vs 77 µs of PostgreSQL CPU).
    for (const run of round % 2 === 1 ? runs : [...runs].reverse()) {
      const { port, child } = servers.get(run.label) as { port: number; child: ChildProcess };
      const sample = samples.get(run.label) as Sample;
      const before = await serverStats(child);
      const postgresBefore = postgresMicros?.();
      const result = await load(port, seconds, connections);
      const postgresAfter = postgresMicros?.();
      const after = await serverStats(child);
      sample.rps.push(result.requests.average);
      sample.cpu.push((after.cpuMicros - before.cpuMicros) / result['2xx']);
      if (postgresBefore !== undefined && postgresAfter !== undefined) sample.postgresCpu.push((postgresAfter - postgresBefore) / result['2xx']);
      sample.non2xx += result.non2xx + result.errors;
      sample.roundTrips += after.redisCommands - before.redisCommands + after.postgresStatements - before.postgresStatements;
      sample.answers += result['2xx'];
      const postgresPart = postgresBefore === undefined || !serverNeeds(run.name).postgres ? '' : `, PostgreSQL ${sample.postgresCpu.at(-1)?.toFixed(2)} µs`;
      log(`round ${round} ${run.label}: ${Math.round(result.requests.average)} req/s, ${sample.cpu.at(-1)?.toFixed(2)} µs CPU per request${postgresPart}`);
    }
  }
  unpinSelf();

  const cpuOf = (label: string) => median((samples.get(label) as Sample).cpu);
  // Other load on a shared machine (a neighbour, a CPU taken by the hypervisor) only adds CPU time to a round: the
  // lowest round is the one it disturbed least.
  const lowestCpuOf = (label: string) => Math.min(...(samples.get(label) as Sample).cpu);
  console.log(`\nBase ${baseCommit}, head ${headCommit}${dirty ? ' + working tree' : ''}; ${rounds} interleaved rounds of ${seconds} s, ${connections} connections;`);
  console.log(
    pinned
      ? `each server alone on core 0, autocannon on core 1 (taskset); 1-minute load average at the start ${load1?.toFixed(2)}.\n`
      : `not pinned (no taskset); 1-minute load average at the start ${load1?.toFixed(2)}.\n`,
  );
  const withDatabases = needs.redis || needs.postgres;
  const withPostgresCpu = postgresMicros !== undefined;
  console.log(
    `| server | req/s (median) | server CPU µs/request (median) | CPU vs base | server CPU µs/request (lowest round) | lowest vs base | non-2xx |${withDatabases ? ' database round trips/request |' : ''}${withPostgresCpu ? ' PostgreSQL CPU µs/request (median) |' : ''}`,
  );
  console.log(`|---|---:|---:|---:|---:|---:|---:|${withDatabases ? '---:|' : ''}${withPostgresCpu ? '---:|' : ''}`);
  for (const run of runs) {
    const sample = samples.get(run.label) as Sample;
    const baseLabel = `base:${run.name}`;
    const withBase = run.label !== baseLabel && samples.has(baseLabel);
    const versus = withBase ? `${(cpuOf(run.label) / cpuOf(baseLabel)).toFixed(3)}×` : '';
    const lowestVersus = withBase ? `${(lowestCpuOf(run.label) / lowestCpuOf(baseLabel)).toFixed(3)}×` : '';
    const { redis, postgres } = serverNeeds(run.name);
    const roundTrips = !withDatabases ? '' : redis || postgres ? ` ${(sample.roundTrips / sample.answers).toFixed(3)} |` : ' — |';
    const postgresCpuCell = !withPostgresCpu ? '' : postgres ? ` ${median(sample.postgresCpu).toFixed(2)} |` : ' — |';
    console.log(
      `| ${run.label} | ${Math.round(median(sample.rps))} | ${cpuOf(run.label).toFixed(2)} | ${versus} | ${lowestCpuOf(run.label).toFixed(2)} | ${lowestVersus} | ${sample.non2xx} |${roundTrips}${postgresCpuCell}`,
    );
  }
  // The rounds paired: a server's CPU in a round over another's in the same round (a few seconds apart), so that what
  // the machine does for minutes (a neighbour's batch job, a CI run) divides out.
  const pairs = runs.flatMap((run) => {
    if (run.label.startsWith('base:') || !run.name.includes('petstore')) return [];
    const framework = run.name.split('-')[0] as string;
    return [`base:${run.name}`, `${framework}-peer`, `${framework}-bare`].filter((other) => samples.has(other)).map((other) => [run.label, other] as const);
  });
  if (pairs.length > 0) {
    console.log('\nThe same rounds paired (server CPU per request of one over the other in each round; PostgreSQL\'s too where both use it):\n');
    console.log(`| servers | median of the rounds' ratios | lowest | highest |${withPostgresCpu ? ' PostgreSQL CPU: median of the rounds\' ratios |' : ''}`);
    console.log(`|---|---:|---:|---:|${withPostgresCpu ? '---:|' : ''}`);
    /** Each round's figure of `label` over that of `other`. */
    const ratiosOf = (label: string, other: string, figure: 'cpu' | 'postgresCpu') => {
      const theirs = (samples.get(other) as Sample)[figure];
      return (samples.get(label) as Sample)[figure].map((value, index) => value / (theirs[index] as number));
    };
    for (const [label, other] of pairs) {
      const ratios = ratiosOf(label, other, 'cpu');
      const postgresRatios = ratiosOf(label, other, 'postgresCpu');
      const bothUsePostgres = [label, other].every((server) => serverNeeds(server.replace(/^base:/, '') as ServerName).postgres);
      const postgresCell = !withPostgresCpu ? '' : bothUsePostgres && postgresRatios.length === rounds ? ` ${median(postgresRatios).toFixed(3)}× |` : ' — |';
      console.log(`| ${label} ÷ ${other} | ${median(ratios).toFixed(3)}× | ${Math.min(...ratios).toFixed(3)}× | ${Math.max(...ratios).toFixed(3)}× |${postgresCell}`);
    }
  }
} finally {
  // Servers first: their pools and clients close before the databases stop.
  const exits = [...servers.values()].map(({ child }) => new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined))));
  for (const { child } of servers.values()) child.kill('SIGTERM');
  await Promise.all(exits);
  for (const stop of stops) await stop();
  rmSync(work, { recursive: true, force: true });
}

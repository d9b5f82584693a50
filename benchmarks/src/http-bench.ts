/**
 * The HTTP benchmark: every server in its own process pinned to one core, autocannon in this process pinned
 * to the other; a warm-up per server, then rounds that visit every server in turn (so drift of a noisy
 * machine spreads over all of them), and the median of the rounds.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { BACKENDS_ONLY_SERVERS, BENCH_KEY, SERVER_NAMES, serverNeeds, type ServerDatabases, type ServerName } from './servers.js';

/** One server's result: medians over the rounds. */
export interface HttpRow {
  name: ServerName;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Every round's requests/s, for the record. */
  rounds: number[];
  /** Answers other than 200 during the measured rounds (must be 0). */
  non2xx: number;
  /**
   * Server CPU time (user + system) per answered request, µs, median of the rounds. Unlike req/s it does not
   * depend on whether the load generator or the server is the bottleneck.
   */
  cpuMicrosPerRequest: number;
  /** Redis commands (round trips) the server's client sent per answered request (Redis servers only). */
  redisCommandsPerRequest?: number;
}

export interface HttpBenchOptions {
  redisUrl: string;
  rounds: number;
  durationSeconds: number;
  warmupSeconds: number;
  connections: number;
}

const hasTaskset = (() => {
  try {
    execFileSync('taskset', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** Pins this process (all its threads) to `cpu` when the machine has taskset and more than one core. */
export function pinSelf(cpu: number): boolean {
  if (!hasTaskset) return false;
  try {
    execFileSync('taskset', ['-a', '-cp', String(cpu), String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Lets this process (all its threads) run on every core again. Each section that pins itself calls it when done:
 * processes started later (the scale-out section's app servers and Redis) inherit this process's cores.
 */
export function unpinSelf(): void {
  if (!hasTaskset) return;
  try {
    execFileSync('taskset', ['-a', '-cp', `0-${cpus().length - 1}`, String(process.pid)], { stdio: 'ignore' });
  } catch {
    // nothing was pinned
  }
}

const entry = fileURLToPath(new URL('./server-entry.ts', import.meta.url));

/**
 * Starts one benchmark server in its own process (pinned to `cpu` when given); answers its port and the child,
 * which answers {@link serverStats} over IPC. `databases.redisUrl` is needed by the `*-redis` servers only,
 * `databases.postgres` by the `*-postgres*` ones. `bundle`: a bundled server entry to run with Node alone (see
 * compare.ts) instead of this checkout's server-entry.ts under tsx.
 */
export function startServerProcess(
  name: ServerName,
  databases: ServerDatabases,
  cpu: number | undefined,
  keyCount = 1,
  bundle?: string,
): Promise<{ port: number; child: ChildProcess }> {
  const node = bundle === undefined ? [process.execPath, '--import', 'tsx', entry] : [process.execPath, bundle];
  const [command, ...args] = cpu === undefined ? node : ['taskset', '-c', String(cpu), ...node];
  const { redisUrl, redisKeyPrefix, postgres } = databases;
  const child = spawn(command as string, args, {
    env: {
      ...process.env,
      BENCH_SERVER: name,
      BENCH_KEYS: String(keyCount),
      ...(redisUrl === undefined ? {} : { REDIS_URL: redisUrl }),
      ...(redisKeyPrefix === undefined ? {} : { REDIS_KEY_PREFIX: redisKeyPrefix }),
      ...(postgres === undefined ? {} : { POSTGRES_URL: postgres.url, POSTGRES_SCHEMA: postgres.schema }),
      NODE_ENV: 'production',
    },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const port = /READY (\d+)/.exec(output)?.[1];
      if (port) resolve({ port: Number(port), child });
    });
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code}: ${output}`)));
  });
}

/**
 * `connections` autocannon connections sending GET /v1/categories for `seconds`, with {@link BENCH_KEY}, or with
 * `keys` when given: each connection sends them in turn, one key after another (autocannon's `requests`).
 */
export function load(port: number, seconds: number, connections: number, keys?: readonly string[]): Promise<autocannon.Result> {
  if (keys !== undefined) {
    const requests = keys.map((key) => ({ method: 'GET' as const, path: '/v1/categories', headers: { authorization: `Bearer ${key}` } }));
    return autocannon({ url: `http://127.0.0.1:${port}`, requests, connections, duration: seconds });
  }
  return autocannon({
    url: `http://127.0.0.1:${port}/v1/categories`,
    headers: { authorization: `Bearer ${BENCH_KEY}` },
    connections,
    duration: seconds,
  });
}

/** A server's counters so far (asked over IPC). */
export interface ServerStats {
  /** Redis commands its client sent. */
  redisCommands: number;
  /** Statements its `pg.Pool` ran. */
  postgresStatements: number;
  /** Calls of its managed keys' record store's `findByDigest` (0 with static keys). */
  apiKeyLookups: number;
  /** Its CPU time (user + system), µs. */
  cpuMicros: number;
}

/** A server's {@link ServerStats} so far, asked over IPC. */
export function serverStats(child: ChildProcess): Promise<ServerStats> {
  return new Promise((resolve, reject) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      reject(new Error(`the server process has exited (${child.exitCode ?? child.signalCode})`));
      return;
    }
    const exited = (code: number | null) => reject(new Error(`the server process exited (${code}) before answering its stats`));
    child.once('exit', exited);
    child.once('message', (message) => {
      child.off('exit', exited);
      resolve(message as ServerStats);
    });
    child.send('stats');
  });
}

export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
};

/** Runs the HTTP benchmark; `log` reports progress. */
export async function runHttpBenchmark(options: HttpBenchOptions, log: (line: string) => void): Promise<{ rows: HttpRow[]; pinned: boolean }> {
  // BENCH_SERVERS=a,b narrows the run while working on one stack; the report needs all of them.
  const wanted = process.env['BENCH_SERVERS']?.split(',');
  // The pipelined peer is a scale-out setup (Redis cost), the PostgreSQL servers and the 1,000-key servers are in
  // the backends table: not part of this one.
  const selected = SERVER_NAMES.filter(
    (name) =>
      name !== 'fastify-peer-redis-pipelined' &&
      !serverNeeds(name).postgres &&
      !BACKENDS_ONLY_SERVERS.includes(name) &&
      (wanted === undefined || wanted.includes(name)),
  );
  const pinned = pinSelf(1);
  const servers = new Map<ServerName, { port: number; child: ChildProcess }>();
  try {
    for (const name of selected) servers.set(name, await startServerProcess(name, { redisUrl: options.redisUrl }, pinned ? 0 : undefined));
    for (const name of selected) {
      log(`warm-up ${name}`);
      await load((servers.get(name) as { port: number }).port, options.warmupSeconds, options.connections);
    }
    const samples = new Map<
      ServerName,
      { rps: number[]; p50: number[]; p99: number[]; cpu: number[]; non2xx: number; commands: number; answers: number }
    >();
    for (const name of selected) samples.set(name, { rps: [], p50: [], p99: [], cpu: [], non2xx: 0, commands: 0, answers: 0 });
    for (let round = 1; round <= options.rounds; round++) {
      for (const name of selected) {
        const sample = samples.get(name) as NonNullable<ReturnType<typeof samples.get>>;
        const child = (servers.get(name) as { child: ChildProcess }).child;
        const before = await serverStats(child);
        const result = await load((servers.get(name) as { port: number }).port, options.durationSeconds, options.connections);
        const after = await serverStats(child);
        sample.cpu.push((after.cpuMicros - before.cpuMicros) / result['2xx']);
        if (name.endsWith('-redis')) {
          sample.commands += after.redisCommands - before.redisCommands;
          sample.answers += result['2xx'];
        }
        sample.rps.push(result.requests.average);
        sample.p50.push(result.latency.p50);
        sample.p99.push(result.latency.p99);
        sample.non2xx += result.non2xx + result.errors + result.timeouts;
        log(`round ${round}/${options.rounds} ${name}: ${Math.round(result.requests.average)} req/s, p99 ${result.latency.p99} ms`);
      }
    }
    const rows = selected.map((name): HttpRow => {
      const sample = samples.get(name) as NonNullable<ReturnType<typeof samples.get>>;
      return {
        name,
        requestsPerSecond: median(sample.rps),
        p50Ms: median(sample.p50),
        p99Ms: median(sample.p99),
        cpuMicrosPerRequest: median(sample.cpu),
        rounds: sample.rps.map(Math.round),
        non2xx: sample.non2xx,
        ...(name.endsWith('-redis') ? { redisCommandsPerRequest: sample.commands / sample.answers } : {}),
      };
    });
    return { rows, pinned };
  } finally {
    for (const { child } of servers.values()) child.kill('SIGTERM');
    unpinSelf();
  }
}

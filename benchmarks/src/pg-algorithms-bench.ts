/**
 * PostgreSQL CPU per rate-limit decision, by algorithm: the PostgreSQL rate-limit store consuming minute + day
 * windows counted by `fixed`, `sliding` and `gcra` (a quota no run uses up), one consume per statement and 16 per
 * statement (the consumes of one event-loop turn), rounds visiting the three in turn; the median round's CPU of the
 * PostgreSQL server's processes (postmaster and its children, their run time in nanoseconds from /proc) ÷ consumes, and the ratio to `fixed`: each
 * round's own ratio (the three ran one after another, on the machine as it was then), the median of the rounds; and
 * each algorithm's lowest round, with its ratio to fixed's lowest (other load only adds CPU time).
 *
 * Try it: `node --import tsx src/pg-algorithms-bench.ts [--quick]` from benchmarks/.
 */
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { DAY_MS, MINUTE_MS, RATE_LIMIT_ALGORITHMS, type RateLimitAlgorithm, type RateLimitWindow } from '@petstore/core';
import { migratePostgres, postgresRateLimitStore } from '@petstore/storage-postgres';
import { resolveTestPostgres } from '@petstore/storage-postgres/testing';
import pg from 'pg';
import { postgresCpu } from './backends-bench.js';

/** One algorithm at one batch size. */
export interface PgAlgorithmRow {
  algorithm: RateLimitAlgorithm;
  /** Consumes per statement. */
  batch: number;
  /** PostgreSQL CPU µs per consume, median round. */
  micros: number;
  /** This algorithm's CPU over fixed's in the same round, median of the rounds (same batch size). */
  overFixed: number;
  /** The lowest and highest of the rounds' ratios. */
  overFixedRange: [number, number];
  /** PostgreSQL CPU µs per consume, lowest round (other load on a shared machine only adds CPU time). */
  lowestMicros: number;
  /** This algorithm's lowest round over fixed's lowest round (same batch size). */
  lowestOverFixed: number;
}

export interface PgAlgorithmsResult {
  rows: PgAlgorithmRow[];
  rounds: number;
  consumes: number;
  version: string;
}

const windowsOf = (algorithm: RateLimitAlgorithm): readonly RateLimitWindow[] =>
  Object.freeze(
    [
      { name: 'minute', limit: 1_000_000, windowMs: MINUTE_MS },
      { name: 'day', limit: 10_000_000, windowMs: DAY_MS },
    ].map((window) => Object.freeze(algorithm === 'fixed' ? window : { ...window, algorithm })),
  );

const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

/**
 * Runs the benchmark: 9 rounds of 3,000 consumes per algorithm and batch size (`quick`: 2 rounds of 600).
 * @throws Error when PostgreSQL cannot be started or its CPU cannot be read, or a consume is refused.
 */
export async function runPgAlgorithmsBenchmark(options: { quick?: boolean } = {}, log: (line: string) => void = () => {}): Promise<PgAlgorithmsResult> {
  const rounds = options.quick ? 2 : 9;
  const consumes = options.quick ? 600 : 3000;
  const postgres = await resolveTestPostgres();
  if ('skipReason' in postgres) throw new Error(postgres.skipReason);
  const pool = new pg.Pool({ connectionString: postgres.url, max: 4 });
  pool.on('error', () => undefined);
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  try {
    await migratePostgres({ pool, schema });
    const version = String((await pool.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version);
    const cpu = await postgresCpu(pool, postgres.url);
    if (!('postmaster' in cpu)) throw new Error(cpu.reason);
    const store = postgresRateLimitStore({ pool, schema });
    const run = async (algorithm: RateLimitAlgorithm, batch: number): Promise<number> => {
      const windows = windowsOf(algorithm);
      const before = cpu.micros();
      for (let done = 0; done < consumes; done += batch) {
        const results = await Promise.all(
          Array.from({ length: batch }, (_, index) =>
            store.consume(`account:${algorithm}-${batch}-${index}`, { windows, cost: 1, nowMs: Date.now(), ban: undefined, banSubject: '' }),
          ),
        );
        if (!results.every((result) => result.allowed)) throw new Error(`benchmark consume refused (${algorithm})`);
      }
      return (cpu.micros() - before) / consumes;
    };
    const rows: PgAlgorithmRow[] = [];
    for (const batch of [1, 16]) {
      log(`PostgreSQL CPU per decision by algorithm, ${batch} per statement`);
      const samples = new Map<RateLimitAlgorithm, number[]>(RATE_LIMIT_ALGORITHMS.map((algorithm) => [algorithm, []]));
      for (const algorithm of RATE_LIMIT_ALGORITHMS) await run(algorithm, batch); // warm-up
      for (let round = 0; round < rounds; round++) {
        for (const algorithm of RATE_LIMIT_ALGORITHMS) samples.get(algorithm)?.push(await run(algorithm, batch));
      }
      const fixed = samples.get('fixed') ?? [];
      for (const algorithm of RATE_LIMIT_ALGORITHMS) {
        const own = samples.get(algorithm) ?? [];
        const ratios = own.map((micros, round) => micros / (fixed[round] as number));
        rows.push({
          algorithm,
          batch,
          micros: Number(median(own).toFixed(1)),
          overFixed: Number(median(ratios).toFixed(2)),
          overFixedRange: [Number(Math.min(...ratios).toFixed(2)), Number(Math.max(...ratios).toFixed(2))],
          lowestMicros: Number(Math.min(...own).toFixed(1)),
          lowestOverFixed: Number((Math.min(...own) / Math.min(...fixed)).toFixed(2)),
        });
      }
    }
    await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    return { rows, rounds, consumes, version };
  } finally {
    await pool.end();
    await postgres.stop();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(JSON.stringify(await runPgAlgorithmsBenchmark({ quick: process.argv.includes('--quick') }, console.error), null, 1));
}

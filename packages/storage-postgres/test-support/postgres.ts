/**
 * What the PostgreSQL tests share: the server's URL from the global setup, pools closed after each file, and a
 * fresh schema per case (migrated), so cases never see each other's rows.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { migratePostgres } from '../src/migrate.js';

export const postgresUrl = inject('postgresUrl');
/** True when there is no PostgreSQL for this run (the reason was printed by the global setup). */
export const skipPostgres = postgresUrl === null;

const pools = new Set<pg.Pool>();
const filePools = new Map<string, pg.Pool>();

/**
 * Ends the pools of {@link connectPool} still open. Registered after every test file by test-support/setup.ts (a
 * setup file runs again for each file; a hook registered here, at the top of a module that the files of a worker
 * share, would run after the first file only).
 */
export async function endPoolsAfterFile(): Promise<void> {
  const open = [...pools];
  pools.clear();
  filePools.clear();
  await Promise.all(open.map((pool) => pool.end()));
}

/** A pool on the test server, ended after the file; connection errors of idle clients are ignored. */
export function connectPool(config: pg.PoolConfig = {}): pg.Pool {
  // Few connections, closed soon when idle: many pools share one server (100 connections by default).
  const pool = new pg.Pool({ connectionString: postgresUrl ?? undefined, max: 5, idleTimeoutMillis: 200, ...config });
  pool.on('error', () => undefined);
  pools.add(pool);
  return pool;
}

/**
 * The pool named `name` of this test file, opened by the first call ({@link connectPool} with `config`: a later
 * call's `config` is not looked at, so give each configuration a name of its own) and ended
 * after the file with the others. The cases of the conformance suites share these instead of opening pools of their
 * own: each new connection costs PostgreSQL about 7 ms of CPU, and the suites' cases opened about 350. Idle
 * connections close after 1 s, so a burst's connections are kept for the next case and not much longer.
 */
export function filePool(name: string, config: pg.PoolConfig = {}): pg.Pool {
  let pool = filePools.get(name);
  if (pool === undefined) {
    pool = connectPool({ idleTimeoutMillis: 1000, ...config });
    filePools.set(name, pool);
  }
  return pool;
}

/** Ends a pool of {@link connectPool} now rather than after the file. */
export async function endPool(pool: pg.Pool): Promise<void> {
  pools.delete(pool);
  await pool.end();
}

/** A new schema name, unique to this run and case. */
export function uniqueSchema(label = 'case'): string {
  return `${label}_${randomBytes(6).toString('hex')}`;
}

/** A pool and a freshly migrated schema of its own. */
export async function migratedSchema(label?: string): Promise<{ pool: pg.Pool; schema: string }> {
  const pool = connectPool();
  const schema = uniqueSchema(label);
  await migratePostgres({ pool, schema });
  return { pool, schema };
}

/** The database's clock now (`clock_timestamp()`, the clock the stores' SQL reads), Unix epoch ms. */
export async function databaseNowMs(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ ms: string }>('SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS ms');
  return Number(rows[0]?.ms);
}

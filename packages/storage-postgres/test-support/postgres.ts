/**
 * What the PostgreSQL tests share: the server's URL from the global setup, pools closed after each file, and a
 * migrated schema per case holding only what the migrations wrote, so cases never see each other's rows.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { migratePostgres } from '../src/migrate.js';

export const postgresUrl = inject('postgresUrl');
/** True when there is no PostgreSQL for this run (the reason was printed by the global setup). */
export const skipPostgres = postgresUrl === null;

/**
 * The stores' deadline where a test needs their calls answered — those the core's suites (conformance, model
 * comparison) run against, and the calls beside a short-deadline store that the test is there to check.
 */
export { GUARD_CALL_TIMEOUT_MS } from '../../core/test-support/call-timeout.js';

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

/** What a schema held right after its migration: its tables, and the rows of those the migrations wrote to (JSON). */
interface MigratedContent {
  tables: string[];
  rows: Array<{ table: string; json: string }>;
}

/** This worker's migrated schemas handed out during the current test, and what each held after its migration. */
const schemasInUse = new Map<string, MigratedContent>();
/** Migrated schemas whose test has ended, to be emptied and handed out again. */
const spareSchemas = new Map<string, MigratedContent>();

/**
 * A schema migrated by `migratePostgres`, holding nothing but what the migrations wrote (the version table's rows,
 * the list version's row), for the current test. A schema a finished test of this worker used is emptied for it
 * when there is one (TRUNCATE of every table, identities restarted, the migrations' rows put back: about 13 ms of
 * PostgreSQL's CPU), else a new one is migrated (about 60 ms, and the suites' cases ask for about 90). The schemas
 * change hands after each test ({@link releaseSchemasAfterTest}); a case that changes a schema's definition must
 * migrate one of its own instead.
 */
export async function emptyMigratedSchema(pool: pg.Pool, label = 'case'): Promise<string> {
  for (const [schema, content] of spareSchemas) {
    spareSchemas.delete(schema);
    if (await emptySchema(pool, schema, content)) {
      schemasInUse.set(schema, content);
      return schema;
    }
  }
  const schema = uniqueSchema(label);
  await migratePostgres({ pool, schema });
  const { rows } = await pool.query<{ table: string }>('SELECT tablename AS table FROM pg_tables WHERE schemaname = $1', [schema]);
  const content: MigratedContent = { tables: rows.map((row) => row.table), rows: [] };
  for (const table of content.tables) {
    const { rows: [held] } = await pool.query<{ json: string }>(`SELECT coalesce(json_agg(t), '[]')::text AS json FROM "${schema}"."${table}" t`);
    if (held !== undefined && held.json !== '[]') content.rows.push({ table, json: held.json });
  }
  schemasInUse.set(schema, content);
  return schema;
}

/**
 * Empties `schema` back to `content` in one transaction; false (nothing changed) when it cannot, e.g. a table is
 * still locked by a connection a test left behind: the schema is then given up.
 */
async function emptySchema(pool: pg.Pool, schema: string, content: MigratedContent): Promise<boolean> {
  const quoted = (table: string) => `"${schema}"."${table}"`;
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query("SET LOCAL lock_timeout = '200ms'");
    await client.query(`TRUNCATE ${content.tables.map(quoted).join(', ')} RESTART IDENTITY`);
    for (const { table, json } of content.rows) {
      await client.query(`INSERT INTO ${quoted(table)} OVERRIDING SYSTEM VALUE SELECT * FROM json_populate_recordset(NULL::${quoted(table)}, $1)`, [json]);
    }
    await client.query('COMMIT');
    client.release();
    return true;
  } catch {
    // A connection that cannot even roll back is closed rather than returned to the pool (as migratePostgres does).
    const rolledBack = await client.query('ROLLBACK').then(
      () => true,
      () => false,
    );
    client.release(!rolledBack);
    return false;
  }
}

/**
 * Hands the schemas of {@link emptyMigratedSchema} used by the test that ended to the next tests. Registered after
 * every test by test-support/setup.ts.
 */
export function releaseSchemasAfterTest(): void {
  for (const [schema, content] of schemasInUse) spareSchemas.set(schema, content);
  schemasInUse.clear();
}

/** A pool of its own and an {@link emptyMigratedSchema}. */
export async function migratedSchema(label?: string): Promise<{ pool: pg.Pool; schema: string }> {
  const pool = connectPool();
  return { pool, schema: await emptyMigratedSchema(pool, label) };
}

/** The database's clock now (`clock_timestamp()`, the clock the stores' SQL reads), Unix epoch ms. */
export async function databaseNowMs(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ ms: string }>('SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS ms');
  return Number(rows[0]?.ms);
}

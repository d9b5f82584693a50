/**
 * The migration runner: the version table, the advisory lock and the transaction around the steps of
 * {@link postgresMigrations} (migrations.ts holds their SQL).
 */
import { inTransaction } from '@petstore/internal';
import type { Pool } from 'pg';
import { postgresMigrations, type PostgresMigration } from './migrations.js';
import { DEFAULT_SCHEMA, migrationsTableName, schemaName, type PostgresSchemaOptions } from './names.js';
import { assertPool } from './postgres-call.js';

/** Options of {@link migratePostgres}. */
export interface MigratePostgresOptions extends PostgresSchemaOptions {
  /** A node-postgres `Pool` (or `Client`); one connection is used for the whole run. */
  pool: Pool;
}

/** What {@link migratePostgres} did. */
export interface MigrationReport {
  /** The migrations applied by this run, in order (none when the schema was up to date). */
  applied: Array<Pick<PostgresMigration, 'table' | 'version' | 'description'>>;
}

/** One lock for every petstore migration in a database: `hashtext` of this fixed name. */
const ADVISORY_LOCK_NAME = 'petstore_migrations';

/**
 * Brings the schema up to date: creates the schema when missing, the migrations table
 * (`<schema>.petstore_migrations (table_name text, version integer, description text, applied_at timestamptz,
 * PRIMARY KEY (table_name, version))`), and applies every migration of {@link postgresMigrations} not yet
 * recorded there, recording each. Runs in one transaction under a transaction-level advisory lock, so several
 * instances starting at once apply each migration once; running it again is harmless (it applies nothing).
 * Call it at start-up, before serving (the host decides when; the stores never change the schema).
 *
 * @throws TypeError when `pool` is not a pool, or naming the option (`schema`, `categoriesTable`,
 *   `rateLimitsTable`, `apiKeysTable`) that holds a bad name; nothing is sent then. The database's error (nothing applied) when a
 *   statement fails, e.g. for lack of the CREATE privilege.
 */
export async function migratePostgres(options: MigratePostgresOptions): Promise<MigrationReport> {
  assertPool(options.pool);
  const migrations = postgresMigrations(options);
  const schema = schemaName(options);
  const versions = migrationsTableName(options);
  // One transaction under the advisory lock; a connection that failed is closed rather than returned to the pool.
  return inTransaction(() => options.pool.connect(), async (client) => {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [ADVISORY_LOCK_NAME]);
    const exists = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [options.schema ?? DEFAULT_SCHEMA]);
    if (exists.rowCount === 0) await client.query(`CREATE SCHEMA ${schema}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${versions} (
  table_name text NOT NULL,
  version integer NOT NULL,
  description text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (table_name, version)
)`);
    const done = await client.query<{ table_name: string; version: number }>(`SELECT table_name, version FROM ${versions}`);
    const applied: MigrationReport['applied'] = [];
    for (const migration of migrations) {
      if (done.rows.some((row) => row.table_name === migration.table && row.version === migration.version)) continue;
      await client.query(migration.sql);
      await client.query(`INSERT INTO ${versions} (table_name, version, description) VALUES ($1, $2, $3)`, [
        migration.table,
        migration.version,
        migration.description,
      ]);
      applied.push({ table: migration.table, version: migration.version, description: migration.description });
    }
    return { applied };
  });
}

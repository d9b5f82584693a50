/**
 * @petstore/storage-postgres — category, rate-limit and API-key record stores for `@petstore/core` in PostgreSQL,
 * over a node-postgres (`pg`) pool you create and own. Each store operation is one SQL statement; the tables come from
 * {@link migratePostgres}, which the host runs (or from the SQL of {@link postgresMigrations}).
 *
 * @packageDocumentation
 */
export * from './category-store.js';
export * from './rate-limit-store.js';
export * from './api-key-record-store.js';
export {
  DEFAULT_API_KEYS_TABLE,
  DEFAULT_CATEGORIES_TABLE,
  DEFAULT_RATE_LIMITS_TABLE,
  DEFAULT_SCHEMA,
  MIGRATIONS_TABLE,
  postgresApiKeysChannel,
  type PostgresSchemaOptions,
} from './names.js';
export { postgresMigrations, type PostgresMigration } from './migrations.js';
export { migratePostgres, type MigratePostgresOptions, type MigrationReport } from './migrate.js';
export { DEFAULT_CALL_TIMEOUT_MS, PostgresTimeoutError } from './postgres-call.js';

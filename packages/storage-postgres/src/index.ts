/**
 * @petstore/storage-postgres — category and rate-limit stores for `@petstore/core` in PostgreSQL, over a
 * node-postgres (`pg`) pool you create and own. Each store operation is one SQL statement; the tables come from
 * {@link migratePostgres}, which the host runs (or from the SQL of {@link postgresMigrations}).
 *
 * @packageDocumentation
 */
export * from './category-store.js';
export * from './rate-limit-store.js';
export {
  DEFAULT_CATEGORIES_TABLE,
  DEFAULT_RATE_LIMITS_TABLE,
  DEFAULT_SCHEMA,
  MIGRATIONS_TABLE,
  migratePostgres,
  postgresMigrations,
  type MigratePostgresOptions,
  type MigrationReport,
  type PostgresMigration,
  type PostgresSchemaOptions,
} from './schema.js';
export { DEFAULT_TIMEOUT_MS, PostgresTimeoutError, UNAVAILABLE_RETRY_AFTER_SECONDS } from './postgres-call.js';

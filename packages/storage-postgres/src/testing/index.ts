/**
 * `@petstore/storage-postgres/testing` — a throwaway PostgreSQL server for tests, and the choice of which
 * PostgreSQL a test run uses. Node.js only (`node:child_process`); no test runner is imported.
 *
 * @packageDocumentation
 */
export * from './postgres-server.js';
export * from './resolve-test-postgres.js';

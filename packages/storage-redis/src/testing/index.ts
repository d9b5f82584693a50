/**
 * `@petstore/storage-redis/testing` — a throwaway `redis-server` or Redis Cluster for tests, and the choice of which Redis a
 * test run uses. Node.js only (`node:child_process`); no test runner is imported.
 *
 * @packageDocumentation
 */
export * from './redis-server.js';
export * from './resolve-test-redis.js';
export * from './redis-cluster.js';

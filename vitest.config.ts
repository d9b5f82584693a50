import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import TotalReporter from './scripts/total-reporter.js';

/**
 * `npm test`: the unit, contract, hostile-input, store, example, OpenAPI and docs suites of every workspace, as one
 * vitest project. The installed-package tests (tests/installed) are `npm run test:installed`
 * (vitest.installed.config.ts), the browser and Prometheus tests (tests/browser, tests/observability)
 * `npm run test:e2e` (vitest.e2e.config.ts). `npm test -w <workspace>` runs one workspace alone, on its own
 * vitest.config.ts.
 *
 * One project, not one per workspace: vitest shares a worker's module graph (isolate: false) only between files of
 * one project, so with a project per workspace every worker imported fastify, express, pg, ioredis and the packages
 * again for each workspace (about 35 worker threads in a run instead of 3). Measured on the 2-core machine, the whole
 * run's CPU fell from 166 s to 138 s.
 */
export default defineConfig({
  test: {
    include: [
      'packages/*/src/**/*.test.ts',
      'packages/*/test-support/**/*.test.ts',
      'tests/{contract,docs,openapi,postgres,redis}/src/**/*.test.ts',
      'examples/src/**/*.test.ts',
    ],
    // Worker threads, not child processes: no suite needs a process of its own (the servers, signals and exits
    // they test are child processes they start), and a thread starts for less.
    pool: 'threads',
    // The test files of a worker share one module graph instead of importing it afresh each. Files keep no state
    // between them: what they start (servers, clients, fake timers) they stop after themselves.
    isolate: false,
    // One more worker than cores (at least three): much of the time goes to child processes (servers, npm), so a
    // worker waiting on one leaves its core to another worker.
    maxWorkers: Math.max(3, availableParallelism() + 1),
    // Guards against a hang on a busy machine, not measurements (vitest's default is 5 s).
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Every server the suites use (PostgreSQL, Redis, a Redis Cluster, Valkey), started at once: scripts/test-servers.ts.
    globalSetup: ['scripts/test-servers.ts'],
    // Run before every test file (a module's own top-level hooks would run for the first file of a worker only):
    // the Redis and PostgreSQL suites' clean-up of the clients, keys and pools their test-support handed out.
    setupFiles: ['packages/storage-redis/test-support/setup.ts', 'packages/storage-postgres/test-support/setup.ts'],
    reporters: ['default', new TotalReporter()],
    // Keeps the transformed test and source files under node_modules/.experimental-vitest-cache between runs (keyed
    // by their content; `vitest --clearCache` empties it): about 3 s of CPU less per run. Default in vitest 5.
    experimental: { fsModuleCache: true },
  },
});

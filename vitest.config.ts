import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import LongestFirstSequencer from './scripts/test-sequencer.js';
import TotalReporter from './scripts/total-reporter.js';

/**
 * `npm test` runs every workspace's tests in one vitest process, one project per workspace (each keeps its own
 * vitest.config.ts): the unit, contract, hostile-input, store, example, OpenAPI and docs suites. The
 * installed-package tests (tests/installed) are `npm run test:installed` (vitest.installed.config.ts), the
 * browser and Prometheus tests (tests/browser, tests/observability) `npm run test:e2e` (vitest.e2e.config.ts).
 * `npm test -w <workspace>` still runs one workspace alone.
 *
 * Every project runs its files in worker threads (`pool: 'threads'` in each project's config; a project's pool is
 * its own, the root's is not inherited): measured on the 2-core machine for the whole of npm test, 99 s of CPU
 * and 54 s of wall time against 115 s and 62 s with vitest's default of one child process per worker. No suite
 * needs a process of its own: the servers, signals and exits they test are child processes they start.
 */
export default defineConfig({
  test: {
    projects: ['packages/*', 'tests/*', '!tests/installed', '!tests/browser', '!tests/observability', 'examples'],
    // One more worker than cores (at least three): much of the time goes to child processes (servers, npm),
    // so a worker waiting on one leaves its core to another worker.
    maxWorkers: Math.max(3, availableParallelism() + 1),
    // The longest files first, across projects (see scripts/test-sequencer.ts).
    sequence: { sequencer: LongestFirstSequencer },
    reporters: ['default', new TotalReporter()],
  },
});

import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'threads', // worker threads, not processes: see the root vitest.config.ts
    include: ['src/**/*.test.ts'],
    // The test files share one module graph per worker (they keep no module state of their own; each closes its
    // clients): less CPU for npm test on two cores. The commands under test run as child processes.
    isolate: false,
    globalSetup: ['test-support/global-setup.ts'],
    // Guards against a hang, not measurements: each test spawns the command several times (a Node start and a
    // database connection each), slow on a busy 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});

import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'threads', // worker threads, not processes: see the root vitest.config.ts
    include: ['src/**/*.test.ts'],
    testTimeout: 30_000,
    // The test files share one module graph per worker instead of importing it afresh each: less CPU for npm test
    // on two cores. Their one shared state, spawn-example.ts's list of started servers, is emptied by every file
    // that starts one (stopExamples).
    isolate: false,
    // The PostgreSQL and Redis of the run, shared with the other projects (test-support/global-setup.ts).
    globalSetup: ['test-support/global-setup.ts'],
  },
});

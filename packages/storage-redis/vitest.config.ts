import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'threads', // worker threads, not processes: see the root vitest.config.ts
    include: ['src/**/*.test.ts'],
    // The test files share one module graph per worker instead of importing it afresh each (they keep no module
    // state of their own; servers and clients are closed by each file): less CPU for npm test on two cores.
    isolate: false,
    globalSetup: ['test-support/global-setup.ts'],
    // Cleans up after each test (file) what test-support handed out; see test-support/setup.ts.
    setupFiles: ['test-support/setup.ts'],
    testTimeout: 20_000,
  },
});

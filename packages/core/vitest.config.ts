import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'threads', // worker threads, not processes: see the root vitest.config.ts
    // A guard against a hang, not a measurement: CPU-heavy cases (random runs, fuzzing) on a busy machine take
    // longer than vitest's default of 5 s.
    testTimeout: 30_000,
    environment: 'node',
    include: ['src/**/*.test.ts', 'test-support/**/*.test.ts'],
    // The test files share one module graph per worker instead of importing it afresh each (they keep no module
    // state; spies are restored after each test): measured, about half the time for this package alone.
    isolate: false,
  },
});

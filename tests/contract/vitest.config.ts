import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'threads', // worker threads, not processes: see the root vitest.config.ts
    environment: 'node',
    include: ['src/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // The files share one module graph per worker instead of importing it afresh each (servers are started
    // and stopped by each file; the modules keep no state of their own).
    isolate: false,
  },
});

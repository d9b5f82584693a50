import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'threads', // worker threads, not processes: see the root vitest.config.ts
    include: ['src/**/*.test.ts'],
    // Prometheus's start and its first scrapes on a busy 2-core machine: guards against a hang, not measurements.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});

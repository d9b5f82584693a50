import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'threads', // worker threads, not processes: see the root vitest.config.ts
    include: ['src/**/*.test.ts'],
    // The suites that need no server of their own run on the run's PostgreSQL (inject('postgresUrl')).
    globalSetup: ['src/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});

import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'threads', // worker threads, not processes: see the root vitest.config.ts
    include: ['src/**/*.test.ts'],
  },
});

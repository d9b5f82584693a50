import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    globalSetup: ['src/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // One suite at a time: the fault suite stops and starts its own redis-server.
    fileParallelism: false,
  },
});

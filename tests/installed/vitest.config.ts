import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    environment: 'node',
    include: ['src/**/*.test.ts'],
    testTimeout: 30_000,
    // Packing six packages and installing them into throwaway projects.
    hookTimeout: 120_000,
  },
});

import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    environment: 'node',
    include: ['src/**/*.test.ts'],
    // Packs every package and installs the tarballs into a throwaway project, once for the files below.
    globalSetup: ['src/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});

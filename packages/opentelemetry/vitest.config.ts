import { defineConfig } from 'vitest/config';

// isolate: false — the test files share one module graph per worker instead of importing it afresh each
// (the files keep no module state of their own); npm test runs every package at once on two cores.
export default defineConfig({ test: { pool: 'threads', include: ['src/**/*.test.ts'], isolate: false } });

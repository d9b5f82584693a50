import { defineConfig } from 'vitest/config';

// isolate: false — the test files share one module graph per worker (they keep no module state).
// testTimeout: a guard against a hang on a busy machine, not a measurement (vitest's default is 5 s).
export default defineConfig({ test: { pool: 'threads', include: ['src/**/*.test.ts'], isolate: false, testTimeout: 30_000 } });

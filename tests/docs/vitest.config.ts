import { defineConfig } from 'vitest/config';

// isolate: false — the test files share one module graph per worker (they keep no module state).
export default defineConfig({ test: { pool: 'threads', include: ['src/**/*.test.ts'], isolate: false } });

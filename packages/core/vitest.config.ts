import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    environment: 'node',
    include: ['src/**/*.test.ts'],
    // The test files share one module graph per worker instead of importing it afresh each (they keep no module
    // state; spies are restored after each test): 17 s → 8 s for this package alone on this 2-core machine.
    isolate: false,
  },
});

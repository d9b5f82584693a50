import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import TotalReporter from './scripts/total-reporter.js';

/**
 * `npm run test:e2e`: the end-to-end tests that drive a heavyweight outside program against the servers —
 * Debian's Chromium (tests/browser: the reference page, a host document in Swagger UI) and Debian's Prometheus
 * (tests/observability: the example's /metrics scraped and queried with PromQL). Apart from `npm test` so that the
 * unit, contract, store and example suites stay within their minute; CI runs all three commands. They build
 * first and end with the same total line as `npm test`.
 */
export default defineConfig({
  test: {
    projects: ['tests/browser', 'tests/observability'],
    maxWorkers: Math.max(2, availableParallelism()),
    reporters: ['default', new TotalReporter()],
  },
});

/**
 * The PostgreSQL rate-limit store against the model (`decideConsume` over a map of records), step by step, on
 * seeded random runs: every answer, every peek and, after each step, the row the store kept (read back as a
 * `RateLimitState`). The store decides at the requests' time (`time: 'request'`), so the runs can cross minute,
 * day and ban boundaries.
 */
import { runRateLimitModelComparison } from '@petstore/core/testing';
import { describe, it } from 'vitest';
import { postgresRateLimitStore } from './rate-limit-store.js';
import { endPool, migratedSchema, skipPostgres } from '../test-support/postgres.js';
import { readRateLimitState } from '../test-support/rate-limit-state.js';

runRateLimitModelComparison({
  describe: describe.skipIf(skipPostgres),
  it,
  name: 'postgresRateLimitStore against the model',
  async harness() {
    const { pool, schema } = await migratedSchema('model');
    const table = `"${schema}".petstore_rate_limits`;
    return {
      store: postgresRateLimitStore({ pool, schema, time: 'request' }),
      readState: (key) => readRateLimitState(pool, table, key),
      close: () => endPool(pool),
    };
  },
});

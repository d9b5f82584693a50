/**
 * The PostgreSQL rate-limit store against the model (`decideConsume` over a map of records), step by step, on
 * seeded random runs: every answer, every peek and, after each step, the row the store kept (read back as a
 * `RateLimitState`). The store decides at the requests' time (`time: 'request'`), so the runs can cross minute,
 * day and ban boundaries. Twice: as the comparison sends its consumes (each statement holds one record's consumes:
 * the one-by-one path), and with every consume sent beside a consume of another record in the same turn (each
 * statement holds two records or more: the path that locks, reads and writes them with shared statements).
 */
import type { RateLimitStore } from '@petstore/core';
import { runRateLimitModelComparison } from '@petstore/core/testing';
import { describe, it } from 'vitest';
import { postgresRateLimitStore } from './rate-limit-store.js';
import { endPool, migratedSchema, skipPostgres, GUARD_CALL_TIMEOUT_MS } from '../test-support/postgres.js';
import { readRateLimitState } from '../test-support/rate-limit-state.js';

runRateLimitModelComparison({
  describe: describe.skipIf(skipPostgres),
  it,
  name: 'postgresRateLimitStore against the model',
  async harness() {
    const { pool, schema } = await migratedSchema('model');
    const table = `"${schema}".petstore_rate_limits`;
    return {
      store: postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS }),
      readState: (key) => readRateLimitState(pool, table, key),
      close: () => endPool(pool),
    };
  },
});

runRateLimitModelComparison({
  describe: describe.skipIf(skipPostgres),
  it,
  name: "postgresRateLimitStore against the model, each consume in a statement beside another record's",
  seeds: [1, 2, 3],
  async harness() {
    const { pool, schema } = await migratedSchema('pair');
    const table = `"${schema}".petstore_rate_limits`;
    const store = postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    // The same consume of a record the comparison never reads, started in the same turn: one statement for both.
    const paired: RateLimitStore = {
      ...store,
      consume(key, request) {
        void store.consume(`beside:${key}`, request).catch(() => undefined);
        return store.consume(key, request);
      },
    };
    return { store: paired, readState: (key) => readRateLimitState(pool, table, key), close: () => endPool(pool) };
  },
});

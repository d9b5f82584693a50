/**
 * The core's storage conformance suites, run against the PostgreSQL stores on a real server; each case gets a
 * migrated schema of its own, empty (test-support/postgres.ts, emptyMigratedSchema).
 */
import { runApiKeyRecordStoreConformance, runCategoryStoreConformance, runRateLimitStoreConformance } from '@petstore/core/testing';
import { describe, it } from 'vitest';
import { postgresRateLimitStore } from './rate-limit-store.js';
import { postgresApiKeyHarness } from '../test-support/api-key-harness.js';
import { postgresCategoryHarness } from '../test-support/category-harness.js';
import { emptyMigratedSchema, filePool, skipPostgres, GUARD_CALL_TIMEOUT_MS } from '../test-support/postgres.js';

const test = { describe: describe.skipIf(skipPostgres), it };

runRateLimitStoreConformance(test, {
  name: 'postgresRateLimitStore conformance',
  async createStore() {
    const pool = filePool('rate-limit store');
    const schema = await emptyMigratedSchema(pool, 'rl');
    const table = `"${schema}".petstore_rate_limits`;
    return {
      store: postgresRateLimitStore({ pool, schema, time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS }),
      async remainingTtlMs(key) {
        const { rows } = await pool.query<{ ms: string | null }>(
          `SELECT (expires_at_ms - floor(extract(epoch FROM clock_timestamp()) * 1000))::text AS ms FROM ${table} WHERE key = $1`,
          [key],
        );
        if (rows.length === 0) return undefined;
        return rows[0]?.ms === null ? Number.POSITIVE_INFINITY : Number(rows[0]?.ms);
      },
      async dropTtl(key) {
        await pool.query(`UPDATE ${table} SET expires_at_ms = NULL WHERE key = $1`, [key]);
      },
      // The pool is the file's, ended after it.
      close: async () => undefined,
    };
  },
});

runCategoryStoreConformance(test, {
  name: 'postgresCategoryStore conformance',
  // No maxCategories: the table is bounded by the database's own means.
  capabilities: { capacity: false, otherInstance: true },
  // With holdWrites/whenBlocked: the idempotent burst holds the category writes until all 50 calls wait in PostgreSQL.
  createStore: () => postgresCategoryHarness(),
});

runApiKeyRecordStoreConformance(test, {
  name: 'postgresApiKeyRecordStore conformance',
  // No maxRecords: the table is bounded by the database's own means.
  capabilities: { capacity: false },
  // With holdWrites/whenBlocked: the parallel cases hold the table's writes until every call waits in PostgreSQL;
  // other() is a second instance on a pool of its own; breakNotifications() terminates the LISTEN sessions.
  createStore: () => postgresApiKeyHarness(),
});

/**
 * Mutation check of the idempotent create on PostgreSQL. `npm test` runs the mutated store once (the unchanged
 * store runs the whole suite in conformance.test.ts); 5 runs of each, on demand:
 *
 *   PETSTORE_PG_MUTATIONS=1 npx vitest run packages/storage-postgres/src/idempotency-mutation.test.ts
 *
 * The mutation lets a claim overwrite another caller's live record (`ON CONFLICT DO UPDATE` without its `WHERE`:
 * the record is taken over instead of answered once its claimer commits). The core's category-store suite's
 * burst case (50 parallel idempotent creates with one key, writes held until all 50 wait in PostgreSQL) must fail
 * on it on every one of 5 runs, and pass on the unchanged SQL on every run.
 */
import { runCategoryStoreConformance, type ConformanceTestApi } from '@petstore/core/testing';
import { describe, expect, it } from 'vitest';
import { postgresMigrations } from './migrations.js';
import { postgresCategoryHarness } from '../test-support/category-harness.js';
import { skipPostgres } from '../test-support/postgres.js';

const OVERWRITE = {
  from: 'ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, category_id = 0, expires_at_ms = excluded.expires_at_ms\n      WHERE r.expires_at_ms <= t;',
  to: 'ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, category_id = 0, expires_at_ms = excluded.expires_at_ms;',
};
const BURST_CASE = '50 parallel idempotent creates with one key';
/** Runs of each: 5 on demand, else one of the mutated store. */
const EVERY_RUN = process.env.PETSTORE_PG_MUTATIONS === '1';
const RUNS = EVERY_RUN ? 5 : 1;

/** The migrations' SQL for `schema`, the idempotent create of categories version 2 mutated when `mutated`. */
function migrationSql(schema: string, mutated: boolean): string[] {
  return postgresMigrations({ schema }).map((migration) => {
    if (!mutated || migration.table !== 'petstore_categories' || migration.version !== 2) return migration.sql;
    const parts = migration.sql.split(OVERWRITE.from);
    if (parts.length !== 2) throw new Error(`the claim's ON CONFLICT clause occurs ${parts.length - 1} times, not once`);
    return parts.join(OVERWRITE.to);
  });
}

/** The suite's burst case, on a store migrated with (or without) the mutation. */
function burstCase(mutated: boolean): () => Promise<void> {
  const cases: Array<{ name: string; body: () => Promise<void> }> = [];
  const test: ConformanceTestApi = { describe: (_name, body) => body(), it: (name, body) => cases.push({ name, body }) };
  runCategoryStoreConformance(test, {
    capabilities: { capacity: false },
    createStore: () => postgresCategoryHarness({ migrationSql: (schema) => migrationSql(schema, mutated) }),
  });
  const found = cases.filter((entry) => entry.name.includes(BURST_CASE));
  if (found.length !== 1) throw new Error(`the suite has ${found.length} cases named like "${BURST_CASE}", not 1`);
  return (found[0] as { body: () => Promise<void> }).body;
}

/** Runs `body`; answers undefined when it passed, else its failure in one line (with what was created). */
async function outcome(body: () => Promise<void>): Promise<string | undefined> {
  try {
    await body();
    return undefined;
  } catch (error) {
    const { message, actual } = error as { message?: string; actual?: unknown };
    return `${String(message).split('\n')[0]}${actual === undefined ? '' : ` (actual ${JSON.stringify(actual)})`}`;
  }
}

describe.skipIf(skipPostgres)("the category-store suite's idempotent burst on PostgreSQL", () => {
  for (const mutated of EVERY_RUN ? [false, true] : [true]) {
    for (let run = 1; run <= RUNS; run++) {
      it(`${mutated ? 'fails with the claim overwriting a live record' : 'passes unchanged'}, run ${run} of ${RUNS}`, async () => {
        const failure = await outcome(burstCase(mutated));
        if (EVERY_RUN) console.log(`${mutated ? 'mutated' : 'unchanged'} run ${run}: ${failure === undefined ? 'passed' : `failed: ${failure}`}`);
        if (mutated) expect(failure).toBeDefined();
        else expect(failure).toBeUndefined();
      }, 60_000);
    }
  }
});

/**
 * Mutation check of the idempotent create on PostgreSQL (run on demand, not by `npm test`):
 *
 *   PETSTORE_PG_MUTATIONS=1 npx vitest run --project @petstore/storage-postgres src/idempotency-mutation.test.ts
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { postgresCategoryStore } from './category-store.js';
import { postgresMigrations } from './migrations.js';
import { connectPool, endPool, skipPostgres, uniqueSchema } from '../test-support/postgres.js';
import { holdCategoryWrites, whenCallsBlocked } from '../test-support/hold-writes.js';

const OVERWRITE = {
  from: 'ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, category_id = 0, expires_at_ms = excluded.expires_at_ms\n      WHERE r.expires_at_ms <= t;',
  to: 'ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, category_id = 0, expires_at_ms = excluded.expires_at_ms;',
};

async function schemaWith(mutated: boolean) {
  const pool = connectPool({ max: 60 });
  const schema = uniqueSchema('idem');
  await pool.query(`CREATE SCHEMA "${schema}"`);
  for (const migration of postgresMigrations({ schema })) {
    let sql = migration.sql;
    if (mutated && migration.table === 'petstore_categories' && migration.version === 2) {
      const parts = sql.split(OVERWRITE.from);
      expect(parts).toHaveLength(2);
      sql = parts.join(OVERWRITE.to);
    }
    await pool.query(sql);
  }
  return { pool, schema };
}

describe.runIf(process.env.PETSTORE_PG_MUTATIONS === '1' && !skipPostgres)('held idempotent creates', () => {
  for (const mutated of [false, true]) {
    for (let run = 1; run <= 5; run++) {
      it(`${mutated ? 'mutated' : 'real'} run ${run}`, async () => {
        const { pool, schema } = await schemaWith(mutated);
        const store = postgresCategoryStore({ pool, schema, callTimeoutMs: 20_000 });
        const hold = await holdCategoryWrites(pool, schema);
        const key = createHash('sha256').update('burst').digest('hex');
        const all = Promise.all(Array.from({ length: 50 }, () => store.createIdempotent({ name: 'Once' }, { key, fingerprint: key, retentionMs: 60_000 })));
        await whenCallsBlocked(pool, schema, 50);
        await hold.release();
        const results = await all;
        const created = results.filter((result) => result.outcome === 'created').length;
        console.log(`${mutated ? 'mutated' : 'real'} run ${run}: created ${created}, listed ${(await store.list()).length}`);
        await endPool(pool);
        expect(created).toBe(1);
      }, 60_000);
    }
  }
});

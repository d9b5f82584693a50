/**
 * Deterministic concurrency for the category store's tests: hold the category writes of one schema at a lock,
 * and wait until a number of calls are blocked inside PostgreSQL.
 */
import type pg from 'pg';

/**
 * Holds every write to the categories table `"<schema>"."<categoriesTable>"`: a transaction of its own holding
 * `LOCK TABLE … IN SHARE MODE`, which lets reads through and makes an `INSERT` into the table wait (ROW EXCLUSIVE
 * conflicts with SHARE) until `release()` commits it. An idempotent create therefore claims its key (a row of the
 * idempotency table, not locked) and then waits at its category insert, its claim uncommitted; the calls with the
 * same key wait for that claim. Resolves once the lock is held.
 */
export function holdCategoryWrites(pool: pg.Pool, schema: string, categoriesTable = 'petstore_categories'): Promise<{ release(): Promise<void> }> {
  return holdTableWrites(pool, schema, categoriesTable);
}

/**
 * Holds every write to `"<schema>"."<table>"` the same way (SHARE mode lets reads through and makes every
 * `INSERT` and `UPDATE` wait) until `release()`. Resolves once the lock is held.
 */
export async function holdTableWrites(pool: pg.Pool, schema: string, table: string): Promise<{ release(): Promise<void> }> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(`LOCK TABLE "${schema}"."${table}" IN SHARE MODE`);
  } catch (error) {
    client.release(error instanceof Error ? error : true);
    throw error;
  }
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      try {
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    },
  };
}

/**
 * Resolves once at least `count` statements that call a function of `"<schema>"` (the stores' calls there, e.g.
 * `<categoriesTable>_create_idempotent`) are waiting for a lock in PostgreSQL (`pg_stat_activity`: `wait_event_type
 * = 'Lock'`, a heavyweight lock: a table's or another transaction's). Polls every 5 ms: it waits for the calls to
 * arrive, never for a set time (the test's own timeout ends a wait that never ends).
 */
export async function whenCallsBlocked(pool: pg.Pool, schema: string, count: number): Promise<void> {
  const needle = `"${schema}".`;
  for (;;) {
    const { rows } = await pool.query<{ blocked: number }>(
      `SELECT count(*)::int AS blocked FROM pg_stat_activity
       WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND position($1 in query) > 0`,
      [needle],
    );
    if ((rows[0]?.blocked ?? 0) >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

import { PetstoreError, type Category, type CategoryStore, type NewCategory } from '@petstore/core';
import type { Pool } from 'pg';
import { assertPool, assertWhole, DEFAULT_TIMEOUT_MS, runStatement } from './postgres-call.js';
import { storeNames } from './schema.js';

/** Options of {@link postgresCategoryStore}. */
export interface PostgresCategoryStoreOptions {
  /**
   * A node-postgres (`pg`) `Pool` you create, configure and end. The store runs one statement per call on it and
   * never changes its settings or listeners. Give the pool an `'error'` listener (node-postgres emits one when an
   * idle connection drops, e.g. the server restarts, and an EventEmitter without a listener ends the process); the
   * pool opens new connections by itself.
   */
  pool: Pool;
  /** The schema of the table. Default `public`. */
  schema?: string;
  /** The table, created by {@link migratePostgres}. Default `petstore_categories`. */
  table?: string;
  /**
   * Deadline of one `list` or `create` in ms, the wait for a pooled connection included; past it the call throws
   * `service_unavailable`. Default 1000.
   */
  timeoutMs?: number;
}

/** The sequence behind the identity column stopped at its MAXVALUE (2^53 − 1). */
const SEQUENCE_EXHAUSTED = '2200H';

/**
 * A category store in a PostgreSQL table (see {@link postgresMigrations} for its columns). Ids come from the
 * table's identity column: `create` is one `INSERT … RETURNING id`, so parallel creates from any number of
 * processes get distinct, increasing ids (a failed or rolled-back insert leaves a gap, never a duplicate);
 * `list` is one `SELECT … ORDER BY id`. There is no `maxCategories`: bound the table with the database's own
 * means (quotas, monitoring).
 *
 * Errors (both methods):
 * - `PetstoreError('service_unavailable', …, { retryAfterSeconds: 5, cause })` (503 with `Retry-After`) when
 *   the database is unreachable, does not answer within `timeoutMs`, cancels the statement (`statement_timeout`)
 *   or is temporarily unable (starting, shutting down, too many connections, read-only during a failover). A
 *   `create` answered so **may or may not have been written**: the connection can drop after the database
 *   committed the row and before the answer arrived. Retrying it may therefore make a second category.
 * - `PetstoreError('storage_full')` (507) from `create` when the identity column has handed out 2^53 − 1, the
 *   largest id that survives JSON in every client; nothing is written.
 * - a plain Error (500) when the table is missing (run {@link migratePostgres}), a stored id is above 2^53 − 1
 *   (a row inserted by hand: refused rather than rounded), or the database answers with another error.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#store-failures
 * @throws TypeError when `pool` is not a pool, `timeoutMs` is not a whole number ≥ 1, or `schema` / `table` is
 *   not a plain name (letters, digits, `_`).
 */
export function postgresCategoryStore(options: PostgresCategoryStoreOptions): CategoryStore {
  const { pool, timeoutMs = DEFAULT_TIMEOUT_MS } = options;
  assertPool(pool);
  assertWhole(timeoutMs, 'timeoutMs', 1);
  const table = storeNames({ schema: options.schema, categoriesTable: options.table }).categories;
  // `c.id`: the column, not the text alias (which would sort "10" before "9").
  const listSql = `SELECT c.id::text AS id, c.name, c.description FROM ${table} AS c ORDER BY c.id`;
  const createSql = `INSERT INTO ${table} (name, description) VALUES ($1, $2) RETURNING id::text AS id`;
  const store = 'category store';
  type Row = { id: string; name: string; description: string | null };

  return {
    async list() {
      const rows = await runStatement<Row>(pool, store, timeoutMs, listSql, []);
      return rows.map((row) => {
        const id = categoryId(row.id);
        return row.description === null ? { id, name: row.name } : { id, name: row.name, description: row.description };
      });
    },
    async create(newCategory: NewCategory) {
      let rows: Array<{ id: string }>;
      try {
        rows = await runStatement<{ id: string }>(pool, store, timeoutMs, createSql, [newCategory.name, newCategory.description ?? null]);
      } catch (error) {
        if ((error as { cause?: { code?: unknown } }).cause?.code === SEQUENCE_EXHAUSTED) {
          throw new PetstoreError('storage_full', 'The category store has used every safe integer id; nothing was created.', { cause: error });
        }
        throw error;
      }
      const id = categoryId((rows[0] as { id: string }).id);
      return newCategory.description === undefined
        ? { id, name: newCategory.name }
        : { id, name: newCategory.name, description: newCategory.description };
    },
  };
}

/** A stored id as a number, refused (not rounded) past 2^53 − 1. */
function categoryId(text: string): Category['id'] {
  const id = Number(text);
  if (!Number.isSafeInteger(id) || id < 1) {
    throw new Error(`The category id ${text} in PostgreSQL is above 2^53 - 1 (or below 1): it cannot be sent as a JSON number without rounding`);
  }
  return id;
}

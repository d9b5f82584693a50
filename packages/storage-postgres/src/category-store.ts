import {
  PetstoreError,
  type Category,
  type CategoryPage,
  type CategoryStore,
  type IdempotentCreateRequest,
  type IdempotentCreateResult,
  type NewCategory,
} from '@petstore/core';
import { createTurnBatches } from '@petstore/internal';
import type { Pool } from 'pg';
import { categoriesNames, type PostgresSchemaOptions } from './names.js';
import { assertPool, assertWhole, DEFAULT_CALL_TIMEOUT_MS, runStatement } from './postgres-call.js';

/**
 * Options of {@link postgresCategoryStore}: the pool, the deadline, and the names `schema` and `categoriesTable`
 * (the same options, defaults and limits as `migratePostgres`'s; see {@link PostgresSchemaOptions}).
 */
export interface PostgresCategoryStoreOptions extends Pick<PostgresSchemaOptions, 'schema' | 'categoriesTable'> {
  /**
   * A node-postgres (`pg`) `Pool` you create, configure and end. The store runs one statement per call on it and
   * never changes its settings or listeners. Give the pool an `'error'` listener (node-postgres emits one when an
   * idle connection drops, e.g. the server restarts, and an EventEmitter without a listener ends the process); the
   * pool opens new connections by itself.
   */
  pool: Pool;
  /**
   * Deadline of one `list`, `listVersion`, `create` or `createIdempotent` in ms, the wait for a pooled connection
   * included (for `listVersion`: from the end of the turn it was called in, when its read is sent); past it the call throws `service_unavailable` (cause: a {@link PostgresTimeoutError}) and the statement is cancelled in the
   * server (PostgreSQL's cancel request). Default 1000
   * ({@link DEFAULT_CALL_TIMEOUT_MS}).
   */
  callTimeoutMs?: number;
}

/** A {@link CategoryStore} in PostgreSQL, with the list version of migration version 3. */
export interface PostgresCategoryStore extends CategoryStore {
  list(page?: CategoryPage): Promise<Category[]>;
  /**
   * The `version` of `<categoriesTable>_list_version` in decimal and the version table's OID (`"3@16423"`): the
   * version is counted up in the transaction of every statement that writes the categories table, so it changes
   * exactly when a category is created through the store, and a reader sees a new category and its version
   * together, on every instance; the OID changes when the tables are made anew (dropped and migrated again,
   * restored from a dump), so a version never names two lists. The calls of one event-loop turn share one `SELECT`,
   * sent at the end of the turn: each caller gets the version of a read that started after its call.
   */
  listVersion(): Promise<string>;
}

/** The sequence behind the identity column stopped at its MAXVALUE (2^53 − 1). */
const SEQUENCE_EXHAUSTED = '2200H';

/**
 * A category store in a PostgreSQL table (see {@link postgresMigrations} for its columns). Ids come from the
 * table's identity column: `create` is one `INSERT … RETURNING id`, so parallel creates from any number of
 * processes get distinct, increasing ids (a failed or rolled-back insert leaves a gap, never a duplicate);
 * `list()` is one `SELECT … ORDER BY id`, a page one `SELECT … WHERE id > $after ORDER BY id LIMIT $limit` (keyset
 * paging on the primary key). `listVersion()` reads the one row of `<categoriesTable>_list_version` (migration
 * version 3), which a statement trigger on the categories table counts up in the writing transaction: the new row and
 * the new version commit together (creates queue on that row for the length of their one-statement transaction). The
 * `listVersion()` calls of one turn of the event loop share one `SELECT`, sent at the end of the turn (`setImmediate`,
 * as the rate-limit store's consumes), so the lists a busy server answers share their version reads, and every caller
 * still gets a version read after its call, so a category created anywhere before the call is in the list (no cache that could be
 * stale); a call made once that read was sent waits for the next one. Under fake timers that fake `setImmediate`,
 * advance them for a read to be sent. There is no `maxCategories`: bound the table with the database's own
 * means (quotas, monitoring).
 *
 * `createIdempotent` is one statement too, `SELECT … FROM <categoriesTable>_create_idempotent(…)` (migration
 * version 2): a PL/pgSQL function that, in the statement's transaction, answers the live record of `request.key` in
 * `<categoriesTable>_idempotency` (`replayed` with its category when the fingerprint is the request's, else `mismatch`;
 * nothing written), or claims the key (a new record, or an expired one taken over), inserts the category as
 * `create` does and stores its id in the record, which expires `request.retentionMs` after the database's clock
 * (`clock_timestamp()`). Category and record commit together or not at all. A parallel call with the same key
 * waits at its claim for the first call's transaction, then answers its record (`replayed`), so one key creates
 * one category. Each created record deletes up to two expired ones (skipping rows other calls hold), so the
 * records stay about as many as the live ones without a timer.
 *
 * Errors (every method):
 * - `PetstoreError('service_unavailable', …, { retryAfterSeconds: 5, cause })` (503 with `Retry-After: 5`, the core's
 *   `DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS`) when
 *   the database is unreachable, does not answer within `callTimeoutMs`, cancels the statement (`statement_timeout`)
 *   or is temporarily unable (starting, shutting down, too many connections, read-only during a failover). A
 *   `create` answered so **may or may not have been written**: the connection can drop after the database
 *   committed the row and before the answer arrived. Retrying it may therefore make a second category; retrying a
 *   `createIdempotent` with the same key answers the record instead, if it was written.
 * - `PetstoreError('storage_full')` (507) from `create` and `createIdempotent` when the identity column has handed
 *   out 2^53 − 1, the largest id that survives JSON in every client; nothing is written, no record either.
 * - a plain Error (500) when the table (or, for `createIdempotent`, migration version 2; for `listVersion`, version 3)
 *   is missing (run
 *   {@link migratePostgres}), a stored id is above 2^53 − 1 (a row inserted by hand: refused rather than
 *   rounded), or the database answers with another error.
 * - a TypeError (500) from `createIdempotent` when `request.retentionMs` is not a whole number ≥ 1; nothing is
 *   sent.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#store-failures
 * @throws TypeError when `pool` is not a pool, `callTimeoutMs` is not a whole number ≥ 1, or `schema` /
 *   `categoriesTable` is not a plain name (letters, digits, `_`; a table up to 45 characters); the message names
 *   the option.
 */
export function postgresCategoryStore(options: PostgresCategoryStoreOptions): PostgresCategoryStore {
  const { pool, callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS } = options;
  assertPool(pool);
  assertWhole(callTimeoutMs, 'callTimeoutMs', 1);
  const names = categoriesNames(options);
  const table = names.categories;
  // `c.id`: the column, not the text alias (which would sort "10" before "9").
  const listSql = `SELECT c.id::text AS id, c.name, c.description FROM ${table} AS c ORDER BY c.id`;
  // Keyset paging on the primary key: a page reads its own rows, not the table's (LIMIT NULL: no bound).
  const pageSql = `SELECT c.id::text AS id, c.name, c.description FROM ${table} AS c WHERE c.id > $1 ORDER BY c.id LIMIT $2`;
  const listVersionSql = `SELECT v.version::text || '@' || v.tableoid::text AS version FROM ${names.listVersion} AS v`;
  const createSql = `INSERT INTO ${table} (name, description) VALUES ($1, $2) RETURNING id::text AS id`;
  const createIdempotentSql = `SELECT r.outcome, r.id, r.name, r.description FROM ${names.createIdempotentFunction}($1, $2, $3, $4, $5) AS r`;
  const store = 'category store';
  type Row = { id: string; name: string; description: string | null };
  type IdempotentRow = { outcome: 'created' | 'replayed' | 'mismatch'; id: string | null; name: string | null; description: string | null };
  type VersionWaiter = { resolve(version: string): void; reject(error: unknown): void };

  /** The `listVersion()` calls of this turn, answered by one read sent at its end (no bound: they share its row). */
  const addVersionWaiter = createTurnBatches<VersionWaiter>(Number.POSITIVE_INFINITY, (waiters) => {
    runStatement<{ version: string }>(pool, store, callTimeoutMs, listVersionSql, []).then(
      (rows) => {
        const row = rows[0];
        if (row === undefined) {
          const error = new Error(`The list version row of ${table} is missing: run migratePostgres (migration version 3)`);
          for (const waiter of waiters) waiter.reject(error);
        } else {
          for (const waiter of waiters) waiter.resolve(row.version);
        }
      },
      (error: unknown) => {
        for (const waiter of waiters) waiter.reject(error);
      },
    );
  });

  /** Runs a statement that inserts a category: an exhausted identity column is `storage_full`. */
  async function inserting<R extends Row | IdempotentRow | { id: string }>(sql: string, values: unknown[]): Promise<R[]> {
    try {
      return await runStatement<R>(pool, store, callTimeoutMs, sql, values);
    } catch (error) {
      if ((error as { cause?: { code?: unknown } }).cause?.code === SEQUENCE_EXHAUSTED) {
        throw new PetstoreError('storage_full', 'The category store has used every safe integer id; nothing was created.', { cause: error });
      }
      throw error;
    }
  }

  /** The category created from `newCategory` with the stored id `text`. */
  function createdCategory(text: string, newCategory: NewCategory): Category {
    const id = categoryId(text);
    return newCategory.description === undefined
      ? { id, name: newCategory.name }
      : { id, name: newCategory.name, description: newCategory.description };
  }

  return {
    backend: 'postgresql',
    async list(page?: CategoryPage) {
      const rows =
        page === undefined
          ? await runStatement<Row>(pool, store, callTimeoutMs, listSql, [])
          : await runStatement<Row>(pool, store, callTimeoutMs, pageSql, [page.after ?? 0, page.limit ?? null]);
      return rows.map(categoryFromRow);
    },
    listVersion() {
      return new Promise<string>((resolve, reject) => {
        addVersionWaiter({ resolve, reject });
      });
    },
    async create(newCategory: NewCategory) {
      const rows = await inserting<{ id: string }>(createSql, [newCategory.name, newCategory.description ?? null]);
      return createdCategory((rows[0] as { id: string }).id, newCategory);
    },
    async createIdempotent(newCategory: NewCategory, request: IdempotentCreateRequest): Promise<IdempotentCreateResult> {
      assertWhole(request.retentionMs, 'retentionMs', 1);
      const rows = await inserting<IdempotentRow>(createIdempotentSql, [
        request.key,
        request.fingerprint,
        request.retentionMs,
        newCategory.name,
        newCategory.description ?? null,
      ]);
      const row = rows[0] as IdempotentRow;
      switch (row.outcome) {
        case 'created':
          return { outcome: 'created', category: createdCategory(row.id as string, newCategory) };
        case 'replayed':
          return { outcome: 'replayed', category: categoryFromRow(row as Row) };
        default:
          return { outcome: 'mismatch' };
      }
    },
  };
}

/** A stored row as a Category: no `description` key when the column is NULL. */
function categoryFromRow(row: { id: string; name: string; description: string | null }): Category {
  const id = categoryId(row.id);
  return row.description === null ? { id, name: row.name } : { id, name: row.name, description: row.description };
}

/** A stored id as a number, refused (not rounded) past 2^53 − 1. */
function categoryId(text: string): Category['id'] {
  const id = Number(text);
  if (!Number.isSafeInteger(id) || id < 1) {
    throw new Error(`The category id ${text} in PostgreSQL is above 2^53 - 1 (or below 1): it cannot be sent as a JSON number without rounding`);
  }
  return id;
}

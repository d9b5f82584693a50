/**
 * How both stores call PostgreSQL: a deadline on every statement, and one rule for what a failure means.
 */
import { hash } from 'node:crypto';
import { DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS, PetstoreError } from '@petstore/core';
import type { Pool, QueryResultRow } from 'pg';

/** Default deadline of one store call, in ms: the `callTimeoutMs` option of both stores. */
export const DEFAULT_CALL_TIMEOUT_MS = 1000;

/**
 * SQLSTATEs that mean "not now" rather than "never" (PostgreSQL's error codes appendix): the connection failed
 * (class 08), the server lacks resources (class 53: too many connections, out of memory, disk full), is shutting
 * down or starting (57P01–57P03), cancelled the statement (57014: `statement_timeout`), a lock wait timed out
 * (55P03: `lock_timeout`), the transaction lost a serialization race or a deadlock (40001, 40P01), or the server is
 * a read-only standby, e.g. during a failover (25006).
 */
const TRANSIENT_SQLSTATES = /^(08...|53...|57P0[123]|57014|55P03|40001|40P01|25006)$/;

/** Undefined table, function or schema: the migrations have not been run. */
const MISSING_SCHEMA_SQLSTATES = new Set(['42P01', '42883', '3F000']);

/**
 * The cause of a store failure when PostgreSQL did not answer within the deadline. The statement may still
 * run later on the server: a timed-out consume may have been charged, a timed-out create may have been written.
 */
export class PostgresTimeoutError extends Error {
  override readonly name = 'PostgresTimeoutError';
  /** @param callTimeoutMs the deadline that passed (the store's `callTimeoutMs`), in ms */
  constructor(readonly callTimeoutMs: number) {
    super(`PostgreSQL did not answer within callTimeoutMs (${callTimeoutMs} ms)`);
  }
}

/**
 * Checks a whole number option or argument (`callTimeoutMs`, a window's `limit`, …), named `what` in the error.
 * @throws TypeError when `value` is not a safe integer ≥ `min`.
 */
export function assertWhole(value: number, what: string, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) throw new TypeError(`${what} must be a whole number >= ${min}, got ${String(value)}`);
}

/** Checks the `pool` option: something with node-postgres's `query(config)`. */
export function assertPool(pool: Pool): void {
  if (typeof (pool as { query?: unknown } | undefined)?.query !== 'function') {
    throw new TypeError('pool must be a node-postgres (pg) Pool');
  }
}

/** A database error as node-postgres raises it: the server's SQLSTATE in `code`, and a `severity`. */
function sqlState(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  return typeof code === 'string' && typeof severity === 'string' ? code : undefined;
}

/**
 * True when a failure means PostgreSQL is unreachable, too slow or temporarily unable to serve: a timeout, a
 * connection error (anything that is not an error reported by the server), or a transient SQLSTATE.
 */
export function isUnavailable(error: unknown): boolean {
  const state = sqlState(error);
  return state === undefined || TRANSIENT_SQLSTATES.test(state);
}

/**
 * The error of a store call that found PostgreSQL unavailable: `service_unavailable` (503) with the `Retry-After` of
 * the core's `DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS`, the failure as `cause`.
 * @param store the store, named in the message (`category store`, …)
 */
export function storeUnavailable(store: string, cause: unknown): PetstoreError {
  return new PetstoreError('service_unavailable', `The ${store} is unavailable; retry later.`, {
    retryAfterSeconds: DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS,
    cause,
  });
}

/**
 * Runs one statement on the pool under a deadline of `callTimeoutMs` (covering the wait for a pooled connection
 * too) and turns a failure into the store's error: `service_unavailable` (503, `Retry-After` of the core's
 * `DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS`, 5) when the database is unavailable, else a plain Error (500);
 * both carry the original failure as `cause`. The statement's own late outcome after a timeout is ignored
 * (never an unhandled rejection).
 */
export async function runStatement<Row extends QueryResultRow>(
  pool: Pool,
  store: string,
  callTimeoutMs: number,
  text: string,
  values: unknown[],
): Promise<Row[]> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new PostgresTimeoutError(callTimeoutMs)), callTimeoutMs);
    timer.unref();
  });
  try {
    const result = await Promise.race([pool.query<Row>({ name: statementName(text), text, values }), expired]);
    return result.rows;
  } catch (error) {
    if (isUnavailable(error)) throw storeUnavailable(store, error);
    if (MISSING_SCHEMA_SQLSTATES.has(sqlState(error) as string)) {
      throw new Error(`The ${store}'s table is missing: run migratePostgres() (or its SQL) first`, { cause: error });
    }
    throw new Error(`PostgreSQL refused the ${store}'s statement`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

const statementNames = new Map<string, string>();
/**
 * A prepared statement's name for `text`: the same on every connection, distinct for distinct texts. Named, the
 * statement is parsed and planned once per connection instead of per call, which lowers PostgreSQL's CPU per
 * request (measured: BENCHMARKS.md, section "Backends: memory, Redis, PostgreSQL", `npm run bench -- --only=backends`).
 */
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) statementNames.set(text, (name = `petstore_${hash('sha256', text, 'hex').slice(0, 32)}`));
  return name;
}

/**
 * How the stores call PostgreSQL: a deadline on every statement (cancelled in the server when it passes), and one
 * rule for what a failure means.
 */
import { hash } from 'node:crypto';
import { DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS, PetstoreError } from '@petstore/core';
import { connect } from 'node:net';
import type { Pool, PoolClient, QueryConfig } from 'pg';
import { serialize } from 'pg-protocol';

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
 * The cause of a store failure when PostgreSQL did not answer within the deadline. The store then asks the server
 * to cancel the statement, which rolls it back; a statement that had already committed (its answer lost or late)
 * stays applied: a timed-out consume may have been charged, a timed-out create may have been written.
 */
export class PostgresTimeoutError extends Error {
  override readonly name = 'PostgresTimeoutError';
  /** @param callTimeoutMs the deadline that passed (the store's `callTimeoutMs`), in ms */
  constructor(readonly callTimeoutMs: number) {
    super(`PostgreSQL did not answer within callTimeoutMs (${callTimeoutMs} ms)`);
  }
}

/** Checks a whole number option or argument; one copy for every store (see @petstore/internal). */
export { assertWhole } from '@petstore/internal';

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
 * The store's error for a statement that failed with `error`: `service_unavailable` (503, `Retry-After` of the
 * core's `DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS`) when the database is unavailable ({@link isUnavailable}), a
 * plain Error saying to run the migrations when the table or function is missing, else a plain Error (500); each
 * with `error` as `cause`.
 * @param store the store, named in the message (`category store`, …)
 */
export function statementFailure(store: string, error: unknown): Error {
  if (isUnavailable(error)) return storeUnavailable(store, error);
  if (MISSING_SCHEMA_SQLSTATES.has(sqlState(error) as string)) {
    return new Error(`The ${store}'s table is missing: run migratePostgres() (or its SQL) first`, { cause: error });
  }
  return new Error(`PostgreSQL refused the ${store}'s statement`, { cause: error });
}

/** What node-postgres's `Client` knows of its session: where it connected and the key that cancels its statements. */
interface SessionOf {
  host?: string;
  port?: number;
  processID?: number | null;
  secretKey?: number | null;
}

/**
 * Asks the server to cancel the statement that `client`'s session is running: PostgreSQL's cancel request (its
 * protocol's CancelRequest, as node-postgres's `pg-protocol` writes it), sent on a connection of its own, so it
 * needs no pooled connection and no authentication. Resolves once the server has closed that connection, by which
 * time it has signalled the session (a session that has finished the statement ignores the signal while it waits
 * for the next one); never rejects (the statement then ends on its own).
 * @see https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-FLOW-CANCELING-REQUESTS
 */
function cancelStatement(client: PoolClient): Promise<void> {
  const { host, port, processID, secretKey } = client as unknown as SessionOf;
  if (typeof processID !== 'number' || typeof secretKey !== 'number' || typeof port !== 'number') return Promise.resolve();
  return new Promise((resolve) => {
    const socket =
      typeof host === 'string' && host.startsWith('/') ? connect({ path: `${host}/.s.PGSQL.${port}` }) : connect({ port, host: host || 'localhost' });
    socket.once('connect', () => socket.end(serialize.cancel(processID, secretKey)));
    socket.on('error', () => undefined);
    socket.once('close', () => resolve());
    socket.setTimeout(CANCEL_TIMEOUT_MS, () => socket.destroy());
  });
}

/** How long a cancel request may take before it is given up (the statement then ends on its own). */
const CANCEL_TIMEOUT_MS = 5000;

/**
 * Runs one statement on a connection of the pool under a deadline of `callTimeoutMs` (covering the wait for a pooled
 * connection too) and turns a failure into the store's error ({@link statementFailure}). When the deadline passes
 * while the statement runs, the call rejects at once (cause: a {@link PostgresTimeoutError}) and a cancel request
 * stops the statement in the server (it fails there with SQLSTATE 57014 and is rolled back, unless it had finished;
 * a cancel request that came before the statement started is sent again every `callTimeoutMs` until it has ended);
 * the connection goes back to the pool once the statement has ended and the cancel request has been handled, so the
 * cancel never reaches a later statement. A connection that failed (not an error the server reported) is closed
 * rather than returned to the pool. Given a `Client` in place of a pool (a statement inside the host's transaction), the
 * statement runs on it and the deadline rejects without cancelling anything: the client may be running another of
 * the host's statements by then. `waitMs` (default `callTimeoutMs`) is what is left of the deadline for a call that
 * has waited already (a consume held for the statement before it); the error still names `callTimeoutMs`.
 */
export function runStatement<Row>(
  pool: Pool,
  store: string,
  callTimeoutMs: number,
  text: string,
  values: unknown[],
  waitMs = callTimeoutMs,
): Promise<Row[]> {
  return new Promise<Row[]>((resolve, reject) => {
    let expired = false;
    let cancelRunning: (() => void) | undefined;
    const timer = setTimeout(() => {
      expired = true;
      reject(storeUnavailable(store, new PostgresTimeoutError(callTimeoutMs)));
      cancelRunning?.();
    }, waitMs);
    timer.unref();
    const query: QueryConfig = { name: statementName(text), text, values };
    if (!isPool(pool)) {
      // A client of the host's (its transaction, say): the statement joins its queue; the deadline answers alone.
      (pool as Pool).query(query).then(
        (result) => {
          clearTimeout(timer);
          resolve(result.rows as Row[]);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(statementFailure(store, error));
        },
      );
      return;
    }
    pool.connect().then(
      (client) => {
        if (expired) {
          client.release();
          return;
        }
        // A checked-out connection's failure (the server gone, say) is ours to hear: it then fails the statement, and
        // the connection is closed rather than given back.
        let failed: Error | undefined;
        const onError = (error: Error) => {
          failed = error;
        };
        client.on('error', onError);
        let ended = false;
        let onEnd = () => {};
        const whenEnded = new Promise<void>((resolve) => (onEnd = resolve));
        /** The cancel request being sent, if any: the connection goes back to the pool once it has been handled. */
        let cancelling: Promise<void> | undefined;
        cancelRunning = () => {
          void (async () => {
            // A cancel request that reaches the session before the statement has started is ignored: ask again, every
            // callTimeoutMs, until the statement has ended.
            while (!ended) {
              cancelling = cancelStatement(client);
              await cancelling;
              let wait: NodeJS.Timeout | undefined;
              await Promise.race([new Promise((resolve) => (wait = setTimeout(resolve, callTimeoutMs)).unref()), whenEnded]);
              clearTimeout(wait);
            }
          })();
        };
        client.query(query).then(
          (result) => {
            ended = true;
            onEnd();
            clearTimeout(timer);
            cancelRunning = undefined;
            resolve(result.rows as Row[]);
            void release(client, onError, cancelling, failed);
          },
          (error: unknown) => {
            ended = true;
            onEnd();
            clearTimeout(timer);
            cancelRunning = undefined;
            reject(statementFailure(store, error));
            void release(client, onError, cancelling, failed ?? (sqlState(error) === undefined ? error : undefined));
          },
        );
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(statementFailure(store, error));
      },
    );
  });
}

/** True for a node-postgres `Pool` (it counts its connections), false for a `Client` used in its place. */
function isPool(pool: Pool): boolean {
  return typeof pool.connect === 'function' && typeof (pool as { totalCount?: unknown }).totalCount === 'number';
}

/**
 * Returns `client` to the pool once a cancel request sent for it has been handled, without the `'error'` listener
 * `onError` the store added; `broken`: close it instead.
 */
async function release(client: PoolClient, onError: (error: Error) => void, cancelled: Promise<void> | undefined, broken: unknown): Promise<void> {
  if (cancelled !== undefined) await cancelled;
  client.off('error', onError);
  client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
}

const statementNames = new Map<string, string>();
/**
 * A prepared statement's name for `text`: the same on every connection, distinct for distinct texts. Named, the
 * statement is parsed and planned once per connection instead of per call.
 */
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) statementNames.set(text, (name = `petstore_${hash('sha256', text, 'hex').slice(0, 32)}`));
  return name;
}

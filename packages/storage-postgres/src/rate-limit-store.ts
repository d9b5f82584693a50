import { windowStartMs, type ConsumeRequest, type ConsumeResult, type RateLimitStore, type WindowUsage } from '@petstore/core';
import type { Pool } from 'pg';
import { rateLimitsNames, type PostgresSchemaOptions } from './names.js';
import { assertPool, assertWhole, DEFAULT_CALL_TIMEOUT_MS, runStatement } from './postgres-call.js';

/**
 * Options of {@link postgresRateLimitStore}: the pool, the deadline, whose clock decides, and the names `schema`
 * and `rateLimitsTable` (the same options, defaults and limits as `migratePostgres`'s; see
 * {@link PostgresSchemaOptions}).
 */
export interface PostgresRateLimitStoreOptions extends Pick<PostgresSchemaOptions, 'schema' | 'rateLimitsTable'> {
  /**
   * A node-postgres (`pg`) `Pool` you create, configure and end; see {@link PostgresCategoryStoreOptions.pool}
   * (give it an `'error'` listener). One statement per consume; the store never changes the pool.
   */
  pool: Pool;
  /**
   * Deadline of one consume in ms, the wait for a pooled connection included: past it the promise rejects (cause: a
   * {@link PostgresTimeoutError}; the engine's `onStoreFailure` policy decides what the caller gets). Default 1000
   * ({@link DEFAULT_CALL_TIMEOUT_MS}).
   */
  callTimeoutMs?: number;
  /**
   * Whose clock decides. `'server'` (default): the database's `clock_timestamp()`, read once the key's row is
   * locked, so app servers with skewed clocks agree on windows and bans; `request.nowMs` is ignored and the
   * result's `nowMs` is database time. `'request'`: `request.nowMs` (tests that move time, e.g. the conformance
   * suite).
   */
  time?: 'server' | 'request';
}

type ConsumeRow = { now_ms: string; outcome: number; banned_until_ms: string; used: string };

/**
 * A rate-limit store in a PostgreSQL table, for teams that run no Redis. A consume is ONE statement, `SELECT *
 * FROM <rateLimitsTable>_consume(…)`: a PL/pgSQL function (created by {@link migratePostgres}; see
 * {@link postgresMigrations} for the row layout) that locks the key's row, checks every window and the ban,
 * charges all windows or none, counts a rejection toward a ban, starts the ban and sets the row's
 * `expires_at_ms` — a mirror of `decideConsume` from `@petstore/core`, atomic across every process sharing the
 * database (row lock; PostgreSQL's default READ COMMITTED isolation, which the function needs: under
 * REPEATABLE READ or SERIALIZABLE a contended key fails with a serialization error, answered as below).
 *
 * Expired rows are deleted by the consumes themselves: each consume that creates a row deletes up to two rows
 * whose `expires_at_ms` has passed (by index, skipping locked rows), so the table stays about as large as the
 * set of live keys with no timer and no job to schedule. A row that lost its `expires_at_ms` (set to NULL) gets
 * it back on the key's next consume.
 *
 * Failures: `consume` rejects when the database errors or does not answer within `callTimeoutMs` — with a
 * `PetstoreError('service_unavailable')` (cause: the original failure) when it is unreachable, slow or
 * temporarily unable, else a plain Error. It never answers "allowed" on a failure: the engine's
 * `onStoreFailure` policy turns the rejection into 503 (fail-closed) or the insurance store (fail-open). A
 * consume that timed out may still be applied later (one request charged without an answer).
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#store-failures
 * @throws TypeError when `pool` is not a pool, `callTimeoutMs` is not a whole number ≥ 1, `time` is neither
 *   `'server'` nor `'request'`, or `schema` / `rateLimitsTable` is not a plain name (letters, digits, `_`; a table
 *   up to 49 characters); the message names the option. `consume` rejects with a TypeError on a request with
 *   non-integer numbers, which the core never sends.
 */
export function postgresRateLimitStore(options: PostgresRateLimitStoreOptions): RateLimitStore {
  const { pool, callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS, time = 'server' } = options;
  assertPool(pool);
  assertWhole(callTimeoutMs, 'callTimeoutMs', 1);
  if (time !== 'server' && time !== 'request') throw new TypeError(`time must be 'server' or 'request', got ${String(time)}`);
  const names = rateLimitsNames(options);
  const sql = `SELECT now_ms, outcome, banned_until_ms, used FROM ${names.consumeFunction}($1, $2, $3, $4, $5, $6, $7, $8)`;

  return {
    // Stubs for the store contract v2 (issue 21), replaced by the PostgreSQL part of that issue.
    async peek() {
      throw new Error('not implemented yet');
    },
    async reset() {
      throw new Error('not implemented yet');
    },
    async consume(key: string, request: ConsumeRequest): Promise<ConsumeResult> {
      const { windows, ban } = request;
      if (time === 'request') assertWhole(request.nowMs, 'nowMs', 0);
      for (const window of windows) {
        assertWhole(window.limit, `window "${window.name}" limit`, 0);
        assertWhole(window.windowMs, `window "${window.name}" windowMs`, 1);
      }
      if (ban !== undefined) {
        assertWhole(ban.rejectedThreshold, 'ban.rejectedThreshold', 1);
        assertWhole(ban.intervalMs, 'ban.intervalMs', 1);
        assertWhole(ban.durationMs, 'ban.durationMs', 1);
      }
      const rows = await runStatement<ConsumeRow>(pool, 'rate-limit store', callTimeoutMs, sql, [
        key,
        windows.map((window) => window.name),
        windows.map((window) => window.limit),
        windows.map((window) => window.windowMs),
        ban?.rejectedThreshold ?? 0,
        ban?.intervalMs ?? 0,
        ban?.durationMs ?? 0,
        time === 'request' ? request.nowMs : null,
      ]);
      const row = rows[0] as ConsumeRow;
      const nowMs = Number(row.now_ms);
      const used = row.used === '' ? [] : row.used.split(',').map(Number);
      const usage: WindowUsage[] = windows.map(({ name, limit, windowMs }, index) => {
        const count = used[index] as number;
        return { name, limit, windowMs, used: count, remaining: Math.max(0, limit - count), resetAtMs: windowStartMs(nowMs, windowMs) + windowMs };
      });
      if (row.outcome === 0) return { allowed: true, nowMs, windows: usage };
      if (row.outcome === 1) return { allowed: false, reason: 'rate_limited', nowMs, windows: usage };
      return { allowed: false, reason: 'banned', nowMs, windows: usage, bannedUntilMs: Number(row.banned_until_ms) };
    },
  };
}

import {
  peekState,
  windowStartMs,
  type ConsumeRequest,
  type ConsumeResult,
  type RateLimitSnapshot,
  type RateLimitState,
  type RateLimitStore,
  type WindowUsage,
} from '@petstore/core';
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
   * (give it an `'error'` listener). One statement per call; the store never changes the pool.
   */
  pool: Pool;
  /**
   * Deadline of one `consume`, `peek` or `reset` in ms, the wait for a pooled connection included: past it the promise rejects (cause: a
   * {@link PostgresTimeoutError}; the engine's `onStoreFailure` policy decides what the caller gets). Default 1000
   * ({@link DEFAULT_CALL_TIMEOUT_MS}).
   */
  callTimeoutMs?: number;
  /**
   * Whose clock decides. `'server'` (default): the database's `clock_timestamp()`, read once the record's row is
   * locked (by `peek`: when it reads the row), so app servers with skewed clocks agree on windows and bans;
   * `request.nowMs` and `peek`'s `nowMs` are ignored and the answer's `nowMs` is database time. `'request'`:
   * `request.nowMs` and `peek`'s `nowMs` (tests that move time, e.g. the conformance suite and the model
   * comparison).
   */
  time?: 'server' | 'request';
}

type ConsumeRow = { now_ms: string; outcome: number; banned_until_ms: string; used: string };
type PeekRow = { now_ms: string; record: string | null };

/** A row of the rate-limit table as `row_to_json` writes it (migration version 2; times in Unix epoch ms). */
interface RecordJson {
  window_names: string[];
  window_starts_ms: number[];
  window_counts: number[];
  window_limits: number[];
  window_lengths_ms: number[];
  ban_subjects: string[];
  rejected_starts_ms: number[];
  rejected_counts: number[];
  banned_until_ms: number[];
  expires_at_ms: number | null;
}

/**
 * A rate-limit store in a PostgreSQL table, for teams that run no Redis. One row per record (`account:<accountId>`,
 * `anon:<address>`) holds its windows (each with the limit and length it was last charged with) and the bans of its
 * ban subjects (see {@link postgresMigrations} for the row layout, migration version 2 of the rate-limit table).
 *
 * - `consume` is ONE statement, `SELECT … FROM <rateLimitsTable>_consume(…)`: a PL/pgSQL function (created by
 *   {@link migratePostgres}) that locks the record's row, checks every window and the ban subject's ban, charges
 *   the request's `cost` to all windows or to none, counts a rejection toward the subject's ban, starts the ban,
 *   prunes the ended bans of the other subjects and sets the row's `expires_at_ms` — a mirror of `decideConsume`
 *   from `@petstore/core`, atomic across every process sharing the database (row lock; PostgreSQL's default READ
 *   COMMITTED isolation, which the function needs: under REPEATABLE READ or SERIALIZABLE a contended record fails
 *   with a serialization error, answered as below). A banned subject's requests write nothing.
 * - `peek` is one statement that reads the row and the clock (no lock, nothing written) and answers `peekState`
 *   of the record at that clock: the windows as of now with the limit each was last charged with, and the live
 *   bans.
 * - `reset` is one `DELETE` of the row: the record's windows and every ban in it.
 *
 * Expired rows are deleted by the consumes themselves: each consume that creates a row deletes up to two rows
 * whose `expires_at_ms` has passed (by index, skipping locked rows), so the table stays about as large as the
 * set of live records with no timer and no job to schedule. A row that lost its `expires_at_ms` (set to NULL) gets
 * it back on the record's next consume.
 *
 * Failures: every method rejects when the database errors or does not answer within `callTimeoutMs` — with a
 * `PetstoreError('service_unavailable')` (cause: the original failure) when it is unreachable, slow or
 * temporarily unable, else a plain Error. `consume` never answers "allowed" on a failure: the engine's
 * `onStoreFailure` policy turns the rejection into 503 (fail-closed) or the insurance store (fail-open). A
 * consume or reset that timed out may still be applied later (one request charged without an answer; a record
 * removed).
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#store-failures
 * @throws TypeError when `pool` is not a pool, `callTimeoutMs` is not a whole number ≥ 1, `time` is neither
 *   `'server'` nor `'request'`, or `schema` / `rateLimitsTable` is not a plain name (letters, digits, `_`; a table
 *   up to 49 characters); the message names the option. `consume` rejects with a TypeError, before sending
 *   anything, on a request with non-integer numbers or a cost below 1, and `peek` with `time: 'request'` on a
 *   non-integer `nowMs`; the core never sends them.
 */
export function postgresRateLimitStore(options: PostgresRateLimitStoreOptions): RateLimitStore {
  const { pool, callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS, time = 'server' } = options;
  assertPool(pool);
  assertWhole(callTimeoutMs, 'callTimeoutMs', 1);
  if (time !== 'server' && time !== 'request') throw new TypeError(`time must be 'server' or 'request', got ${String(time)}`);
  const names = rateLimitsNames(options);
  const consumeSql = `SELECT now_ms, outcome, banned_until_ms, used FROM ${names.consumeFunction}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`;
  // The clock (the database's, or the request's with time: 'request') and the row, in one statement; the row as
  // JSON text, so that a host's pg.types parsers cannot change it (times are below 2^53: exact as JSON numbers).
  const peekSql = `SELECT n.ms::text AS now_ms, (SELECT row_to_json(x)::text FROM ${names.rateLimits} AS x WHERE x.key = $1) AS record
FROM (SELECT coalesce($2::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS ms) AS n`;
  const resetSql = `DELETE FROM ${names.rateLimits} WHERE key = $1`;

  return {
    backend: 'postgresql',
    async peek(key: string, nowMs: number): Promise<RateLimitSnapshot> {
      if (time === 'request') assertWhole(nowMs, 'nowMs', 0);
      const rows = await runStatement<PeekRow>(pool, 'rate-limit store', callTimeoutMs, peekSql, [key, time === 'request' ? nowMs : null]);
      const row = rows[0] as PeekRow;
      const readAtMs = Number(row.now_ms);
      return peekState(row.record === null ? undefined : liveState(JSON.parse(row.record) as RecordJson, readAtMs), readAtMs);
    },
    async reset(key: string): Promise<void> {
      await runStatement(pool, 'rate-limit store', callTimeoutMs, resetSql, [key]);
    },
    async consume(key: string, request: ConsumeRequest): Promise<ConsumeResult> {
      const { windows, ban, cost, banSubject } = request;
      if (time === 'request') assertWhole(request.nowMs, 'nowMs', 0);
      assertWhole(cost, 'cost', 1);
      if (typeof banSubject !== 'string') throw new TypeError(`banSubject must be a string, got ${String(banSubject)}`);
      for (const window of windows) {
        assertWhole(window.limit, `window "${window.name}" limit`, 0);
        assertWhole(window.windowMs, `window "${window.name}" windowMs`, 1);
      }
      if (ban !== undefined) {
        assertWhole(ban.rejectedThreshold, 'ban.rejectedThreshold', 1);
        assertWhole(ban.intervalMs, 'ban.intervalMs', 1);
        assertWhole(ban.durationMs, 'ban.durationMs', 1);
      }
      const rows = await runStatement<ConsumeRow>(pool, 'rate-limit store', callTimeoutMs, consumeSql, [
        key,
        windows.map((window) => window.name),
        windows.map((window) => window.limit),
        windows.map((window) => window.windowMs),
        cost,
        banSubject,
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

/**
 * The record a row holds, as `decideConsume` keeps it; `undefined` when the row has expired at `nowMs` (it holds
 * nothing live then, as the store's consume treats it). A lost expiry (NULL) still counts.
 */
function liveState(row: RecordJson, nowMs: number): RateLimitState | undefined {
  if (row.expires_at_ms !== null && row.expires_at_ms <= nowMs) return undefined;
  const state: RateLimitState = { counters: {}, bans: {} };
  row.window_names.forEach((name, i) => {
    Object.defineProperty(state.counters, name, {
      value: { startMs: row.window_starts_ms[i], count: row.window_counts[i], limit: row.window_limits[i], windowMs: row.window_lengths_ms[i] },
      enumerable: true,
    });
  });
  row.ban_subjects.forEach((subject, i) => {
    const count = row.rejected_counts[i] as number;
    Object.defineProperty(state.bans, subject, {
      value: { rejected: count > 0 ? { startMs: row.rejected_starts_ms[i], count } : undefined, bannedUntilMs: row.banned_until_ms[i] },
      enumerable: true,
    });
  });
  return state;
}

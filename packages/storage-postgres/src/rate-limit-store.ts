import {
  peekState,
  RATE_LIMIT_ALGORITHMS,
  windowStartMs,
  windowUsage,
  type BanPolicy,
  type ConsumeRequest,
  type ConsumeResult,
  type RateLimitSnapshot,
  type RateLimitState,
  type RateLimitStore,
  type RateLimitWindow,
  type WindowCounter,
  type WindowUsage,
} from '@petstore/core';
import { cachePerPolicy, createTurnBatches, storedKeyText } from '@petstore/internal';
import type { Pool } from 'pg';
import { DatabaseError } from 'pg-protocol';
import { rateLimitsNames, type PostgresSchemaOptions } from './names.js';
import { assertPool, assertWhole, DEFAULT_CALL_TIMEOUT_MS, runStatement, statementFailure } from './postgres-call.js';

/**
 * Options of {@link postgresRateLimitStore}: the pool, the deadline, whose clock decides, and the names `schema`
 * and `rateLimitsTable` (the same options, defaults and limits as `migratePostgres`'s; see
 * {@link PostgresSchemaOptions}).
 */
export interface PostgresRateLimitStoreOptions extends Pick<PostgresSchemaOptions, 'schema' | 'rateLimitsTable'> {
  /**
   * A node-postgres (`pg`) `Pool` you create, configure and end; see {@link PostgresCategoryStoreOptions.pool}
   * (give it an `'error'` listener). One statement per call (per turn's consumes), each on a connection taken from
   * the pool and given back; the store never changes the pool.
   */
  pool: Pool;
  /**
   * Deadline of one statement (a turn's consumes, a `peek` or a `reset`) in ms, the wait for a pooled connection
   * included: past it the promise rejects (cause: a {@link PostgresTimeoutError}; the engine's `onStoreFailure`
   * policy decides what the caller gets) and the statement is cancelled in the server. Default 1000
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

type PeekRow = { now_ms: string; record: string | null };

/**
 * Most consumes in one statement. Bounds how long one statement holds its row locks and the subtransactions it
 * opens (one per record it writes): well below the 64 that PostgreSQL caches per transaction, past which every
 * snapshot taken by any session meanwhile has to look subtransactions up in `pg_subtrans`.
 */
export const MAX_CONSUMES_PER_STATEMENT = 32;

/** A policy (windows and ban) as the consume function takes it, built once per frozen windows array and ban. */
interface Policy {
  names: string[];
  limits: number[];
  lengthsMs: number[];
  /** Per window `'sliding'`, `'gcra'` or `null` (fixed); `null` when every window is fixed. */
  algorithms: Array<'sliding' | 'gcra' | null> | null;
  banThreshold: number;
  banIntervalMs: number;
  banDurationMs: number;
}

/** One consume waiting for its statement. */
interface Pending {
  key: string;
  policy: Policy;
  cost: number;
  banSubject: string;
  nowMs: number;
  /** When its caller gives up: the consume's start + `callTimeoutMs` (this process's clock, Unix epoch ms). */
  deadlineAtMs: number;
  resolve(decision: ConsumeManyRow): void;
  reject(error: unknown): void;
}

/** A row of `<rateLimitsTable>_consume_many`: one consume's decision, or its failure (see migrations.ts). */
interface ConsumeManyRow {
  ordinal: number;
  now_ms: string | null;
  outcome: number | null;
  banned_until_ms: string | null;
  used: string | null;
  error_code: string | null;
  error_message: string | null;
  /** The database's clock when the call started (Unix epoch ms, as text). */
  clock_ms: string | null;
  /**
   * Per window the start of its counter (gcra: the counter's time), comma-separated; NULL when the windows and the
   * stored counters are all fixed (then `used` holds each window's count, as before version 7).
   */
  starts_ms: string | null;
  /** Per window the previous window's count of a sliding counter (0 for the others), comma-separated; NULL as `starts_ms`. */
  previous_counts: string | null;
}

/**
 * The SQLSTATE (query_canceled) of a consume whose call started past its deadline: nothing charged. Transient, so a
 * 503 like the caller's own timeout.
 */
const DEADLINE_PASSED = '57014';

/** A row of the rate-limit table as `row_to_json` writes it (migration versions 2 and 6; times in Unix epoch ms). */
interface RecordJson {
  window_names: string[];
  /** Absent before version 6; NULL when every counter is fixed. */
  window_algorithms?: Array<'sliding' | 'gcra' | null> | null;
  window_previous_counts?: number[] | null;
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
 * - `consume`: the consumes started in one turn of the event loop go to PostgreSQL as ONE statement,
 *   `SELECT … FROM <rateLimitsTable>_consume_many(…)`, sent at the end of the turn (`setImmediate`) or at once when
 *   {@link MAX_CONSUMES_PER_STATEMENT} are waiting; a lone consume is a statement of one. While one of the store's
 *   statements runs, the consumes of later turns wait for its answer and go as one statement then (a full one at
 *   once); a consume's `callTimeoutMs` counts from when it was made, that wait included. The PL/pgSQL function
 *   (created by {@link migratePostgres}, rate-limit version 3; version 4 adds the deadline) decides each consume
 *   exactly as version 2's `<rateLimitsTable>_consume` decides it alone — a mirror of `decideConsume` from `@petstore/core`: it locks the
 *   record's row, checks every window and the ban subject's ban, charges the request's `cost` to all windows or to
 *   none, counts a rejection toward the subject's ban, starts the ban, prunes the ended bans of the other subjects
 *   and sets the row's `expires_at_ms` — atomic across every process sharing the database (row locks; PostgreSQL's
 *   default READ COMMITTED isolation, which the function needs: under REPEATABLE READ or SERIALIZABLE a contended
 *   record fails with a serialization error, answered as below). The records of a statement are locked in the
 *   order of their keys, so statements of different instances never deadlock; each record's consumes are decided
 *   in the order they were made, each on the record the ones before left. A banned subject's requests write
 *   nothing. A consume that fails inside the function (a trigger or constraint of the host's refusing its row,
 *   say) fails alone, the others of the statement are answered. Under fake timers that fake `setImmediate`,
 *   advance them for a consume to be sent. Costs: BENCHMARKS.md, section "Backends: memory, Redis, PostgreSQL".
 * - `peek` is one statement that reads the row and the clock (no lock, nothing written) and answers `peekState`
 *   of the record at that clock: the windows as of now with the limit each was last charged with, and the live
 *   bans.
 * - `reset` is one `DELETE` of the row: the record's windows and every ban in it.
 *
 * A row's `key` is the store key as it is, unless the key holds NUL, U+FFFD or a lone surrogate, which text cannot
 * carry: each such unit is written as U+FFFD and its four hex digits (`anon:a\0b` → `anon:a\uFFFD0000b`), so any
 * string is a key and distinct keys never share a row.
 *
 * Expired rows are deleted by the consumes themselves: each statement deletes up to two rows whose `expires_at_ms`
 * has passed per row it created (by index, skipping locked rows), so the table stays about as large as the
 * set of live records with no timer and no job to schedule. A row that lost its `expires_at_ms` (set to NULL) gets
 * it back on the record's next consume.
 *
 * Failures: every method rejects when the database errors or does not answer within `callTimeoutMs` — with a
 * `PetstoreError('service_unavailable')` (cause: the original failure) when it is unreachable, slow or
 * temporarily unable, else a plain Error. `consume` never answers "allowed" on a failure: the engine's
 * `onStoreFailure` policy turns the rejection into 503 (fail-closed) or the insurance store (fail-open). A statement
 * that fails as a whole fails each of its consumes; a consume that failed alone rejects with a cause that carries
 * the SQLSTATE (`code`), as node-postgres's `DatabaseError` does. Past `callTimeoutMs` (for a consume: from the end
 * of the turn it was made in) the store also sends PostgreSQL a cancel request for the statement, which stops it
 * and rolls it back; a reset whose statement had already committed stays applied. A consume's statement carries its
 * deadline (on the database's clock, from the offset the last reply showed), and the function charges nothing past
 * it: a call that starts late (a stopped or overloaded server, a cancel request that did not get through) answers
 * "deadline passed" (SQLSTATE 57014, a 503), and one whose deadline passes while it runs is undone. What is left is a
 * call that commits just before the deadline whose answer arrives after it: about one reply's travel.
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
  // Migration version 7's signature: sliding and gcra windows answer their counters, whose usage is computed here.
  const consumeSql = `SELECT ordinal, now_ms, outcome, banned_until_ms, used, error_code, error_message, clock_ms, starts_ms, previous_counts
FROM ${names.consumeManyFunction}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, true)`;
  // The clock (the database's, or the request's with time: 'request') and the row, in one statement; the row as
  // JSON text, so that a host's pg.types parsers cannot change it (times are below 2^53: exact as JSON numbers).
  const peekSql = `SELECT n.ms::text AS now_ms, (SELECT row_to_json(x)::text FROM ${names.rateLimits} AS x WHERE x.key = $1) AS record
FROM (SELECT coalesce($2::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS ms) AS n`;
  const resetSql = `DELETE FROM ${names.rateLimits} WHERE key = $1`;

  /** The database's clock minus this process's (ms), from the last reply; 0 until one came. */
  let offsetMs = 0;
  /**
   * The consumes started in this turn of the event loop, sent at its end (or once there are enough); while a
   * statement of this store runs, they wait for it, with those of the turns after, and go as one statement then, so
   * they do not queue on each other's row locks in the server (sleeping, and waking the next). Measured gain, five
   * interleaved runs against the commit before, of the categories + limits server (one hot row): PostgreSQL's CPU
   * per request 0.72–0.95× (0.80× in the median run).
   */
  const addToBatch = createTurnBatches<Pending>(MAX_CONSUMES_PER_STATEMENT, (batch) => send(batch), { holdWhileSending: true });

  /**
   * Sends `batch`, whose callers give up at its first consume's `deadlineAtMs` (the earliest), with that deadline on
   * the database's clock (from the offset the last reply showed: it errs only early, by the reply's travel). A batch
   * the database finds expired while this process still waits (the clocks disagreed: the first call, a host clock
   * that jumped, a blocked event loop) is sent once more (`retried`), within the time left. Settles once the batch is
   * answered (never rejects).
   */
  function send(batch: Pending[], retried = false): Promise<void> {
    const { deadlineAtMs } = batch[0] as Pending;
    const policyNumbers = new Map<Policy, number>();
    const windowFirst: number[] = [];
    const windowCount: number[] = [];
    const windowNames: string[] = [];
    const windowLimits: number[] = [];
    const windowLengthsMs: number[] = [];
    const windowAlgorithms: Array<'sliding' | 'gcra' | null> = [];
    let anyAlgorithm = false;
    const banThresholds: number[] = [];
    const banIntervalsMs: number[] = [];
    const banDurationsMs: number[] = [];
    const keys: string[] = [];
    const policies: number[] = [];
    const costs: number[] = [];
    const banSubjects: string[] = [];
    const nowMs: number[] = [];
    for (const item of batch) {
      let number = policyNumbers.get(item.policy);
      if (number === undefined) {
        const { policy } = item;
        number = policyNumbers.size + 1;
        policyNumbers.set(policy, number);
        windowFirst.push(windowNames.length + 1);
        windowCount.push(policy.names.length);
        windowNames.push(...policy.names);
        windowLimits.push(...policy.limits);
        windowLengthsMs.push(...policy.lengthsMs);
        if (policy.algorithms === null) for (let index = 0; index < policy.names.length; index++) windowAlgorithms.push(null);
        else {
          windowAlgorithms.push(...policy.algorithms);
          anyAlgorithm = true;
        }
        banThresholds.push(policy.banThreshold);
        banIntervalsMs.push(policy.banIntervalMs);
        banDurationsMs.push(policy.banDurationMs);
      }
      keys.push(storedKeyText(item.key));
      policies.push(number);
      costs.push(item.cost);
      banSubjects.push(item.banSubject);
      if (time === 'request') nowMs.push(item.nowMs);
    }
    const values = [keys, policies, costs, banSubjects, time === 'request' ? nowMs : null, windowFirst, windowCount, windowNames, windowLimits, windowLengthsMs, banThresholds, banIntervalsMs, banDurationsMs, deadlineAtMs + offsetMs, anyAlgorithm ? windowAlgorithms : null];
    const waitMs = Math.max(1, deadlineAtMs - Date.now());
    return runStatement<ConsumeManyRow>(pool, 'rate-limit store', callTimeoutMs, consumeSql, values, waitMs).then(
      (rows) => {
        const receivedAtMs = Date.now();
        if (rows[0]?.clock_ms != null) offsetMs = Number(rows[0].clock_ms) - receivedAtMs;
        const expired = rows.length > 0 && rows.every((row) => row.error_code === DEADLINE_PASSED);
        if (expired && !retried && receivedAtMs < deadlineAtMs) {
          return send(batch, true);
        }
        for (const row of rows) batch[row.ordinal - 1]?.resolve(row);
        // Never a consume left waiting (a settled one ignores this): a reply short of rows is the function's fault.
        if (rows.length !== batch.length) {
          for (const item of batch) item.reject(new Error(`${names.consumeManyFunction} answered ${rows.length} rows for ${batch.length} consumes`));
        }
      },
      (error: unknown) => {
        for (const item of batch) item.reject(error);
      },
    );
  }

  return {
    backend: 'postgresql',
    algorithms: RATE_LIMIT_ALGORITHMS,
    async peek(key: string, nowMs: number): Promise<RateLimitSnapshot> {
      if (time === 'request') assertWhole(nowMs, 'nowMs', 0);
      const rows = await runStatement<PeekRow>(pool, 'rate-limit store', callTimeoutMs, peekSql, [storedKeyText(key), time === 'request' ? nowMs : null]);
      const row = rows[0] as PeekRow;
      const readAtMs = Number(row.now_ms);
      return peekState(row.record === null ? undefined : liveState(JSON.parse(row.record) as RecordJson, readAtMs), readAtMs);
    },
    async reset(key: string): Promise<void> {
      await runStatement(pool, 'rate-limit store', callTimeoutMs, resetSql, [storedKeyText(key)]);
    },
    async consume(key: string, request: ConsumeRequest): Promise<ConsumeResult> {
      const { windows, cost, banSubject } = request;
      if (time === 'request') assertWhole(request.nowMs, 'nowMs', 0);
      assertWhole(cost, 'cost', 1);
      if (typeof banSubject !== 'string') throw new TypeError(`banSubject must be a string, got ${String(banSubject)}`);
      const policy = policyOf(windows, request.ban);
      const row = await new Promise<ConsumeManyRow>((resolve, reject) => {
        addToBatch({ key, policy, cost, banSubject, nowMs: request.nowMs, deadlineAtMs: Date.now() + callTimeoutMs, resolve, reject });
      });
      const { outcome, used } = row;
      if (row.error_code !== null) throw consumeFailure(row.error_code, row.error_message ?? '');
      const nowMs = Number(row.now_ms);
      const counts = used === '' || used === null ? [] : used.split(',').map(Number);
      // Present only where a window or a stored counter is not fixed: each window's counter as the decision left it.
      const starts = row.starts_ms?.split(',');
      const previous = row.previous_counts?.split(',');
      const usage: WindowUsage[] = windows.map(({ name, limit, windowMs, algorithm }, index) => {
        const count = counts[index] as number;
        if (starts === undefined) {
          return { name, limit, windowMs, used: count, remaining: Math.max(0, limit - count), resetAtMs: windowStartMs(nowMs, windowMs) + windowMs };
        }
        const counter: WindowCounter = { startMs: Number(starts[index]), count, limit, windowMs };
        if (algorithm === 'sliding') {
          counter.algorithm = algorithm;
          counter.previousCount = Number(previous?.[index]);
        } else if (algorithm === 'gcra') counter.algorithm = algorithm;
        return windowUsage(name, counter, nowMs, outcome === 0 ? undefined : cost);
      });
      if (outcome === 0) return { allowed: true, nowMs, windows: usage };
      if (outcome === 1) return { allowed: false, reason: 'rate_limited', nowMs, windows: usage };
      return { allowed: false, reason: 'banned', nowMs, windows: usage, bannedUntilMs: Number(row.banned_until_ms) };
    },
  };
}

/**
 * The policy of a request's windows and ban, checked; built once per frozen windows array and ban policy.
 * @throws TypeError on a window name that is not a string, or a limit, window length or ban field that is not a
 *   whole number (limit ≥ 0, the others ≥ 1).
 */
const policyOf = cachePerPolicy((windows: readonly RateLimitWindow[], ban: BanPolicy | undefined): Policy => {
  let general = false;
  for (const window of windows) {
    if (typeof window.name !== 'string') throw new TypeError(`a window name must be a string, got ${typeof window.name}`);
    assertWhole(window.limit, `window "${window.name}" limit`, 0);
    assertWhole(window.windowMs, `window "${window.name}" windowMs`, 1);
    const { algorithm } = window;
    if (algorithm !== undefined && !RATE_LIMIT_ALGORITHMS.includes(algorithm)) {
      throw new TypeError(`window "${window.name}" algorithm must be one of ${RATE_LIMIT_ALGORITHMS.join(', ')}, got ${String(algorithm)}`);
    }
    if (algorithm === 'sliding' || algorithm === 'gcra') general = true;
  }
  if (ban !== undefined) {
    assertWhole(ban.rejectedThreshold, 'ban.rejectedThreshold', 1);
    assertWhole(ban.intervalMs, 'ban.intervalMs', 1);
    assertWhole(ban.durationMs, 'ban.durationMs', 1);
  }
  return {
    names: windows.map((window) => window.name),
    limits: windows.map((window) => window.limit),
    lengthsMs: windows.map((window) => window.windowMs),
    algorithms: general ? windows.map((window) => (window.algorithm === 'sliding' || window.algorithm === 'gcra' ? window.algorithm : null)) : null,
    banThreshold: ban?.rejectedThreshold ?? 0,
    banIntervalMs: ban?.intervalMs ?? 0,
    banDurationMs: ban?.durationMs ?? 0,
  };
});

/**
 * The failure of one consume of a statement, as the consume function caught it: `service_unavailable` for a
 * transient SQLSTATE (a lock or serialization failure, say), else a plain Error; the cause carries the SQLSTATE
 * (`code`) and the database's message, as node-postgres's `DatabaseError` does.
 */
function consumeFailure(code: string, message: string): Error {
  const cause = new DatabaseError(message, 0, 'error');
  cause.code = code;
  cause.severity = 'ERROR';
  return statementFailure('rate-limit store', cause);
}

/**
 * The record a row holds, as `decideConsume` keeps it; `undefined` when the row has expired at `nowMs` (it holds
 * nothing live then, as the store's consume treats it). A lost expiry (NULL) still counts.
 */
function liveState(row: RecordJson, nowMs: number): RateLimitState | undefined {
  if (row.expires_at_ms !== null && row.expires_at_ms <= nowMs) return undefined;
  const state: RateLimitState = { counters: {}, bans: {} };
  row.window_names.forEach((name, i) => {
    const counter: WindowCounter = { startMs: row.window_starts_ms[i] as number, count: row.window_counts[i] as number, limit: row.window_limits[i] as number, windowMs: row.window_lengths_ms[i] as number };
    const algorithm = row.window_algorithms?.[i];
    if (algorithm === 'sliding') {
      counter.algorithm = algorithm;
      counter.previousCount = row.window_previous_counts?.[i] ?? 0;
    } else if (algorithm === 'gcra') counter.algorithm = algorithm;
    Object.defineProperty(state.counters, name, { value: counter, enumerable: true });
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

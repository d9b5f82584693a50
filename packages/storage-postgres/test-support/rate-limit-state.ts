/**
 * The model comparison's state reader for the PostgreSQL rate-limit store: the row of a record, read column by
 * column, as the `RateLimitState` the model keeps.
 */
import type { RateLimitState, WindowCounter } from '@petstore/core';
import type pg from 'pg';

interface Row {
  window_names: string[];
  window_starts_ms: string[];
  window_counts: string[];
  window_limits: string[];
  window_lengths_ms: string[];
  window_algorithms: Array<'sliding' | 'gcra' | null> | null;
  window_previous_counts: string[] | null;
  ban_subjects: string[];
  rejected_starts_ms: string[];
  rejected_counts: string[];
  banned_until_ms: string[];
}

/**
 * The record `key` of the rate-limit table `table` (qualified and quoted) as a `RateLimitState`, or `undefined`
 * when there is no row. The row is returned whatever its `expires_at_ms` (the comparison accepts a record that is
 * kept past its end when nothing in it is live). A rejection count of 0 is "no rejections" (`rejected: undefined`).
 */
export async function readRateLimitState(pool: pg.Pool, table: string, key: string): Promise<RateLimitState | undefined> {
  const { rows } = await pool.query<Row>(
    `SELECT window_names, window_starts_ms::text[], window_counts::text[], window_limits::text[], window_lengths_ms::text[],
            window_algorithms, window_previous_counts::text[], ban_subjects, rejected_starts_ms::text[], rejected_counts::text[], banned_until_ms::text[]
     FROM ${table} WHERE key = $1`,
    [key],
  );
  const row = rows[0];
  if (row === undefined) return undefined;
  const state: RateLimitState = { counters: {}, bans: {} };
  row.window_names.forEach((name, i) => {
    const counter: WindowCounter = {
      startMs: Number(row.window_starts_ms[i]),
      count: Number(row.window_counts[i]),
      limit: Number(row.window_limits[i]),
      windowMs: Number(row.window_lengths_ms[i]),
    };
    const algorithm = row.window_algorithms?.[i];
    if (algorithm === 'sliding' || algorithm === 'gcra') counter.algorithm = algorithm;
    // A sliding counter's previous count, and nothing for the others (the model keeps none for them).
    if (algorithm === 'sliding') counter.previousCount = Number(row.window_previous_counts?.[i]);
    state.counters[name] = counter;
  });
  row.ban_subjects.forEach((subject, i) => {
    const count = Number(row.rejected_counts[i]);
    state.bans[subject] = {
      rejected: count > 0 ? { startMs: Number(row.rejected_starts_ms[i]), count } : undefined,
      bannedUntilMs: Number(row.banned_until_ms[i]),
    };
  });
  return state;
}

/**
 * Mutation check of the model comparison on PostgreSQL. `npm test` runs each mutation on the one seed that
 * catches it soonest (a few steps each); every seed, each of which must catch every mutation, on demand:
 *
 *   PETSTORE_PG_MUTATIONS=1 npx vitest run packages/storage-postgres/src/consume-mutations.test.ts
 *
 * Each mutation is a deliberate bug put into a copy of the migration SQL (the batch consume function of
 * rate-limit version 8, which the store calls; its text holds the decision twice, in the record-by-record loop and in
 * the path of a call of two records or more, and a mutation changes both), installed in a throwaway schema; the model comparison (every
 * algorithm: fixed, sliding, gcra) must fail on it, naming the seed and step (printed). The unchanged copy must pass,
 * so that a failure is the mutation's doing.
 */
import { runRateLimitModelComparison, type ConformanceTestApi } from '@petstore/core/testing';
import { describe, expect, it } from 'vitest';
import { postgresMigrations } from './migrations.js';
import { postgresRateLimitStore } from './rate-limit-store.js';
import { connectPool, endPool, skipPostgres, uniqueSchema } from '../test-support/postgres.js';
import { readRateLimitState } from '../test-support/rate-limit-state.js';

interface Mutation {
  name: string;
  /** Text of the decision replaced (it must occur exactly `occurrences` times in it, default once; twice as often in the function) … */
  from: string;
  occurrences?: number;
  /** … by this. */
  to: string;
  /** The seed that catches it soonest: the one `npm test` runs. */
  seed: number;
}

const MUTATIONS: Mutation[] = [
  {
    name: "(a) an admitted request resets the subject's rejection count",
    from: 'IF k IS NOT NULL AND with_ban AND r.rejected_counts[k] > 0 AND r.rejected_starts_ms[k] + p_ban_interval_ms > t THEN',
    to: 'IF false THEN',
    seed: 2,
  },
  {
    // The answer is right (nothing charged), only the row is wrong: the windows with room are charged in the row.
    name: '(b) a rejected request charges the windows that had room',
    from: 'r.window_counts := counts;',
    to: `r.window_counts := CASE WHEN has_room THEN counts ELSE (SELECT array_agg(CASE WHEN u.c + p_cost <= u.l THEN u.c + p_cost ELSE u.c END ORDER BY u.o)
        FROM unnest(counts, p_limits) WITH ORDINALITY AS u(c, l, o)) END;`,
    seed: 1,
  },
  { name: '(c) a ban that starts one rejection late', from: 'IF rejected >= p_ban_threshold THEN', to: 'IF rejected > p_ban_threshold THEN', seed: 4 },
  {
    // The window holding t - 1: at the instant a window ends, it still counts.
    name: '(d) a window boundary off by one millisecond',
    from: 'st := t - mod(mod(t, w) + w, w);',
    occurrences: 2, // the fixed windows' loop and the other algorithms'
    to: 'st := (t - 1) - mod(mod(t - 1, w) + w, w);',
    seed: 3,
  },
  {
    name: "(e) ours: the other subjects' ended bans are kept (never pruned)",
    from: 'entry_end := CASE WHEN r.banned_until_ms[i] > t THEN r.banned_until_ms[i] ELSE 0 END;',
    to: 'entry_end := r.banned_until_ms[i];',
    seed: 4,
  },
  {
    name: '(f) ours: the room check ignores the cost (a request is admitted while one unit is left)',
    from: 'IF counts[i] + p_cost > p_limits[i] THEN has_room := false; END IF;',
    to: 'IF counts[i] + 1 > p_limits[i] THEN has_room := false; END IF;',
    seed: 2,
  },
  {
    name: "(g) sliding: the previous window's weight taken from the wrong end of the window (elapsed, not remaining)",
    from: 'prevs[i] * (w - (t - st))',
    to: 'prevs[i] * (t - st)',
    seed: 5,
  },
  {
    name: '(h) sliding: the previous window forgotten at each boundary (its count never carried over)',
    from: 'prevs[i] := CASE WHEN s_start = st - w THEN r.window_counts[j] ELSE 0 END;',
    to: 'prevs[i] := 0;',
    seed: 6,
  },
  {
    name: '(i) gcra: a charge advances the counter by the cost, not the cost × windowMs',
    from: "CASE WHEN algs[i] = 'gcra' THEN p_cost * p_window_ms[i] ELSE p_cost END",
    to: 'p_cost',
    seed: 3,
  },
  {
    name: "(j) gcra: the counter drains at the request's limit, not the one it was charged with",
    from: 's_limit := r.window_limits[j];',
    to: 's_limit := p_limits[i];',
    seed: 2,
  },
  // Not here: a window's usage (used, resetAtMs, retryAtMs) of sliding and gcra counters. Since version 7 the function
  // answers the counters and the client computes their usage with the core's windowUsage, whose own tests catch a
  // used rounded down, a sliding retryAtMs one millisecond late and a gcra resetAtMs or retryAtMs rounded down.
  {
    name: "(k) another algorithm's counter converted to its units rounded down: one extra unit admitted",
    from: '(held + w - 1) / w',
    to: 'held / w',
    occurrences: 2, // to gcra, to sliding or fixed
    seed: 2,
  },
  {
    name: '(l) sliding: a record expires a window early (while its count still weighs in the next window)',
    from: "WHEN 'sliding' THEN starts[i] + 2 * p_window_ms[i]",
    to: "WHEN 'sliding' THEN starts[i] + p_window_ms[i]",
    seed: 1,
  },
  {
    name: "(m) gcra: a record's expiry rounded down to its window's start, not up to its end (it expires before it drains)",
    from: '+ p_window_ms[i] - 1) / p_window_ms[i] * p_window_ms[i]',
    to: '+ 0) / p_window_ms[i] * p_window_ms[i]',
    seed: 1,
  },
];

/** Every seed on demand; `npm test` runs one per mutation. */
const EVERY_SEED = process.env.PETSTORE_PG_MUTATIONS === '1';
const SEEDS = [1, 2, 3, 4, 5, 6];

/** The migrations' SQL for `schema`, with the batch consume function of rate-limit version 8 changed by `mutation`. */
function mutatedSql(schema: string, mutation: Mutation | undefined): string[] {
  return postgresMigrations({ schema }).map((migration) => {
    if (mutation === undefined || migration.table !== 'petstore_rate_limits' || migration.version !== 8) return migration.sql;
    const parts = migration.sql.split(mutation.from);
    // Version 8's function holds the decision twice: the record-by-record loop's and the batch path's.
    const occurrences = 2 * (mutation.occurrences ?? 1);
    if (parts.length !== occurrences + 1) throw new Error(`${mutation.name}: the text to replace occurs ${parts.length - 1} times, not ${occurrences}`);
    return parts.join(mutation.to);
  });
}

/** Runs the comparison on a schema migrated with `mutation`'s SQL; answers each seed's failure (undefined: passed). */
async function compare(mutation: Mutation | undefined, seeds: number[]): Promise<Map<number, string | undefined>> {
  const cases: Array<() => Promise<void>> = [];
  const test: ConformanceTestApi = { describe: (_name, body) => body(), it: (_name, body) => cases.push(body) };
  runRateLimitModelComparison({
    ...test,
    seeds,
    async harness() {
      const pool = connectPool();
      const schema = uniqueSchema('mut');
      await pool.query(`CREATE SCHEMA "${schema}"`);
      for (const sql of mutatedSql(schema, mutation)) await pool.query(sql);
      return {
        store: postgresRateLimitStore({ pool, schema, time: 'request' }),
        readState: (key) => readRateLimitState(pool, `"${schema}".petstore_rate_limits`, key),
        close: () => endPool(pool),
      };
    },
  });
  const outcomes = new Map<number, string | undefined>();
  for (const [index, body] of cases.entries()) {
    outcomes.set(seeds[index] as number, await body().then(() => undefined, (error: unknown) => (error instanceof Error ? error.message : String(error))));
  }
  return outcomes;
}

describe.skipIf(skipPostgres)('the model comparison on PostgreSQL catches mutations of the consume function', () => {
  // npm test runs the comparison on the unchanged SQL in model-comparison.test.ts.
  if (EVERY_SEED) {
    it('passes the unchanged SQL', async () => {
      expect([...(await compare(undefined, SEEDS)).values()]).toEqual(SEEDS.map(() => undefined));
    }, 120_000);
  }

  for (const mutation of MUTATIONS) {
    it(`fails ${mutation.name}${EVERY_SEED ? ', on every seed' : `, on seed ${mutation.seed}`}`, async () => {
      const seeds = EVERY_SEED ? SEEDS : [mutation.seed];
      const outcomes = await compare(mutation, seeds);
      const lines = [...outcomes].map(([seed, failure]) => `  seed ${seed}: ${failure === undefined ? 'passed (not caught)' : (failure.split('\n')[0] as string).slice(0, 400)}`);
      if (EVERY_SEED) console.log(`${mutation.name}\n${lines.join('\n')}`);
      for (const failure of outcomes.values()) expect(failure).toMatch(/^seed \d+, (after )?step \d+/);
    }, 120_000);
  }
});

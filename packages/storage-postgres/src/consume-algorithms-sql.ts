/**
 * The SQL of versions 6 and 7 of the rate-limit table. Version 6: the `sliding` and `gcra` windows beside `fixed`; the
 * batch consume function gains a 15th argument (each window's algorithm) and the rows two columns; version 4's
 * signature becomes a call of it. Version 7: the same decision answering a sliding or gcra window's counter instead of
 * its usage (a 16th argument), which the client computes; version 6's signature becomes a call of it. Version 8: the
 * same function, a call of several consumes sharing its statements between its records. Kept apart from
 * migrations.ts; versions 6 and 7 are generated as they shipped (the migration tests compare them with their digests).
 */
import type { RateLimitsNames } from './names.js';

/**
 * The columns of version 6: `window_algorithms text[]` (per window `'sliding'`, `'gcra'`, or NULL for `fixed`) and
 * `window_previous_counts bigint[]` (per window the units of the window before a sliding counter's, 0 for the
 * others), parallel to `window_names`; both NULL when every window of the row is fixed, so a fixed record's row holds
 * what it held before.
 */
export function addAlgorithmColumnsSql(names: RateLimitsNames): string {
  return `ALTER TABLE ${names.rateLimits}
  ADD COLUMN IF NOT EXISTS window_algorithms text[],
  ADD COLUMN IF NOT EXISTS window_previous_counts bigint[]`;
}

/**
 * What one window reports, for a counter carried to `t` (charged or not), as `windowUsage` in `@petstore/core`: `used`
 * (the units held, rounded up), `resetAtMs` and, on a rejected consume (`rejected_now`), `retryAtMs` for a sliding or
 * gcra window without room for the cost (as `retryAtMsOf`); and the end of what the counter holds, into `expires`.
 */
function usageSql(): string {
  return `
            used_now := '{}'; resets := '{}'; retries := '{}';
            FOR i IN 1..n LOOP
              w := p_window_ms[i]; lim := p_limits[i]; cnt := counts[i]; st := starts[i]; alg := algs[i];
              IF alg IS NULL THEN
                used_units := cnt; resets[i] := st + w; end_ms := st + w;
              ELSIF alg = 'sliding' THEN
                prev := prevs[i];
                used_units := (prev * (w - (t - st)) + cnt * w + w - 1) / w;
                resets[i] := st + CASE WHEN cnt > 0 THEN 2 * w ELSE w END; end_ms := st + 2 * w;
              ELSE
                used_units := (cnt + w - 1) / w;
                resets[i] := CASE WHEN lim > 0 THEN st + (cnt + lim - 1) / lim ELSE st END; end_ms := resets[i];
              END IF;
              used_now[i] := used_units;
              expires := greatest(expires, end_ms);
              retry_ms := NULL;
              IF rejected_now AND alg IS NOT NULL AND greatest(lim - used_units, 0) < p_cost AND p_cost <= lim THEN
                IF alg = 'gcra' THEN
                  room := cnt + p_cost * w - lim * w;
                  retry_ms := CASE WHEN room <= 0 THEN st ELSE st + (room + lim - 1) / lim END;
                ELSE
                  -- The previous window's weight falls by prev per ms until the window ends; then the current
                  -- window's count falls likewise.
                  at_ms := NULL;
                  room := (lim - cnt - p_cost) * w;
                  IF room >= 0 THEN
                    at_ms := st + CASE WHEN prev = 0 THEN 0 ELSE w - room / prev END;
                    at_ms := CASE WHEN at_ms < st + w THEN greatest(t, at_ms) END;
                  END IF;
                  retry_ms := coalesce(at_ms, CASE WHEN cnt = 0 THEN st + w ELSE st + w + greatest(0, w - ((lim - p_cost) * w) / cnt) END);
                END IF;
              END IF;
              -- Assigned in order (NULL too): an element set past the end of an empty array would start the array there.
              retries[i] := retry_ms;
            END LOOP;
            res_reset[c] := array_to_string(resets, ','); res_retry[c] := array_to_string(retries, ',', '');`;
}

/**
 * The units-ms a counter of another algorithm (`s_alg`, its start and count in `s_start`, `s_count`) holds at t, into
 * `held`; shared by versions 6 and 7 (version 6's text is pinned by its digest in the migration tests).
 */
function heldByAnotherSql(): string {
  return `                  IF s_alg = 'gcra' THEN
                    s_limit := r.window_limits[j]; el := greatest(0, t - s_start);
                    held := CASE WHEN s_limit = 0 THEN s_count WHEN el > s_count / s_limit THEN 0 ELSE s_count - s_limit * el END;
                  ELSIF s_alg = 'sliding' THEN
                    held := CASE WHEN s_start = st THEN r.window_previous_counts[j] * (w - (t - st)) + s_count * w
                      WHEN s_start = st - w THEN s_count * (w - (t - st)) ELSE 0 END;
                  ELSE
                    held := CASE WHEN s_start = st THEN s_count * w ELSE 0 END;
                  END IF;`;
}

/** A converted counter (`held` unit-ms, rounded up to whole units) as the window's algorithm keeps it; versions 6 and 7. */
function convertedSql(): string {
  return `                IF alg = 'gcra' THEN
                  starts[i] := t; counts[i] := (held + w - 1) / w * w;
                ELSE
                  starts[i] := st; counts[i] := (held + w - 1) / w;
                END IF;`;
}

/** Version 6's loop carrying each counter to t (kept as it shipped: version 6's function text must not change). */
function carriedCountersV6Sql(): string {
  return `            -- Each counter carried to t by its algorithm, or converted from another's (the units it holds, rounded up).
            p_algorithms := p_window_algorithms[first:first + n - 1];
            algs := '{}'; prevs := '{}'; any_algorithm := false;
            FOR i IN 1..n LOOP
              w := p_window_ms[i]; lim := p_limits[i]; alg := p_algorithms[i];
              st := t - mod(mod(t, w) + w, w);
              j := CASE WHEN live THEN array_position(r.window_names, p_names[i]) END;
              same := j IS NOT NULL AND r.window_lengths_ms[j] = w;
              s_alg := CASE WHEN same THEN r.window_algorithms[j] END;
              s_start := r.window_starts_ms[j]; s_count := r.window_counts[j];
              prevs[i] := 0;
              IF same AND s_alg IS NOT DISTINCT FROM alg THEN
                IF alg IS NULL THEN
                  starts[i] := st; counts[i] := CASE WHEN s_start = st THEN s_count ELSE 0 END;
                ELSIF alg = 'sliding' THEN
                  starts[i] := st;
                  IF s_start = st THEN
                    counts[i] := s_count; prevs[i] := r.window_previous_counts[j];
                  ELSE
                    counts[i] := 0; prevs[i] := CASE WHEN s_start = st - w THEN s_count ELSE 0 END;
                  END IF;
                ELSE
                  -- A counter charged later than t (another instance's clock ahead) is read at its own time.
                  s_limit := r.window_limits[j];
                  starts[i] := greatest(t, s_start); el := starts[i] - s_start;
                  counts[i] := CASE WHEN s_limit = 0 THEN s_count WHEN el > s_count / s_limit THEN 0 ELSE s_count - s_limit * el END;
                END IF;
              ELSE
                IF same THEN
${heldByAnotherSql()}
                ELSE
                  held := 0;
                END IF;
${convertedSql()}
              END IF;
              algs[i] := alg;
              IF alg IS NULL THEN
                IF counts[i] + p_cost > lim THEN has_room := false; END IF;
              ELSE
                any_algorithm := true;
                -- A cost above the limit never fits (and is not multiplied: it may be any safe integer).
                IF p_cost > lim THEN
                  has_room := false;
                ELSIF (CASE WHEN alg = 'gcra' THEN counts[i] ELSE prevs[i] * (w - (t - st)) + counts[i] * w END) + p_cost * w > lim * w THEN
                  has_room := false;
                END IF;
              END IF;
            END LOOP;`;
}

/**
 * Version 7's loop carrying each counter to t: the same counters and decision as version 6's in fewer PL/pgSQL
 * statements (a counter of the window's own algorithm read in one branch, the room check in one statement).
 */
function carriedCountersSql(): string {
  return `            -- Each counter carried to t by its algorithm, or converted from another's (the units it holds, rounded up).
            p_algorithms := p_window_algorithms[first:first + n - 1];
            algs := p_algorithms; prevs := array_fill(0::bigint, ARRAY[n]);
            any_algorithm := array_position(p_algorithms, 'sliding') IS NOT NULL OR array_position(p_algorithms, 'gcra') IS NOT NULL;
            FOR i IN 1..n LOOP
              w := p_window_ms[i]; alg := p_algorithms[i];
              st := t - mod(mod(t, w) + w, w);
              j := CASE WHEN live THEN array_position(r.window_names, p_names[i]) END;
              IF j IS NOT NULL AND r.window_lengths_ms[j] = w AND r.window_algorithms[j] IS NOT DISTINCT FROM alg THEN
                s_start := r.window_starts_ms[j];
                IF alg = 'sliding' THEN
                  starts[i] := st;
                  IF s_start = st THEN
                    counts[i] := r.window_counts[j]; prevs[i] := r.window_previous_counts[j];
                  ELSE
                    counts[i] := 0; prevs[i] := CASE WHEN s_start = st - w THEN r.window_counts[j] ELSE 0 END;
                  END IF;
                ELSIF alg = 'gcra' THEN
                  -- A counter charged later than t (another instance's clock ahead) is read at its own time.
                  starts[i] := greatest(t, s_start);
                  counts[i] := CASE WHEN r.window_limits[j] = 0 THEN r.window_counts[j] WHEN starts[i] - s_start > r.window_counts[j] / r.window_limits[j] THEN 0
                    ELSE r.window_counts[j] - r.window_limits[j] * (starts[i] - s_start) END;
                ELSE
                  starts[i] := st; counts[i] := CASE WHEN s_start = st THEN r.window_counts[j] ELSE 0 END;
                END IF;
              ELSE
                held := 0;
                IF j IS NOT NULL AND r.window_lengths_ms[j] = w THEN
                  s_alg := r.window_algorithms[j]; s_start := r.window_starts_ms[j]; s_count := r.window_counts[j];
${heldByAnotherSql()}
                END IF;
${convertedSql()}
              END IF;
              -- A cost above the limit never fits (and is not multiplied: it may be any safe integer).
              -- (In parentheses: an IF's condition ends at its first THEN outside them.)
              IF (CASE WHEN alg IS NULL THEN counts[i] + p_cost > p_limits[i] WHEN p_cost > p_limits[i] THEN true
                  ELSE CASE WHEN alg = 'gcra' THEN counts[i] ELSE prevs[i] * (w - (t - st)) + counts[i] * w END + p_cost * w > p_limits[i] * w END) THEN
                has_room := false;
              END IF;
            END LOOP;`;
}

/**
 * Version 7: each counter charged (when every window has room), and `expires` gets the end of what it holds (fixed:
 * the window's end; sliding: the end of the window after; gcra: its theoretical arrival time rounded up to the end of
 * its window, so that the indexed expiry changes once a window, not at every consume, and the row's update stays a
 * heap-only one: without the rounding no gcra update was, with it 3,175 of 3,184 in a 16-key run).
 */
function chargeAndExpiresSql(): string {
  return `
            FOR i IN 1..n LOOP
              IF has_room THEN counts[i] := counts[i] + CASE WHEN algs[i] = 'gcra' THEN p_cost * p_window_ms[i] ELSE p_cost END; END IF;
              expires := greatest(expires, CASE algs[i] WHEN 'sliding' THEN starts[i] + 2 * p_window_ms[i]
                WHEN 'gcra' THEN (CASE WHEN p_limits[i] > 0 THEN starts[i] + (counts[i] + p_limits[i] - 1) / p_limits[i] ELSE starts[i] END
                  + p_window_ms[i] - 1) / p_window_ms[i] * p_window_ms[i]
                ELSE starts[i] + p_window_ms[i] END);
            END LOOP;`;
}

/** Version 7's reply of a consume that is not all fixed: the counters (`p_counters`), or version 6's usage. */
function replySql(rejected: string): string {
  return `
            IF p_counters THEN
              res_used[c] := array_to_string(counts, ','); res_starts[c] := array_to_string(starts, ',');
              res_prevs[c] := array_to_string(prevs, ',');
            ELSE
              rejected_now := ${rejected};${usageSql()}
              res_used[c] := array_to_string(used_now, ',');
            END IF;`;
}

/**
 * The batch consume function of version 6: version 4's (see `consumeManyFunctionSql` in migrations.ts for the order,
 * the locks, the failures and the clean-up, all unchanged) with a 15th argument, `p_window_algorithms text[]`,
 * parallel to `p_window_names` (`'sliding'`, `'gcra'`, or NULL for `fixed`; the whole array NULL when every window
 * is fixed), and two reply columns, `reset_at_ms` and `retry_at_ms` (per window, comma-separated; `retry_at_ms`
 * empty where there is none), both NULL for a consume whose windows and stored counters are all fixed.
 *
 * A consume whose windows are all fixed, on a row whose counters are all fixed, is decided by version 4's steps as
 * they were. Otherwise each window carries its counter to the consume's time as `counterAt` in `@petstore/core`
 * does: a counter of the same algorithm and length is carried by that algorithm (sliding: the current window's count
 * and the previous one's; gcra: the outstanding unit-milliseconds, drained at the stored limit per ms, at the later
 * of now and its own time); a counter of another algorithm and the same length is converted to the units it holds
 * (rounded up); another length counts nothing. A window admits the cost when `held + cost × windowMs <= limit ×
 * windowMs` (and `cost <= limit`), in bigint. The reply's `used` is the units held (rounded up), `expires_at_ms` the
 * latest end (fixed: the window's end; sliding: the end of the window after; gcra: the theoretical arrival time).
 */
export function consumeManyAlgorithmsSql(names: RateLimitsNames): string {
  return consumeManySql(names, 6);
}

/**
 * The batch consume function of version 7: version 6's decision with a 16th argument, `p_counters boolean`. With
 * `p_counters` true, a consume whose windows or stored counters are not all fixed answers each window's counter as
 * the decision leaves it, per window and comma-separated: `used` its count (units; gcra: outstanding
 * unit-milliseconds), `starts_ms` its start (gcra: its time) and `previous_counts` its previous window's count
 * (sliding; 0 for the others), and the client computes the usage (`windowUsage` of `@petstore/core`); less work per
 * decision in the database. With `p_counters` false it answers version 6's usage columns, for version 6's signature.
 */
export function consumeManyCountersSql(names: RateLimitsNames): string {
  return consumeManySql(names, 7);
}

function consumeManySql(names: RateLimitsNames, version: 6 | 7 | 8): string {
  const v7 = version >= 7;
  // Each consume of the record in r (its key's consumes pos..last), decided on the record as the previous ones left it.
  const decide = `        FOR q IN pos..last LOOP
          c := ord[q];
          t := coalesce(p_now_ms[c], clock);
          p := p_policies[c]; n := p_window_count[p]; first := p_window_first[p];
          p_names := p_window_names[first:first + n - 1]; p_limits := p_window_limits[first:first + n - 1];
          p_window_ms := p_window_lengths_ms[first:first + n - 1];
          p_cost := p_costs[c]; p_ban_subject := p_ban_subjects[c];
          p_ban_threshold := p_ban_thresholds[p]; p_ban_interval_ms := p_ban_intervals_ms[p]; p_ban_duration_ms := p_ban_durations_ms[p];
          with_ban := p_ban_threshold > 0;
          -- A record past its expiry holds nothing that counts (a NULL expiry, lost, still counts).
          live := present AND (r.expires_at_ms IS NULL OR r.expires_at_ms > t);
          starts := '{}'; counts := '{}'; has_room := true; expires := t;
          general := p_window_algorithms IS NOT NULL OR r.window_algorithms IS NOT NULL;
          IF NOT general THEN
            -- Every window and every stored counter fixed: version 4's steps.
            FOR i IN 1..n LOOP
              w := p_window_ms[i];
              st := t - mod(mod(t, w) + w, w);
              j := CASE WHEN live THEN array_position(r.window_names, p_names[i]) END;
              starts[i] := st;
              counts[i] := CASE WHEN j IS NOT NULL AND r.window_starts_ms[j] = st AND r.window_lengths_ms[j] = w
                THEN r.window_counts[j] ELSE 0 END;
              IF counts[i] + p_cost > p_limits[i] THEN has_room := false; END IF;
              expires := greatest(expires, st + w);
            END LOOP;
          ELSE
${v7 ? carriedCountersSql() : carriedCountersV6Sql()}
          END IF;
          k := CASE WHEN live THEN array_position(r.ban_subjects, p_ban_subject) END;
          IF k IS NOT NULL AND r.banned_until_ms[k] > t THEN
            -- Banned: nothing charged, the ban not extended, the record kept as it is; only a record that lost its
            -- expiry gets back the latest end of what it holds.
            IF r.expires_at_ms IS NULL THEN
              r.expires_at_ms := greatest(t,
                (SELECT max(CASE u.a WHEN 'sliding' THEN u.s + 2 * u.l
                    WHEN 'gcra' THEN CASE WHEN u.m > 0 THEN u.s + (u.c + u.m - 1) / u.m ELSE u.s END ELSE u.s + u.l END)
                  FROM unnest(r.window_starts_ms, r.window_lengths_ms, r.window_counts, r.window_limits, r.window_algorithms) AS u(s, l, c, m, a)),
                (SELECT max(u.b) FROM unnest(r.banned_until_ms) AS u(b)),
                CASE WHEN with_ban THEN (SELECT max(u.s) + p_ban_interval_ms FROM unnest(r.rejected_starts_ms, r.rejected_counts) AS u(s, c) WHERE u.c > 0) END);
              dirty := true;
            END IF;
            IF general THEN${v7 ? replySql('true') : `
              rejected_now := true;${usageSql()}
              res_used[c] := array_to_string(used_now, ',');`}
            ELSE
              res_used[c] := array_to_string(counts, ',');
            END IF;
            res_t[c] := t; res_outcome[c] := 2; res_ban[c] := r.banned_until_ms[k];
            CONTINUE;
          END IF;
          -- The other subjects' bans as they stand now: ended bans read 0, ended (or, without a ban policy, any)
          -- rejections are dropped, a subject with neither is removed.
          new_subjects := '{}'; new_rejected_starts := '{}'; new_rejected_counts := '{}'; new_ban_ends := '{}';
          IF live THEN
            FOR i IN 1..coalesce(array_length(r.ban_subjects, 1), 0) LOOP
              CONTINUE WHEN i = k;
              entry_end := CASE WHEN r.banned_until_ms[i] > t THEN r.banned_until_ms[i] ELSE 0 END;
              IF with_ban AND r.rejected_counts[i] > 0 AND r.rejected_starts_ms[i] + p_ban_interval_ms > t THEN
                entry_start := r.rejected_starts_ms[i]; entry_count := r.rejected_counts[i];
                expires := greatest(expires, entry_start + p_ban_interval_ms);
              ELSE
                entry_start := 0; entry_count := 0;
              END IF;
              IF entry_end > 0 OR entry_count > 0 THEN
                new_subjects := new_subjects || r.ban_subjects[i]; new_rejected_starts := new_rejected_starts || entry_start;
                new_rejected_counts := new_rejected_counts || entry_count; new_ban_ends := new_ban_ends || entry_end;
                expires := greatest(expires, entry_end);
              END IF;
            END LOOP;
          END IF;
          ban_end := 0;
          IF has_room THEN
${
              v7
                ? `            -- (Not all fixed: charged in the loop that takes the counters' ends, below.)
            IF NOT general THEN
              FOR i IN 1..n LOOP counts[i] := counts[i] + p_cost; END LOOP;
            END IF;`
                : `            IF general THEN
              FOR i IN 1..n LOOP counts[i] := counts[i] + CASE WHEN algs[i] = 'gcra' THEN p_cost * p_window_ms[i] ELSE p_cost END; END LOOP;
            ELSE
              FOR i IN 1..n LOOP counts[i] := counts[i] + p_cost; END LOOP;
            END IF;`
            }
            result := 0;
            -- The subject's rejections are kept while their interval lasts.
            IF k IS NOT NULL AND with_ban AND r.rejected_counts[k] > 0 AND r.rejected_starts_ms[k] + p_ban_interval_ms > t THEN
              new_subjects := new_subjects || p_ban_subject; new_rejected_starts := new_rejected_starts || r.rejected_starts_ms[k];
              new_rejected_counts := new_rejected_counts || r.rejected_counts[k]; new_ban_ends := new_ban_ends || 0::bigint;
              expires := greatest(expires, r.rejected_starts_ms[k] + p_ban_interval_ms);
            END IF;
          ELSIF NOT with_ban THEN
            result := 1;
          ELSE
            interval_start := t - mod(mod(t, p_ban_interval_ms) + p_ban_interval_ms, p_ban_interval_ms);
            rejected := CASE WHEN k IS NOT NULL AND r.rejected_counts[k] > 0 AND r.rejected_starts_ms[k] = interval_start
              THEN r.rejected_counts[k] ELSE 0 END + 1;
            new_subjects := new_subjects || p_ban_subject;
            IF rejected >= p_ban_threshold THEN
              result := 2; ban_end := t + p_ban_duration_ms;
              new_rejected_starts := new_rejected_starts || 0::bigint; new_rejected_counts := new_rejected_counts || 0; new_ban_ends := new_ban_ends || ban_end;
              expires := greatest(expires, ban_end);
            ELSE
              result := 1;
              new_rejected_starts := new_rejected_starts || interval_start; new_rejected_counts := new_rejected_counts || rejected;
              new_ban_ends := new_ban_ends || 0::bigint;
              expires := greatest(expires, interval_start + p_ban_interval_ms);
            END IF;
          END IF;
          IF general THEN${v7 ? `${chargeAndExpiresSql()}${replySql('NOT has_room')}` : `
            rejected_now := NOT has_room;${usageSql()}
            res_used[c] := array_to_string(used_now, ',');`}
            -- A record whose counters are all fixed again keeps no algorithm columns.
            r.window_algorithms := CASE WHEN any_algorithm THEN algs END;
            r.window_previous_counts := CASE WHEN any_algorithm THEN prevs END;
          ELSE
            res_used[c] := array_to_string(counts, ',');
          END IF;
          -- The record as this consume leaves it, for the record's next consume and the row.
          r.window_names := p_names; r.window_starts_ms := starts; r.window_counts := counts; r.window_limits := p_limits;
          r.window_lengths_ms := p_window_ms; r.ban_subjects := new_subjects; r.rejected_starts_ms := new_rejected_starts;
          r.rejected_counts := new_rejected_counts; r.banned_until_ms := new_ban_ends; r.expires_at_ms := expires;
          present := true; dirty := true;
          res_t[c] := t; res_outcome[c] := result; res_ban[c] := ban_end;
        END LOOP;
`;
  return `CREATE OR REPLACE FUNCTION ${names.consumeManyFunction}(
  p_keys text[], p_policies integer[], p_costs bigint[], p_ban_subjects text[], p_now_ms bigint[],
  p_window_first integer[], p_window_count integer[], p_window_names text[], p_window_limits bigint[], p_window_lengths_ms bigint[],
  p_ban_thresholds bigint[], p_ban_intervals_ms bigint[], p_ban_durations_ms bigint[], p_deadline_ms bigint, p_window_algorithms text[]${v7 ? ', p_counters boolean' : ''})
RETURNS TABLE (ordinal integer, now_ms text, outcome integer, banned_until_ms text, used text, error_code text, error_message text,
  clock_ms text, reset_at_ms text, retry_at_ms text${v7 ? ', starts_ms text, previous_counts text' : ''})
LANGUAGE plpgsql VOLATILE AS $consume_many$
DECLARE
  start_clock bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
  total integer := coalesce(array_length(p_keys, 1), 0);
  ord integer[];
  res_t bigint[]; res_outcome integer[]; res_ban bigint[]; res_used text[]; res_code text[]; res_message text[];
  res_reset text[]; res_retry text[];${v7 ? ' res_starts text[]; res_prevs text[];' : ''}
${version === 8 ? `  written ${names.rateLimits}[] := '{}'; fresh boolean; records bigint;\n` : ''}  pos integer := 1; last integer; q integer; c integer; alone boolean := false; done boolean; inserted boolean;
  rec_key text; created integer := 0; clean_t bigint;
  r ${names.rateLimits}%ROWTYPE;
  in_table boolean; present boolean; live boolean; dirty boolean; clock bigint; t bigint;
  p integer; n integer; first integer;
  p_names text[]; p_limits bigint[]; p_window_ms bigint[]; p_cost bigint; p_ban_subject text;
  with_ban boolean; p_ban_threshold bigint; p_ban_interval_ms bigint; p_ban_duration_ms bigint;
  i integer; j integer; k integer; w bigint; st bigint;
  starts bigint[]; counts bigint[]; has_room boolean; expires bigint;
  new_subjects text[]; new_rejected_starts bigint[]; new_rejected_counts integer[]; new_ban_ends bigint[];
  entry_end bigint; entry_start bigint; entry_count integer;
  result integer; ban_end bigint; interval_start bigint; rejected integer;
  failed_code text; failed_message text;
  general boolean; any_algorithm boolean; rejected_now boolean; same boolean;
  p_algorithms text[]; algs text[]; prevs bigint[]; used_now bigint[]; resets bigint[]; retries bigint[];
  alg text; s_alg text; s_start bigint; s_count bigint; s_limit bigint; lim bigint; cnt bigint; prev bigint;
  el bigint; held bigint; used_units bigint; end_ms bigint; room bigint; at_ms bigint; retry_ms bigint;
BEGIN
  -- The caller has given up on this call (answered it 503): charge nothing.
  IF start_clock >= p_deadline_ms THEN
    RETURN QUERY SELECT u.o, NULL::text, NULL::integer, NULL::text, NULL::text, '57014'::text,
      'the caller''s deadline had passed when the call started: nothing charged'::text, start_clock::text, NULL::text, NULL::text${v7 ? ', NULL::text, NULL::text' : ''}
      FROM generate_series(1, total) AS u(o);
    RETURN;
  END IF;
  -- The records in key order (byte order), each record's consumes in arrival order.
${
    version === 8
      ? `  SELECT array_agg(u.o ORDER BY p_keys[u.o] COLLATE "C", u.o), count(DISTINCT p_keys[u.o]) INTO ord, records
    FROM generate_subscripts(p_keys, 1) AS u(o);
`
      : `  SELECT array_agg(u.o::integer ORDER BY u.k COLLATE "C", u.o) INTO ord FROM unnest(p_keys) WITH ORDINALITY AS u(k, o);
`
  }${version === 8 ? batchLockedSql(names, decide) : ''}  WHILE pos <= total LOOP
    rec_key := p_keys[ord[pos]];
    -- The consumes decided in one block: all of the record's, or (after its block failed) one at a time.
    last := pos;
    IF NOT alone THEN
      WHILE last < total AND p_keys[ord[last + 1]] = rec_key LOOP last := last + 1; END LOOP;
    END IF;
    done := false; inserted := false;
    BEGIN
      SELECT * INTO r FROM ${names.rateLimits} AS x WHERE x.key = rec_key FOR UPDATE;
      in_table := FOUND;
      LOOP
        present := in_table; dirty := false;
        clock := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
${decide}        EXIT WHEN NOT dirty;
        IF in_table THEN
          UPDATE ${names.rateLimits} AS x
            SET window_names = r.window_names, window_starts_ms = r.window_starts_ms, window_counts = r.window_counts,
                window_limits = r.window_limits, window_lengths_ms = r.window_lengths_ms, ban_subjects = r.ban_subjects,
                rejected_starts_ms = r.rejected_starts_ms, rejected_counts = r.rejected_counts, banned_until_ms = r.banned_until_ms,
                expires_at_ms = r.expires_at_ms, window_algorithms = r.window_algorithms, window_previous_counts = r.window_previous_counts
            WHERE x.key = rec_key;
          EXIT;
        END IF;
        INSERT INTO ${names.rateLimits} AS x (key, window_names, window_starts_ms, window_counts, window_limits, window_lengths_ms,
            ban_subjects, rejected_starts_ms, rejected_counts, banned_until_ms, expires_at_ms, window_algorithms, window_previous_counts)
          VALUES (rec_key, r.window_names, r.window_starts_ms, r.window_counts, r.window_limits, r.window_lengths_ms,
            r.ban_subjects, r.rejected_starts_ms, r.rejected_counts, r.banned_until_ms, r.expires_at_ms, r.window_algorithms, r.window_previous_counts)
          ON CONFLICT (key) DO NOTHING;
        IF FOUND THEN inserted := true; EXIT; END IF;
        -- Another statement inserted the record meanwhile: decide again under its lock.
        SELECT * INTO r FROM ${names.rateLimits} AS x WHERE x.key = rec_key FOR UPDATE;
        in_table := FOUND;
      END LOOP;
      done := true;
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS failed_code = RETURNED_SQLSTATE, failed_message = MESSAGE_TEXT;
    END;
    IF done THEN
      IF inserted THEN created := created + 1; clean_t := greatest(clean_t, t); END IF;
      pos := last + 1;
    ELSIF last > pos THEN
      alone := true;
      CONTINUE;
    ELSE
      c := ord[pos];
      res_t[c] := NULL; res_code[c] := failed_code; res_message[c] := failed_message;
      pos := pos + 1;
    END IF;
    IF pos <= total AND p_keys[ord[pos]] <> rec_key THEN alone := false; END IF;
  END LOOP;
  IF created > 0 THEN
    BEGIN
      DELETE FROM ${names.rateLimits} AS x WHERE x.key IN (
        SELECT y.key FROM ${names.rateLimits} AS y WHERE y.expires_at_ms < clean_t
        ORDER BY y.expires_at_ms LIMIT 2 * created FOR UPDATE SKIP LOCKED);
    EXCEPTION WHEN OTHERS THEN
      NULL;
    END;
  END IF;
  -- The caller gave up while this call ran (a lock wait, say): undo it all.
  IF floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint >= p_deadline_ms THEN
    RAISE EXCEPTION 'the caller''s deadline passed during the call: nothing charged' USING ERRCODE = '57014';
  END IF;
  RETURN QUERY SELECT u.o, res_t[u.o]::text, res_outcome[u.o], res_ban[u.o]::text, res_used[u.o], res_code[u.o], res_message[u.o],
    start_clock::text, res_reset[u.o], res_retry[u.o]${v7 ? ', res_starts[u.o], res_prevs[u.o]' : ''}
    FROM ${version === 8 ? 'generate_subscripts(p_keys, 1)' : 'generate_series(1, total)'} AS u(o);
END
$consume_many$`;
}

/** Version 4's signature of the batch consume function as version 6 leaves it: a call of version 6's, every window fixed. */
export function consumeManyV4CallsAlgorithmsSql(names: RateLimitsNames): string {
  return `CREATE OR REPLACE FUNCTION ${names.consumeManyFunction}(
  p_keys text[], p_policies integer[], p_costs bigint[], p_ban_subjects text[], p_now_ms bigint[],
  p_window_first integer[], p_window_count integer[], p_window_names text[], p_window_limits bigint[], p_window_lengths_ms bigint[],
  p_ban_thresholds bigint[], p_ban_intervals_ms bigint[], p_ban_durations_ms bigint[], p_deadline_ms bigint)
RETURNS TABLE (ordinal integer, now_ms text, outcome integer, banned_until_ms text, used text, error_code text, error_message text, clock_ms text)
LANGUAGE plpgsql VOLATILE AS $consume_many$
BEGIN
  RETURN QUERY SELECT m.ordinal, m.now_ms, m.outcome, m.banned_until_ms, m.used, m.error_code, m.error_message, m.clock_ms
    FROM ${names.consumeManyFunction}(p_keys, p_policies, p_costs, p_ban_subjects, p_now_ms, p_window_first, p_window_count,
      p_window_names, p_window_limits, p_window_lengths_ms, p_ban_thresholds, p_ban_intervals_ms, p_ban_durations_ms, p_deadline_ms,
      NULL::text[]) AS m;
END
$consume_many$`;
}

/** Version 6's signature of the batch consume function as version 7 leaves it: a call of version 7's, answering usage. */
export function consumeManyV6CallsCountersSql(names: RateLimitsNames): string {
  return `CREATE OR REPLACE FUNCTION ${names.consumeManyFunction}(
  p_keys text[], p_policies integer[], p_costs bigint[], p_ban_subjects text[], p_now_ms bigint[],
  p_window_first integer[], p_window_count integer[], p_window_names text[], p_window_limits bigint[], p_window_lengths_ms bigint[],
  p_ban_thresholds bigint[], p_ban_intervals_ms bigint[], p_ban_durations_ms bigint[], p_deadline_ms bigint, p_window_algorithms text[])
RETURNS TABLE (ordinal integer, now_ms text, outcome integer, banned_until_ms text, used text, error_code text, error_message text,
  clock_ms text, reset_at_ms text, retry_at_ms text)
LANGUAGE plpgsql VOLATILE AS $consume_many$
BEGIN
  RETURN QUERY SELECT m.ordinal, m.now_ms, m.outcome, m.banned_until_ms, m.used, m.error_code, m.error_message, m.clock_ms,
      m.reset_at_ms, m.retry_at_ms
    FROM ${names.consumeManyFunction}(p_keys, p_policies, p_costs, p_ban_subjects, p_now_ms, p_window_first, p_window_count,
      p_window_names, p_window_limits, p_window_lengths_ms, p_ban_thresholds, p_ban_intervals_ms, p_ban_durations_ms, p_deadline_ms,
      p_window_algorithms, false) AS m;
END
$consume_many$`;
}

/**
 * Version 8's path for a call of two records or more: the same decisions as the record-by-record loop, with the
 * statements shared by the records. Every record of the call is locked by one statement, in key order (byte order,
 * as the loop takes them), a record not yet in the table inserted empty (expired: it holds nothing) so that it is
 * locked too; the records are read by one statement and written by one. All of it in one block (one subtransaction
 * instead of one per record): when anything in it fails, its changes are undone and the call is decided again by
 * the loop, record by record, each in a block of its own, as before. A row is locked `FOR NO KEY UPDATE` here (what
 * `ON CONFLICT DO UPDATE` takes) and `FOR UPDATE` by the loop: the two conflict, so two calls never decide one record
 * at once, whichever path each takes.
 */
function batchLockedSql(names: RateLimitsNames, decide: string): string {
  const table = names.rateLimits;
  return `  IF records > 1 THEN
    BEGIN
      INSERT INTO ${table} AS x (key, window_names, window_starts_ms, window_counts, window_limits, window_lengths_ms,
          ban_subjects, rejected_starts_ms, rejected_counts, banned_until_ms, expires_at_ms)
        SELECT u.k, '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', 0
          FROM (SELECT DISTINCT p_keys[v.o] AS k FROM generate_subscripts(p_keys, 1) AS v(o)) AS u ORDER BY u.k COLLATE "C"
        ON CONFLICT (key) DO UPDATE SET expires_at_ms = x.expires_at_ms WHERE false;
      GET DIAGNOSTICS created = ROW_COUNT;
      FOR r IN SELECT * FROM ${table} AS x WHERE x.key = ANY (p_keys) ORDER BY x.key COLLATE "C" LOOP
        rec_key := r.key;
        IF pos > total OR p_keys[ord[pos]] IS DISTINCT FROM rec_key THEN
          RAISE EXCEPTION 'the records read do not match the call''s keys';
        END IF;
        last := pos;
        WHILE last < total AND p_keys[ord[last + 1]] = rec_key LOOP last := last + 1; END LOOP;
        -- Inserted empty just now (a record's expiry is never 0 otherwise).
        fresh := r.expires_at_ms = 0;
        present := true; dirty := false;
        clock := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
${decide}        IF fresh THEN clean_t := greatest(clean_t, t); END IF;
        IF dirty THEN written := written || r; END IF;
        pos := last + 1;
      END LOOP;
      IF pos <= total THEN
        RAISE EXCEPTION 'the records read do not match the call''s keys';
      END IF;
      UPDATE ${table} AS x
        SET window_names = u.window_names, window_starts_ms = u.window_starts_ms, window_counts = u.window_counts,
            window_limits = u.window_limits, window_lengths_ms = u.window_lengths_ms, ban_subjects = u.ban_subjects,
            rejected_starts_ms = u.rejected_starts_ms, rejected_counts = u.rejected_counts, banned_until_ms = u.banned_until_ms,
            expires_at_ms = u.expires_at_ms, window_algorithms = u.window_algorithms, window_previous_counts = u.window_previous_counts
        FROM unnest(written) AS u WHERE x.key = u.key;
    EXCEPTION WHEN OTHERS THEN
      -- Undone: decided again below, record by record.
      pos := 1; created := 0; clean_t := NULL; written := '{}';
      res_t := '{}'; res_outcome := '{}'; res_ban := '{}'; res_used := '{}'; res_starts := '{}'; res_prevs := '{}';
      res_reset := '{}'; res_retry := '{}';
    END;
  END IF;
`;
}

/**
 * The batch consume function of version 8: version 7's (same signature, decisions and answers) with two changes. A
 * call of two records or more (distinct keys; a call of one record's consumes gains nothing from it) locks, reads and writes its records with one statement each (`batchLockedSql`). And the
 * order of the records and the reply are built over `generate_subscripts(p_keys, 1)` rather than `unnest(p_keys)` and
 * `generate_series(1, total)`: PostgreSQL estimates those two from the call's own values, so a plan made for the
 * call's values always looked cheaper than the generic plan and every call planned both statements again (about 30 µs
 * of a lone consume's PostgreSQL CPU, in a profile); `generate_subscripts`' estimate does not depend on them, and the
 * function keeps one generic plan for each. (The statements that read and write the rows keep plans made for the
 * call's values: their row estimates choose between index and sequential scans.)
 */
export function consumeManyBatchLockedSql(names: RateLimitsNames): string {
  return consumeManySql(names, 8);
}

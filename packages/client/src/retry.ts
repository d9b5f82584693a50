/**
 * Retry settings, the backoff formula and `Retry-After` parsing: a client backs off exponentially and
 * retries no sooner than the time in `Retry-After`.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#retry-after
 */

/** How a {@link PetstoreClient} retries. Every field is optional; missing ones come from {@link DEFAULT_RETRY}. */
export interface RetryOptions {
  /**
   * Most requests one call sends, the first included (an integer ≥ 1; 1 turns retries off).
   * Default 4.
   */
  maxAttempts?: number;
  /**
   * Time budget of one call in ms (a finite number > 0), measured with `now()` from the call's start; it
   * bounds the waits between attempts and the attempts themselves. A retry whose wait would end at or after
   * the budget is not made: the call rejects at once with the last error instead of sleeping. Each attempt
   * gets at most what is left of the budget (and at most the client's `attemptTimeoutMs`); when the budget runs out
   * during an attempt, the attempt is aborted and the call rejects with `timeout`. Default 30 000.
   */
  maxElapsedMs?: number;
  /** Base of the exponential backoff in ms: retry n (0-based) waits up to `baseDelayMs × 2^n`. Default 500. */
  baseDelayMs?: number;
  /** Cap of the exponential backoff in ms (before jitter). Default 8 000. */
  maxDelayMs?: number;
}

/** {@link RetryOptions} with every field present. */
export type ResolvedRetryOptions = Required<RetryOptions>;

/** The retry settings used for any field the caller does not set. */
export const DEFAULT_RETRY: Readonly<ResolvedRetryOptions> = Object.freeze({
  maxAttempts: 4,
  maxElapsedMs: 30_000,
  baseDelayMs: 500,
  maxDelayMs: 8_000,
});

/**
 * Fills in {@link DEFAULT_RETRY} and checks the values.
 * @throws TypeError when a setting has a name other than those of {@link RetryOptions}
 * @throws RangeError when `maxAttempts` is not an integer ≥ 1, `maxElapsedMs` is not a finite number > 0, or
 *   `baseDelayMs` / `maxDelayMs` is negative or not finite.
 */
export function resolveRetryOptions(retry: RetryOptions | undefined): ResolvedRetryOptions {
  const resolved: ResolvedRetryOptions = { ...DEFAULT_RETRY };
  const unknown = Object.keys(retry ?? {}).filter((name) => !Object.hasOwn(DEFAULT_RETRY, name));
  if (unknown.length > 0) {
    throw new TypeError(`unknown retry setting(s) ${unknown.map((name) => `retry.${name}`).join(', ')}; the settings are ${Object.keys(DEFAULT_RETRY).join(', ')}`);
  }
  for (const [name, value] of Object.entries(retry ?? {})) {
    if (value !== undefined) (resolved as Record<string, unknown>)[name] = value;
  }
  if (!Number.isSafeInteger(resolved.maxAttempts) || resolved.maxAttempts < 1) {
    throw new RangeError('retry.maxAttempts must be an integer ≥ 1');
  }
  // A zero budget would leave no time for even the first attempt.
  if (!Number.isFinite(resolved.maxElapsedMs) || resolved.maxElapsedMs <= 0) {
    throw new RangeError('retry.maxElapsedMs must be a finite number > 0');
  }
  for (const name of ['baseDelayMs', 'maxDelayMs'] as const) {
    if (!Number.isFinite(resolved[name]) || resolved[name] < 0) throw new RangeError(`retry.${name} must be a finite number ≥ 0`);
  }
  return resolved;
}

/**
 * Exponential backoff with full jitter: a random delay in `[0, min(maxDelayMs, baseDelayMs × 2^retryIndex))` ms.
 *
 * @param retryIndex 0 for the first retry, 1 for the second, …
 * @param random a source of numbers in [0, 1), `Math.random` by default
 */
export function backoffDelayMs(retryIndex: number, retry: ResolvedRetryOptions, random: () => number = Math.random): number {
  const ceiling = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** retryIndex);
  return Math.floor(random() * ceiling);
}

/**
 * Reads a `Retry-After` header (RFC 9110 §10.2.3): delay-seconds (`120`) or an HTTP-date.
 *
 * @param nowMs the current Unix epoch time in ms, for the HTTP-date form
 * @returns the delay in ms (never negative) and in whole seconds (rounded up), or `undefined` when the header
 *   is absent or unreadable
 */
export function parseRetryAfter(value: string | null, nowMs: number): { delayMs: number; seconds: number } | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) {
    const seconds = Number(text);
    return Number.isSafeInteger(seconds) ? { delayMs: seconds * 1000, seconds } : undefined;
  }
  // The three HTTP-date forms (IMF-fixdate, RFC 850, asctime) all start with a day name.
  const atMs = /^[A-Za-z]{3}/.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(atMs)) return undefined;
  const delayMs = Math.max(0, atMs - nowMs);
  return { delayMs, seconds: Math.ceil(delayMs / 1000) };
}

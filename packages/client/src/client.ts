/**
 * `createPetstoreClient`: the two category operations of SPEC §4 over any fetch implementation, with
 * typed errors, the last `X-RateLimit-*` state, and retries that honour `Retry-After` (SPEC §8).
 */
import type { Category, NewCategory } from '@petstore/core';
import { PetstoreClientError, type PetstoreClientErrorCode } from './errors.js';
import type { PetstoreFetch, PetstoreFetchInit } from './fetch-types.js';
import { isConnectionNotEstablished } from './network.js';
import { readRateLimitInfo, type RateLimitInfo } from './rate-limit-info.js';
import { backoffDelayMs, parseRetryAfter, resolveRetryOptions, type RetryOptions } from './retry.js';

/** Options of {@link createPetstoreClient}. */
export interface PetstoreClientOptions {
  /** Base address including the path prefix, e.g. `http://127.0.0.1:3000/v1` (SPEC §1, §9). */
  baseUrl: string;
  /** The API key, sent as `Authorization: Bearer <apiKey>` (SPEC §5). Never put into error messages. */
  apiKey: string;
  /** Fetch implementation; the global `fetch` by default. node-fetch v3's default export fits as is. */
  fetch?: PetstoreFetch;
  /** Retry settings; see {@link RetryOptions} and {@link DEFAULT_RETRY}. */
  retry?: RetryOptions;
  /** Waits `ms` milliseconds; `setTimeout` by default. Inject a fake in tests to move time instead. */
  sleep?: (ms: number) => Promise<void>;
  /** Current Unix epoch time in ms, for the time budget and HTTP-date `Retry-After`; `Date.now` by default. */
  now?: () => number;
  /** Source of numbers in [0, 1) for the backoff jitter; `Math.random` by default. */
  random?: () => number;
}

/** A client of the petstore categories API. Create it with {@link createPetstoreClient}. */
export interface PetstoreClient {
  /**
   * `GET /categories` (SPEC §4.1).
   * @returns every category, in the server's order (id order for this library's server)
   * @throws {@link PetstoreClientError} (`unauthorized`, `rate_limited`, `network_error`, …) once retries,
   *   if any, are exhausted
   */
  listCategories(): Promise<Category[]>;
  /**
   * `POST /categories` (SPEC §4.2) with the NewCategory as a JSON body.
   * @returns the created Category, with the id the service assigned
   * @throws {@link PetstoreClientError} (`validation_failed`, `unauthorized`, `rate_limited`, …); retried
   *   only where the category cannot have been created (see {@link createPetstoreClient})
   */
  createCategory(newCategory: NewCategory): Promise<Category>;
  /**
   * The `X-RateLimit-*` values of the last answer that carried them (successes and errors alike, retries
   * included); `undefined` before the first such answer.
   */
  readonly lastRateLimit: RateLimitInfo | undefined;
}

/** How a failed attempt may be retried: always, only when the request is idempotent, or never. */
type RetryClass = 'safe' | 'unsafe' | 'never';

type AttemptOutcome<T> =
  | { ok: true; value: T }
  | { ok: false; error: PetstoreClientError; retry: RetryClass; retryAfterMs: number | undefined };

const MAX_TIMER_MS = 2 ** 31 - 1;

async function sleepWithTimers(ms: number): Promise<void> {
  // setTimeout overflows past 2^31 − 1 ms; wait in steps.
  for (let left = ms; left > 0; left -= MAX_TIMER_MS) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(left, MAX_TIMER_MS)));
  }
}

function isCategory(value: unknown): value is Category {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { id, name, description } = value as Record<string, unknown>;
  return Number.isSafeInteger(id) && typeof name === 'string' && (description === undefined || typeof description === 'string');
}

function errorBodyOf(value: unknown): { code: PetstoreClientErrorCode; message: string } | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { code, message } = value as Record<string, unknown>;
  if (typeof code !== 'string' || code === '' || typeof message !== 'string') return undefined;
  return { code: code as PetstoreClientErrorCode, message };
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false; cause: unknown } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (cause) {
    return { ok: false, cause };
  }
}

function describeNetworkError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  let code: unknown;
  for (let cause: unknown = error, depth = 0; cause && depth < 4 && code === undefined; depth++) {
    code = (cause as { code?: unknown }).code;
    cause = (cause as { cause?: unknown }).cause;
  }
  return typeof code === 'string' && !message.includes(code) ? `${message} (${code})` : message;
}

/**
 * Creates a client of the petstore categories API.
 *
 * **Errors.** Every failure rejects with one {@link PetstoreClientError}: `code` from the Error body (SPEC §7),
 * or `network_error` (no answer; `status` 0) or `invalid_response` (an error status without an Error body, or
 * a success without the expected JSON); `status`, `retryAfterSeconds` (when the answer had `Retry-After`) and
 * `attempts` (requests sent). A failure that is not retried is thrown after one request.
 *
 * **Retries** (SPEC §8 rule 2). A call sends at most `retry.maxAttempts` requests (default 4) within
 * `retry.maxElapsedMs` (default 30 000 ms, measured with `now()` from the call's start). Retried:
 * - 429 `rate_limited` (any 429 except `temporarily_banned`): safe for GET and POST alike, since the server
 *   refuses before executing anything;
 * - 503 (e.g. `service_unavailable`): GET only; a POST only with `retry.retryUnsafe: true`, since the create
 *   may have been applied;
 * - network errors: GET always; a POST only when the connection was never established (`ECONNREFUSED`,
 *   `ENOTFOUND`, … — see {@link CONNECTION_NOT_ESTABLISHED_CODES}), or with `retry.retryUnsafe: true`.
 *
 * Never retried: 429 `temporarily_banned` (SPEC §8 rule 3: sending during a ban only prolongs trouble),
 * 400, 401, 404, 405, 413, 500, 507, `invalid_response`.
 *
 * Retry n (0 for the first) waits `max(Retry-After, random × min(maxDelayMs, baseDelayMs × 2^n))` ms:
 * never sooner than `Retry-After` allows, and exponential backoff with full jitter on top of it (defaults
 * 500 ms base, 8 000 ms cap). When that wait would end after the time budget, the call does not sleep: it
 * rejects at once with the last error — a `Retry-After` longer than the remaining budget therefore fails
 * fast instead of waiting or hammering.
 *
 * @throws TypeError when `baseUrl` is not an absolute URL, `apiKey` is empty, or no fetch is available
 * @throws RangeError on invalid retry settings
 */
export function createPetstoreClient(options: PetstoreClientOptions): PetstoreClient {
  const { apiKey } = options;
  if (typeof apiKey !== 'string' || apiKey === '') throw new TypeError('apiKey must be a non-empty string');
  if (!URL.canParse(options.baseUrl)) throw new TypeError('baseUrl must be an absolute URL such as http://127.0.0.1:3000/v1');
  const categoriesUrl = `${options.baseUrl.replace(/\/+$/, '')}/categories`;
  const doFetch: PetstoreFetch =
    options.fetch ??
    (typeof globalThis.fetch === 'function'
      ? (url, init) => globalThis.fetch(url, init)
      : () => Promise.reject(new TypeError('no global fetch: pass the fetch option')));
  const retry = resolveRetryOptions(options.retry);
  const sleep = options.sleep ?? sleepWithTimers;
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;
  let lastRateLimit: RateLimitInfo | undefined;

  async function attempt<T>(
    init: PetstoreFetchInit,
    accept: (value: unknown) => value is T,
    attempts: number,
  ): Promise<AttemptOutcome<T>> {
    const networkError = (cause: unknown, retryClass: RetryClass): AttemptOutcome<T> => ({
      ok: false,
      error: new PetstoreClientError('network_error', `${init.method} ${categoriesUrl} failed: ${describeNetworkError(cause)}`, {
        status: 0,
        attempts,
        cause,
      }),
      retry: retryClass,
      retryAfterMs: undefined,
    });
    let response;
    try {
      response = await doFetch(categoriesUrl, init);
    } catch (cause) {
      return networkError(cause, isConnectionNotEstablished(cause) ? 'safe' : 'unsafe');
    }
    lastRateLimit = readRateLimitInfo(response.headers) ?? lastRateLimit;
    const { status } = response;
    const retryAfter = parseRetryAfter(response.headers.get('retry-after'), now());
    let text: string;
    try {
      text = await response.text();
    } catch (cause) {
      return networkError(cause, 'unsafe'); // the server answered: the request was executed or refused
    }
    const json = parseJson(text);
    const details = { status, attempts, retryAfterSeconds: retryAfter?.seconds };
    if (status >= 200 && status < 300) {
      if (json.ok && accept(json.value)) return { ok: true, value: json.value };
      const message = `HTTP ${status} answer to ${init.method} ${categoriesUrl} is not the expected JSON`;
      const cause = json.ok ? undefined : json.cause;
      return { ok: false, error: new PetstoreClientError('invalid_response', message, { ...details, cause }), retry: 'never', retryAfterMs: undefined };
    }
    const body = json.ok ? errorBodyOf(json.value) : undefined;
    const error = body
      ? new PetstoreClientError(body.code, body.message, details)
      : new PetstoreClientError('invalid_response', `HTTP ${status} answer to ${init.method} ${categoriesUrl} has no Error body`, {
          ...details,
          cause: json.ok ? undefined : json.cause,
        });
    const retryClass: RetryClass =
      status === 429 ? (error.code === 'temporarily_banned' ? 'never' : 'safe') : status === 503 ? 'unsafe' : 'never';
    return { ok: false, error, retry: retryClass, retryAfterMs: retryAfter?.delayMs };
  }

  async function send<T>(init: PetstoreFetchInit, accept: (value: unknown) => value is T): Promise<T> {
    const startedAt = now();
    const idempotent = init.method === 'GET';
    for (let attempts = 1; ; attempts++) {
      const outcome = await attempt(init, accept, attempts);
      if (outcome.ok) return outcome.value;
      const retryable = outcome.retry === 'safe' || (outcome.retry === 'unsafe' && (idempotent || retry.retryUnsafe));
      if (!retryable || attempts >= retry.maxAttempts) throw outcome.error;
      const waitMs = Math.max(outcome.retryAfterMs ?? 0, backoffDelayMs(attempts - 1, retry, random));
      const remainingMs = retry.maxElapsedMs - (now() - startedAt);
      if (waitMs > remainingMs) throw outcome.error;
      await sleep(waitMs);
    }
  }

  const authorization = `Bearer ${apiKey}`;
  return {
    listCategories: () =>
      send(
        { method: 'GET', headers: { authorization, accept: 'application/json' } },
        (value): value is Category[] => Array.isArray(value) && value.every(isCategory),
      ),
    createCategory: (newCategory) =>
      send(
        {
          method: 'POST',
          headers: { authorization, accept: 'application/json', 'content-type': 'application/json' },
          body: JSON.stringify(newCategory),
        },
        isCategory,
      ),
    get lastRateLimit() {
      return lastRateLimit;
    },
  };
}

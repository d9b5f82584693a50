/**
 * `createPetstoreClient`: the two category operations over any fetch implementation, with typed errors,
 * the last `X-RateLimit-*` state, retries that honour `Retry-After` (creates made safe to retry by an
 * `Idempotency-Key`), per-call cancellation and per-attempt timeouts.
 */
import { LRUCache } from 'lru-cache';
import type { Category, NewCategory } from './api-types.js';
import { attemptSignal, raceAbort, sleepWithTimers } from './abort.js';
import { PetstoreClientError, type PetstoreClientErrorCode } from './errors.js';
import type { PetstoreFetch, PetstoreFetchHeaders, PetstoreFetchInit } from './fetch-types.js';
import { checkIdempotencyKey, newIdempotencyKey, serializeIdempotencyKey } from './idempotency.js';
import { readRateLimitInfo, type RateLimitInfo } from './rate-limit-info.js';
import { backoffDelayMs, parseRetryAfter, resolveRetryOptions, type RetryOptions } from './retry.js';

/** The per-attempt timeout used when the `attemptTimeoutMs` option is not set, in ms. */
export const DEFAULT_ATTEMPT_TIMEOUT_MS = 10_000;

/** Options of {@link createPetstoreClient}. */
export interface PetstoreClientOptions {
  /** Base address including the path prefix, e.g. `http://127.0.0.1:3000/v1`. */
  baseUrl: string;
  /** The API key, sent as `Authorization: Bearer <apiKey>`. Never put into error messages. */
  apiKey: string;
  /** Fetch implementation; the global `fetch` by default. node-fetch v3's default export fits as is. */
  fetch?: PetstoreFetch;
  /** Retry settings; see {@link RetryOptions} and {@link DEFAULT_RETRY}. */
  retry?: RetryOptions;
  /**
   * Most time one attempt may take, in ms (a finite number > 0; default {@link DEFAULT_ATTEMPT_TIMEOUT_MS}, 10 000):
   * from calling fetch until the whole body is read. An attempt that runs out of time is aborted (its fetch
   * `signal` aborts) and fails as `timeout`, which is retried like a network error after which the request
   * may have been executed. An attempt never gets more than what is left of `retry.maxElapsedMs`. Measured
   * with the timers (`setTimeout`), not with `now`/`sleep`: in tests, move it with fake timers.
   */
  attemptTimeoutMs?: number;
  /**
   * Waits `ms` milliseconds before a retry; by default a `setTimeout`-based wait that ends early when
   * `signal` aborts. `signal` is the call's `signal` (`undefined` when the call has none): the wait should
   * end when it aborts, though the call rejects at once either way. Inject a fake in tests to move time
   * instead of waiting.
   */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Current Unix epoch time in ms, for the time budget and HTTP-date `Retry-After`; `Date.now` by default. */
  now?: () => number;
  /** Source of numbers in [0, 1) for the backoff jitter; `Math.random` by default. */
  random?: () => number;
}

/** The names of {@link PetstoreClientOptions}. */
const OPTION_NAMES: ReadonlySet<string> = new Set(['baseUrl', 'apiKey', 'fetch', 'retry', 'attemptTimeoutMs', 'sleep', 'now', 'random']);

/** Per-call options of {@link PetstoreClient.listCategories} and {@link PetstoreClient.createCategory}. */
export interface PetstoreCallOptions {
  /**
   * Cancels the call. When it aborts — before the call, during an attempt (the attempt's fetch signal aborts
   * too) or during a wait between attempts — the call rejects at once with a {@link PetstoreClientError}
   * whose `code` is `aborted` and whose `cause` is `signal.reason`, and sends nothing more. An `aborted`
   * call is never retried. A create aborted during its attempt may still have been executed by the server;
   * calling `createCategory` again with the same `idempotencyKey` (see {@link PetstoreCreateOptions}) then
   * answers that category instead of creating a second one.
   */
  signal?: AbortSignal | undefined;
}

/**
 * Per-call options of {@link PetstoreClient.listCategories}: `signal`, plus the page to ask for. Without `limit` and
 * `after` the call asks for every category (one answer).
 */
export interface PetstoreListOptions extends PetstoreCallOptions {
  /**
   * Most categories to answer: a whole number ≥ 1 (the server accepts up to 1000 and answers 400
   * `validation_failed` above). Sent as `?limit=`.
   */
  limit?: number | undefined;
  /** Only categories whose id is above this one: a safe integer ≥ 0 (typically the last id of the previous page). */
  after?: number | undefined;
}

/** Options of {@link PetstoreClient.listCategoryPages}. */
export interface PetstorePagesOptions extends PetstoreCallOptions {
  /** Categories per page: a whole number from 1 to 1000. Default {@link DEFAULT_PAGE_LIMIT} (100). */
  limit?: number | undefined;
  /** Start after this id (a safe integer ≥ 0); default 0, the first category. */
  after?: number | undefined;
}

/** Categories per page of {@link PetstoreClient.listCategoryPages} unless `limit` says otherwise: 100. */
export const DEFAULT_PAGE_LIMIT = 100;

/**
 * How many list answers the client keeps to revalidate (`If-None-Match`): the last answer of each of the 16 URLs
 * used most recently (the full list, or one page), holding at most 32 Mi characters of JSON in all; a larger answer
 * is not kept.
 */
const LIST_CACHE = { max: 16, maxSizeChars: 32 * 1024 * 1024 } as const;

/** Per-call options of {@link PetstoreClient.createCategory}: `signal`, plus the create's idempotency key. */
export interface PetstoreCreateOptions extends PetstoreCallOptions {
  /**
   * The `Idempotency-Key` to send: 1 to 255 printable ASCII characters (U+0020–U+007E), e.g. a UUID; sent as a
   * structured-field string (in double quotes, `"` and `\` escaped). By default every call makes a fresh random
   * UUID. Pass your own to retry a create across calls (after `aborted`, after the call gave up, after a
   * restart, with the key stored beside the work it belongs to): while the server keeps the key (24 hours by
   * default), a create with the same key and the same NewCategory answers the first category again instead of
   * creating another, and one with another NewCategory fails with 422 `idempotency_key_reused`. Keys are
   * scoped to the API key. Use a new key for every distinct create.
   * @throws TypeError (the call rejects before sending anything) when it is not such a string
   */
  idempotencyKey?: string | undefined;
}

/** A client of the petstore categories API. Create it with {@link createPetstoreClient}. */
export interface PetstoreClient {
  /**
   * `GET /categories`, or a page of it with `limit` and `after` (`GET /categories?limit=…&after=…`). The client
   * keeps the last answer of each URL with its `ETag` and sends `If-None-Match` with it: when the server answers
   * 304 Not Modified (the list is unchanged), the kept answer is returned again, and only headers crossed the
   * network. (A 304 is charged to the rate limit like any request.)
   * @param options `signal` to cancel the call; `limit` and `after` for a page; see {@link PetstoreListOptions}
   * @returns the categories, in id order: every one, or at most `limit` with ids above `after`
   * @throws TypeError when `limit` is not a whole number ≥ 1 or `after` not a safe integer ≥ 0; nothing is sent
   * @throws {@link PetstoreClientError} (`validation_failed` for a `limit` over the server's 1000, `unauthorized`,
   *   `rate_limited`, `network_error`, `timeout`, …) once retries, if any, are exhausted; `aborted` at once when
   *   `options.signal` aborts
   */
  listCategories(options?: PetstoreListOptions): Promise<Category[]>;
  /**
   * Every category, page by page: asks for `limit` categories (default 100) above `after` (default 0), yields them,
   * and follows the answer's `Link: <…>; rel="next"` (RFC 8288) until an answer has none. Each page is one call of
   * its own (retries, `If-None-Match`, `signal` as {@link PetstoreClient.listCategories}); the next page is asked
   * for only when the loop asks for it, so `break` stops early. Categories created while paging show up on a later
   * page when their id is above the last one read.
   * @throws TypeError as {@link PetstoreClient.listCategories}, from the first `next()`
   * @throws {@link PetstoreClientError} as {@link PetstoreClient.listCategories}; `invalid_response` when a `next`
   *   link points outside `baseUrl`'s origin (the API key is never sent elsewhere)
   */
  listCategoryPages(options?: PetstorePagesOptions): AsyncIterableIterator<Category[]>;
  /**
   * `POST /categories` with the NewCategory as a JSON body and an `Idempotency-Key` header: a fresh random UUID
   * per call, or `options.idempotencyKey`. Every retry of the call sends the same key, so a retry after a 503,
   * a dropped connection or a timeout — when the first request may have created the category — gets that
   * category back (a replay) instead of creating a second one.
   * @param options `signal` to cancel the call, `idempotencyKey` to choose the key; see {@link PetstoreCreateOptions}
   * @returns the created Category, with the id the service assigned (the same Category when the answer is a
   *   replay of an earlier create with the same key)
   * @throws TypeError when `options.idempotencyKey` is given but is not 1 to 255 printable ASCII characters, or
   *   when no key is given and the runtime has no global `crypto` to make one; nothing is sent
   * @throws {@link PetstoreClientError} (`validation_failed`, `unauthorized`, `rate_limited`,
   *   `idempotency_key_reused`, `timeout`, …) once retries, if any, are exhausted (see
   *   {@link createPetstoreClient}); `aborted` at once when `options.signal` aborts
   */
  createCategory(newCategory: NewCategory, options?: PetstoreCreateOptions): Promise<Category>;
  /**
   * The `X-RateLimit-*` values of the last answer that carried them (successes and errors alike, retries
   * included), in units (each operation charges its `x-rate-limit-cost`); `undefined` before the first such
   * answer.
   */
  readonly lastRateLimit: RateLimitInfo | undefined;
}

/**
 * Whether a failed attempt may be retried. Every request this client sends is idempotent — `GET`s, and creates,
 * which carry an `Idempotency-Key` (a repeat the server already executed is answered with a replay) — so any
 * failure that may pass is retried, also one after which the request may have been executed.
 */
type RetryClass = 'retry' | 'never';

type AttemptOutcome<T> =
  | { ok: true; value: T }
  | { ok: false; error: PetstoreClientError; retry: RetryClass; retryAfterMs: number | undefined };

/**
 * How an error answer may be retried: a 429 other than a ban, a 409 `idempotency_key_in_flight` and a 503 may
 * pass; anything else is final.
 */
function retryClassOf(status: number, code: PetstoreClientErrorCode): RetryClass {
  if (status === 429) return code === 'temporarily_banned' ? 'never' : 'retry';
  if (status === 409) return code === 'idempotency_key_in_flight' ? 'retry' : 'never';
  return status === 503 ? 'retry' : 'never';
}

function isCategory(value: unknown): value is Category {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { id, name, description } = value as Record<string, unknown>;
  return Number.isSafeInteger(id) && typeof name === 'string' && (description === undefined || typeof description === 'string');
}

/** An answer the client accepts (2xx, or 304 to a request with If-None-Match), read whole. */
interface Answer {
  status: number;
  headers: PetstoreFetchHeaders;
  text: string;
}

/** What a call makes of an accepted answer: its value, or what is wrong with it (`invalid_response`). */
type Accept<T> = (answer: Answer) => { ok: true; value: T } | { ok: false; problem: string; cause?: unknown };

/** A list answer kept for If-None-Match: its tag, its JSON text and its next-page link. */
interface KeptList {
  etag: string;
  text: string;
  next: string | undefined;
}

/** One list answer: the categories, and the absolute URL of the next page while more remain. */
interface ListPage {
  categories: Category[];
  next: string | undefined;
}

/**
 * The list URL for a page: `?limit=…&after=…` with what is given (the order the server's `Link` uses, so a followed
 * link and a page asked for by hand share one kept answer).
 * @throws TypeError when `limit` is not a whole number ≥ 1 or `after` not a safe integer ≥ 0
 */
function pageUrl(categoriesUrl: string, limit: number | undefined, after: number | undefined): string {
  if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1)) throw new TypeError(`limit must be a whole number >= 1, got ${String(limit)}`);
  if (after !== undefined && (!Number.isSafeInteger(after) || after < 0)) throw new TypeError(`after must be a safe integer >= 0, got ${String(after)}`);
  const query = [limit === undefined ? '' : `limit=${limit}`, after === undefined ? '' : `after=${after}`].filter((part) => part !== '').join('&');
  return query === '' ? categoriesUrl : `${categoriesUrl}?${query}`;
}

// One link-value of a Link header (RFC 8288 §3): `<target>` and its parameters, up to the next comma outside them.
const LINK_VALUE = /<([^>]*)>((?:\s*;\s*[^;,]*)*)/g;
const REL_NEXT = /;\s*rel\s*=\s*(?:"([^"]*)"|([^\s;,"]+))/i;

/** The absolute URL of the `rel="next"` link of an answer (resolved against `url`), or `undefined`. */
function nextLink(headers: PetstoreFetchHeaders, url: string): string | undefined {
  const link = headers.get('link');
  if (link === null) return undefined;
  for (const [, target, parameters] of link.matchAll(LINK_VALUE)) {
    const rel = REL_NEXT.exec(parameters ?? '');
    const relations = (rel?.[1] ?? rel?.[2] ?? '').toLowerCase().split(/\s+/);
    if (relations.includes('next') && URL.canParse(target as string, url)) return new URL(target as string, url).href;
  }
  return undefined;
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
 * **Errors.** Every failure rejects with one {@link PetstoreClientError}: `code` from the Error body, or
 * `network_error` (no answer; `status` 0), `invalid_response` (an error status without an Error body, or a
 * success without the expected JSON), `timeout` (the attempt ran out of time) or `aborted` (the call's
 * `signal` aborted); `status`, `retryAfterSeconds` (when the answer had `Retry-After`) and `attempts`
 * (requests sent). A failure that is not retried is thrown after one request.
 *
 * **Retries.** A call sends at most `retry.maxAttempts` requests (default 4) within `retry.maxElapsedMs`
 * (default 30 000 ms, measured with `now()` from the call's start). A create carries an `Idempotency-Key`,
 * the same on every retry of the call, so the server answers a repeat of a create it already executed with
 * that create's category (a replay) instead of creating another: creates are retried like GETs. Retried:
 * - 429 `rate_limited` (any 429 except `temporarily_banned`): the server refuses before executing anything;
 * - 409 `idempotency_key_in_flight`: the first request with the key is still being processed; the retry
 *   waits for its `Retry-After`;
 * - 503 (e.g. `service_unavailable`): the create may have been applied, and then the retry is a replay;
 * - network errors, whether the connection was never established (`ECONNREFUSED`, `ENOTFOUND`, …) or dropped
 *   after the request was sent (`ECONNRESET`, socket closed, body cut off);
 * - `timeout` of one attempt (`attemptTimeoutMs`, default 10 000 ms), like a network error after sending.
 *
 * Never retried: 429 `temporarily_banned` (a ban lasts its full term whatever is sent), 400 (among them
 * `invalid_idempotency_key`), 401, 404, 405, 413, 422 `idempotency_key_reused`, 500, 507, `invalid_response`,
 * `aborted`, and a `timeout` caused by the budget running out.
 *
 * Retry n (0 for the first) waits `max(Retry-After, random × min(maxDelayMs, baseDelayMs × 2^n))` ms:
 * never sooner than `Retry-After` allows, and exponential backoff with full jitter on top of it (defaults
 * 500 ms base, 8 000 ms cap). When that wait would end at or after the end of the time budget, the call does
 * not sleep: it rejects at once with the last error — a `Retry-After` longer than the remaining budget
 * therefore fails fast instead of waiting or hammering. Each attempt gets `min(attemptTimeoutMs, what is left
 * of the budget)`; when the budget runs out during an attempt, the call rejects with `timeout`.
 *
 * **Cancellation.** Pass `{ signal }` to a call; see {@link PetstoreCallOptions}.
 *
 * @throws TypeError when `baseUrl` is not an absolute URL, `apiKey` is empty, or an option (or a `retry`
 *   setting) has a name this client does not know — a misspelt option never goes unnoticed
 * @throws RangeError when `attemptTimeoutMs` is not a finite number > 0, or on invalid retry settings
 */
export function createPetstoreClient(options: PetstoreClientOptions): PetstoreClient {
  const unknown = Object.keys(options).filter((name) => !OPTION_NAMES.has(name));
  if (unknown.length > 0) {
    throw new TypeError(`createPetstoreClient: unknown option(s) ${unknown.join(', ')}; the options are ${[...OPTION_NAMES].join(', ')}`);
  }
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
  const attemptTimeoutMs = options.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
  if (typeof attemptTimeoutMs !== 'number' || !Number.isFinite(attemptTimeoutMs) || attemptTimeoutMs <= 0) {
    throw new RangeError('attemptTimeoutMs must be a finite number > 0 (milliseconds)');
  }
  const sleep = options.sleep ?? sleepWithTimers;
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;
  let lastRateLimit: RateLimitInfo | undefined;

  const abortedError = (url: string, init: PetstoreFetchInit, signal: AbortSignal, attempts: number) =>
    new PetstoreClientError('aborted', `${init.method} ${url} was aborted`, { status: 0, attempts, cause: signal.reason });

  /**
   * One request, bounded by `limitMs`. `budgetBound`: the limit is what is left of the call's budget, so
   * running out of it ends the call.
   */
  async function attempt<T>(
    url: string,
    init: PetstoreFetchInit,
    accept: Accept<T>,
    attempts: number,
    callerSignal: AbortSignal | undefined,
    limitMs: number,
    budgetBound: boolean,
  ): Promise<AttemptOutcome<T>> {
    const timeoutMessage = budgetBound
      ? `${init.method} ${url} ran out of the call's ${retry.maxElapsedMs} ms budget`
      : `${init.method} ${url} timed out after ${limitMs} ms`;
    const deadline = attemptSignal(callerSignal, limitMs, timeoutMessage);
    const { signal } = deadline;
    // Whatever the fetch rejects with (undici's DOMException, node-fetch's AbortError, anything), the
    // signal's state tells an aborted or timed-out attempt from a network error.
    const failure = (cause: unknown): AttemptOutcome<T> => {
      if (callerSignal?.aborted) return { ok: false, error: abortedError(url, init, callerSignal, attempts), retry: 'never', retryAfterMs: undefined };
      if (deadline.timedOut) {
        const error = new PetstoreClientError('timeout', timeoutMessage, { status: 0, attempts, cause: signal.reason });
        // Like a network error after sending; but when the budget ran out, nothing is left to retry with.
        return { ok: false, error, retry: budgetBound ? 'never' : 'retry', retryAfterMs: undefined };
      }
      const message = `${init.method} ${url} failed: ${describeNetworkError(cause)}`;
      return { ok: false, error: new PetstoreClientError('network_error', message, { status: 0, attempts, cause }), retry: 'retry', retryAfterMs: undefined };
    };
    try {
      let response;
      try {
        response = await raceAbort(doFetch(url, { ...init, signal }), signal);
      } catch (cause) {
        return failure(cause);
      }
      lastRateLimit = readRateLimitInfo(response.headers) ?? lastRateLimit;
      const { status } = response;
      const retryAfter = parseRetryAfter(response.headers.get('retry-after'), now());
      let text: string;
      try {
        text = await raceAbort(response.text(), signal);
      } catch (cause) {
        return failure(cause); // the server answered: the request was executed or refused
      }
      const details = { status, attempts, retryAfterSeconds: retryAfter?.seconds };
      // 304 only answers a request that sent If-None-Match: the caller's `accept` returns what it kept.
      if ((status >= 200 && status < 300) || (status === 304 && init.headers['if-none-match'] !== undefined)) {
        const accepted = accept({ status, headers: response.headers, text });
        if (accepted.ok) return { ok: true, value: accepted.value };
        const message = `HTTP ${status} answer to ${init.method} ${url} ${accepted.problem}`;
        return { ok: false, error: new PetstoreClientError('invalid_response', message, { ...details, cause: accepted.cause }), retry: 'never', retryAfterMs: undefined };
      }
      const json = parseJson(text);
      const body = json.ok ? errorBodyOf(json.value) : undefined;
      const error = body
        ? new PetstoreClientError(body.code, body.message, details)
        : new PetstoreClientError('invalid_response', `HTTP ${status} answer to ${init.method} ${url} has no Error body`, {
            ...details,
            cause: json.ok ? undefined : json.cause,
          });
      return { ok: false, error, retry: retryClassOf(status, error.code), retryAfterMs: retryAfter?.delayMs };
    } finally {
      deadline.dispose();
    }
  }

  async function send<T>(url: string, init: PetstoreFetchInit, accept: Accept<T>, callOptions: PetstoreCallOptions | undefined): Promise<T> {
    const signal = callOptions?.signal ?? undefined;
    const startedAt = now();
    let budgetLeftMs = retry.maxElapsedMs;
    for (let attempts = 1; ; attempts++) {
      if (signal?.aborted) throw abortedError(url, init, signal, attempts - 1);
      const budgetBound = budgetLeftMs <= attemptTimeoutMs;
      const outcome = await attempt(url, init, accept, attempts, signal, budgetBound ? budgetLeftMs : attemptTimeoutMs, budgetBound);
      if (outcome.ok) return outcome.value;
      if (outcome.retry === 'never' || attempts >= retry.maxAttempts) throw outcome.error;
      const waitMs = Math.max(outcome.retryAfterMs ?? 0, backoffDelayMs(attempts - 1, retry, random));
      // A wait that ends when the budget does would leave no time for the attempt after it.
      if (waitMs >= retry.maxElapsedMs - (now() - startedAt)) throw outcome.error;
      try {
        await raceAbort(sleep(waitMs, signal), signal);
      } catch (cause) {
        if (signal?.aborted) throw abortedError(url, init, signal, attempts);
        throw cause;
      }
      budgetLeftMs = retry.maxElapsedMs - (now() - startedAt);
      if (budgetLeftMs <= 0) throw outcome.error; // the wait overran the budget (a late timer)
    }
  }

  const authorization = `Bearer ${apiKey}`;
  const origin = new URL(categoriesUrl).origin;
  // The last list answer of each URL, for If-None-Match (see LIST_CACHE).
  const listAnswers = new LRUCache<string, KeptList>({
    max: LIST_CACHE.max,
    maxSize: LIST_CACHE.maxSizeChars,
    sizeCalculation: (kept) => Math.max(1, kept.text.length),
  });

  /** One list request: sends the kept tag, and answers the kept list on 304. */
  async function listPage(url: string, callOptions: PetstoreCallOptions | undefined): Promise<ListPage> {
    const kept = listAnswers.get(url);
    const headers: Record<string, string> = { authorization, accept: 'application/json' };
    if (kept !== undefined) headers['if-none-match'] = kept.etag;
    return send(
      url,
      { method: 'GET', headers },
      (answer) => {
        const fresh = answer.status !== 304;
        const text = fresh ? answer.text : (kept as KeptList).text;
        const json = parseJson(text);
        if (!json.ok) return { ok: false, problem: 'is not the expected JSON', cause: json.cause };
        if (!Array.isArray(json.value) || !json.value.every(isCategory)) return { ok: false, problem: 'is not the expected JSON' };
        const next = fresh ? nextLink(answer.headers, url) : (kept as KeptList).next;
        if (next !== undefined && new URL(next).origin !== origin) return { ok: false, problem: `links its next page outside ${origin}` };
        const etag = answer.headers.get('etag');
        if (fresh && etag !== null) listAnswers.set(url, { etag, text, next });
        return { ok: true, value: { categories: json.value, next } };
      },
      callOptions,
    );
  }

  return {
    listCategories: async (callOptions) => (await listPage(pageUrl(categoriesUrl, callOptions?.limit, callOptions?.after), callOptions)).categories,
    listCategoryPages(pagesOptions) {
      return (async function* pages() {
        for (let url: string | undefined = pageUrl(categoriesUrl, pagesOptions?.limit ?? DEFAULT_PAGE_LIMIT, pagesOptions?.after); url !== undefined; ) {
          const page: ListPage = await listPage(url, pagesOptions);
          yield page.categories;
          url = page.next;
        }
      })();
    },
    createCategory: async (newCategory, callOptions) => {
      const given = callOptions?.idempotencyKey;
      // One key per call, made before the first attempt: every retry sends the same.
      const idempotencyKey = serializeIdempotencyKey(given === undefined ? newIdempotencyKey() : checkIdempotencyKey(given));
      return send(
        categoriesUrl,
        {
          method: 'POST',
          headers: { authorization, accept: 'application/json', 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
          body: JSON.stringify(newCategory),
        },
        (answer) => {
          const json = parseJson(answer.text);
          if (json.ok && isCategory(json.value)) return { ok: true, value: json.value };
          return { ok: false, problem: 'is not the expected JSON', cause: json.ok ? undefined : json.cause };
        },
        callOptions,
      );
    },
    get lastRateLimit() {
      return lastRateLimit;
    },
  };
}

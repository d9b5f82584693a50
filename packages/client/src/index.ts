/**
 * @petstore/client — a fetch-based client of the petstore categories API: typed errors, the last
 * `X-RateLimit-*` state, retries that honour `Retry-After` with exponential backoff and full jitter,
 * per-call cancellation (`signal`), per-attempt timeouts (`attemptTimeoutMs`), an `Idempotency-Key` on every create
 * so that creates are retried without creating twice, paging of the list, and `If-None-Match` revalidation of it.
 *
 * @packageDocumentation
 */
export {
  DEFAULT_ATTEMPT_TIMEOUT_MS,
  DEFAULT_PAGE_LIMIT,
  createPetstoreClient,
  type PetstoreCallOptions,
  type PetstoreClient,
  type PetstoreClientOptions,
  type PetstoreCreateOptions,
  type PetstoreListOptions,
  type PetstorePagesOptions,
} from './client.js';
export {
  PetstoreClientError,
  isPetstoreClientError,
  type PetstoreClientErrorCode,
  type PetstoreClientErrorDetails,
} from './errors.js';
export { DEFAULT_RETRY, backoffDelayMs, parseRetryAfter, type RetryOptions, type ResolvedRetryOptions } from './retry.js';
export { readRateLimitInfo, type RateLimitInfo } from './rate-limit-info.js';
export type { PetstoreFetch, PetstoreFetchHeaders, PetstoreFetchInit, PetstoreFetchResponse } from './fetch-types.js';
export type { Category, NewCategory, ErrorBody, ErrorCode } from './api-types.js';

/**
 * @petstore/core — the framework-free core of the petstore categories API: schemas, errors,
 * bearer auth, the rate-limit engine, storage contracts and the transport-neutral pipeline.
 *
 * @packageDocumentation
 */
// The public surface, listed name by name: what applications, adapter authors and store authors use. Anything
// else is internal and may change in any release. The installed-package tests list these names too, so an
// export added or dropped by accident shows in review.
export { ERROR_CODES, ERROR_STATUS, PetstoreError, errorBody, isPetstoreError, type ErrorBody, type ErrorCode } from './errors.js';
export { systemClock, type Clock } from './clock.js';
export {
  CATEGORY_DESCRIPTION_MAX_CODE_POINTS,
  CATEGORY_DESCRIPTION_MAX_LENGTH,
  CATEGORY_NAME_MAX_CODE_POINTS,
  CATEGORY_NAME_MAX_LENGTH,
  CategorySchema,
  ErrorBodySchema,
  NewCategorySchema,
  parseNewCategory,
  type Category,
  type NewCategory,
  type NewCategoryParseResult,
} from './schemas.js';
export { PLAN_NAMES, isPlanName, type PlanLimits, type PlanName, type Principal } from './auth/principal.js';
export {
  API_KEY_HASH_BYTES,
  apiKeyHashesEqual,
  hashApiKey,
  staticApiKeys,
  type ApiKeyStore,
  type FindPrincipalContext,
  type StaticApiKey,
} from './auth/api-key.js';
export { DEFAULT_MANAGED_KEY_PREFIX, isWellFormedManagedKey, managedKeyPattern } from './auth/managed-key-format.js';
export {
  DEFAULT_MANAGED_KEYS_CACHE,
  DEFAULT_ROTATION_GRACE_MS,
  managedApiKeys,
  type ApiKeyInfo,
  type ApiKeyStatus,
  type IssueApiKeyOptions,
  type IssuedApiKey,
  type ListApiKeysOptions,
  type ManagedApiKeys,
  type ManagedApiKeysOptions,
  type RotateApiKeyOptions,
  type UpdateApiKeyOptions,
} from './auth/managed-api-keys.js';
export type { ApiKeyRecord, ApiKeyRecordChange, ApiKeyRecordStore, ApiKeyRecordWatcher } from './auth/api-key-records.js';
export { MAX_API_KEY_LENGTH } from './auth/bearer.js';
export {
  MAX_LIMIT_TIMES_WINDOW_MS,
  RATE_LIMIT_ALGORITHMS,
  type BanPolicy,
  type ConsumeRequest,
  type ConsumeResult,
  type RateLimitAlgorithm,
  type RateLimitSnapshot,
  type RateLimitStore,
  type RateLimitWindow,
  type WindowUsage,
} from './rate-limit/types.js';
export {
  decideConsume,
  peekState,
  windowStartMs,
  type BanState,
  type ConsumeDecision,
  type RateLimitState,
  type WindowCounter,
} from './rate-limit/decide.js';
export { windowUsage } from './rate-limit/window-algorithms.js';
export { DAY_MS, DEFAULT_ANONYMOUS_LIMITS, DEFAULT_BAN_POLICY, DEFAULT_PLAN_LIMITS, MINUTE_MS, type PlanPolicy } from './rate-limit/plans.js';
export { rateLimitHeaders, retryAfterSeconds, standardRateLimitHeaders } from './rate-limit/headers.js';
export { DEFAULT_IPV6_SUBNET, UNKNOWN_CLIENT_ADDRESS } from './rate-limit/client-address.js';
export {
  DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS,
  createRateLimiter,
  type ConsumeOptions,
  type RateLimitDecision,
  type RateLimitOwner,
  type RateLimitPeek,
  type RateLimitSubject,
  type RateLimiter,
  type RateLimiterOptions,
  type StoreFailurePolicy,
} from './rate-limit/engine.js';
export type { CategoryPage, CategoryStore, IdempotentCreateRequest, IdempotentCreateResult } from './storage/category-store.js';
export type { BodyReadResult, PetstoreHeaders, PetstoreRequest, PetstoreRequestBody, PetstoreResponse } from './http/types.js';
export { DEFAULT_BODY_LIMIT_BYTES } from './http/body.js';
export { DEFAULT_CATEGORY_PAGE_LIMIT, MAX_CATEGORY_PAGE_LIMIT } from './http/category-list.js';
export { DEFAULT_IDEMPOTENCY_RETENTION_MS, MAX_IDEMPOTENCY_KEY_LENGTH } from './http/idempotency.js';
export type { HostOperationId, OperationId, Stability } from './http/operations.js';
export { DEFAULT_DEPRECATIONS, type DeprecationPolicy } from './http/deprecation.js';
export type { PetstoreEvent, PetstoreEventType, PetstoreLogger } from './http/events.js';
export {
  PETSTORE_REQUEST_CHANNEL,
  PETSTORE_STORE_CHANNEL,
  PETSTORE_API_KEY_WATCH_CHANNEL,
  type ApiKeyRefusalReason,
  type ApiKeyWatchState,
  type PetstoreApiKeyWatchMessage,
  type AuthFailureReason,
  type PetstoreRequestContext,
  type PetstoreStoreContext,
  type RateLimitOutcome,
  type StoreBackend,
  type StoreOperation,
} from './diagnostics.js';
export type { PetstoreWarning, PetstoreWarningCode } from './http/warnings.js';
export {
  API_DESCRIPTION_VERSION,
  OPENAPI_VERSION,
  buildOpenApiDocument,
  type OpenApiDocument,
  type OpenApiOperationInfo,
  type OpenApiOptions,
  type OpenApiRateLimitPolicy,
  type OpenApiRateLimits,
} from './openapi/document.js';
export { mergeOpenApiDocument, type MergeOpenApiOptions } from './openapi/merge.js';
export { DOCS_CONTENT_SECURITY_POLICY, DOCS_RENDERER_PACKAGE, type DocsOptions } from './http/docs.js';
export { createPetstore, type FetchInfo, type Petstore } from './http/pipeline.js';
export type { AnonymousRequest, CostName, PetstoreOptions, PetstoreRateLimitOptions } from './http/petstore-options.js';
export type { GuardOptions, GuardRequest, GuardResult, PetstoreRateLimitSubject, PetstoreRateLimits } from './http/admission.js';
export type { HostOperationContext, HostOperationHandler, HostOperationResult } from './http/host-operations.js';

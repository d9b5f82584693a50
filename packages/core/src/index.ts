/**
 * @petstore/core — the framework-free core of the petstore categories API: schemas, errors,
 * bearer auth, the rate-limit engine, storage contracts and the transport-neutral pipeline.
 *
 * @packageDocumentation
 */
export * from './errors.js';
export * from './clock.js';
export * from './schemas.js';
export * from './auth/principal.js';
export * from './auth/api-key.js';
export * from './auth/bearer.js';
export * from './rate-limit/types.js';
export * from './rate-limit/fixed-window.js';
export * from './rate-limit/plans.js';
export * from './rate-limit/headers.js';
export * from './rate-limit/client-address.js';
export {
  DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS,
  createRateLimiter,
  type RateLimitDecision,
  type RateLimitSubject,
  type RateLimiter,
  type RateLimiterOptions,
  type StoreFailurePolicy,
} from './rate-limit/engine.js';
export * from './storage/category-store.js';
export * from './http/types.js';
export { DEFAULT_BODY_LIMIT_BYTES, assertJsonContentType, headerValue, readJsonBody } from './http/body.js';
export {
  OPERATIONS,
  matchRoute,
  type HostOperationId,
  type OperationDefinition,
  type OperationId,
  type RouteMatch,
  type Stability,
} from './http/operations.js';
export * from './http/deprecation.js';
export * from './http/events.js';
export * from './openapi/document.js';
export {
  createPetstore,
  type GuardRequest,
  type GuardResult,
  type HostOperationContext,
  type HostOperationHandler,
  type HostOperationResult,
  type Petstore,
  type PetstoreOptions,
  type FetchInfo,
} from './http/pipeline.js';
export { readWebStream } from './http/fetch.js';

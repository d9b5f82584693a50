/**
 * What the core publishes on `node:diagnostics_channel`: two `TracingChannel`s, one per request and one per
 * store call. Nothing is built or published while a channel has no subscriber (each call site checks
 * `hasSubscribers` first). `@petstore/opentelemetry` turns them into OpenTelemetry metrics and spans; any other
 * subscriber may read them too.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/observability.md#channels
 * @see https://nodejs.org/api/diagnostics_channel.html#class-tracingchannel
 */
import { channel, tracingChannel, type Channel, type TracingChannel } from 'node:diagnostics_channel';
import type { PlanName } from './auth/principal.js';
import type { OperationId } from './http/operations.js';
import type { PetstoreResponse } from './http/types.js';
import type { CategoryStore } from './storage/category-store.js';

/**
 * The name of the request `TracingChannel`: its channels are `tracing:petstore:request:start`, `…:end`,
 * `…:asyncStart`, `…:asyncEnd` and `…:error`, with a {@link PetstoreRequestContext} as the message. Published
 * once per request answered by `petstore.handle` (so by every adapter, `petstore.fetch` and
 * `petstoreNodeHandler`); not by `petstore.guard`.
 */
export const PETSTORE_REQUEST_CHANNEL = 'petstore:request';

/**
 * The name of the store-call `TracingChannel` (`tracing:petstore:store:start` … `:error`), with a
 * {@link PetstoreStoreContext} as the message: one trace per call the core makes to a rate-limit, category or
 * API-key store (`petstore.rateLimits` and `createRateLimiter` included).
 */
export const PETSTORE_STORE_CHANNEL = 'petstore:store';

/** How the rate limit decided a request: charged and let through, over a limit (429 `rate_limited`), or banned (429 `temporarily_banned`). */
export type RateLimitOutcome = 'admitted' | 'limited' | 'banned';

/**
 * Why a key store refused a well-formed key it knows: `revoked` (revoked by the operator) or `expired` (past
 * its expiry, or the key replaced by a rotation past its grace period). See `ApiKeyStore.refusalReason`.
 */
export type ApiKeyRefusalReason = 'revoked' | 'expired';

/**
 * Why a request was answered 401: no `Authorization` header (`missing`); a header that is not a well-formed
 * `Bearer` credential (`malformed`); a key no store knows (`unknown`); or a known key the store refuses
 * ({@link ApiKeyRefusalReason}).
 */
export type AuthFailureReason = 'missing' | 'malformed' | 'unknown' | ApiKeyRefusalReason;

/**
 * The message of the request channel: one object per request, the same in every event of that request. The
 * fields the core knows when it starts are set then; the others are filled in as the request goes through the
 * pipeline, and all are final by `asyncStart` (the answer is ready). `end` is published as soon as the
 * pipeline's synchronous part returns, before most fields are known: read them at `asyncStart` or `asyncEnd`.
 *
 * Never holds an API key: the caller is named by `keyId` and `accountId`.
 */
export interface PetstoreRequestContext {
  /** The request method as received (e.g. `GET`; not normalised). */
  readonly method: string;
  /** The operation the method and path matched; `undefined` when none did (404, 405). */
  readonly operationId: OperationId | undefined;
  /**
   * The operation's route template under the path the API is mounted at (`PetstoreRequest.mountPath`, else the
   * `prefix`), e.g. `/v1/categories`, `/api/petstore/pets/{petId}` — never the request's URL; for the reference page
   * (`docs` option) `/v1/docs`, and `/v1/docs/{file}` for every path below it; `undefined` when no operation matched.
   */
  readonly route: string | undefined;
  /** The answer's HTTP status code; set before `asyncStart`. */
  status?: number;
  /** The `keyId` of the caller's API key, once authenticated; absent without a valid key. */
  keyId?: string;
  /** The account of the caller's API key, once authenticated. */
  accountId?: string;
  /** The plan of the caller's API key, once authenticated. */
  plan?: PlanName;
  /** The rate limit's decision; absent when it did not decide (its store failed, or an earlier failure). */
  rateLimitOutcome?: RateLimitOutcome;
  /** Units the request was charged or refused for (`rateLimit.cost`); set with `rateLimitOutcome`. */
  cost?: number;
  /** Why the request was answered 401; set only then. */
  authFailure?: AuthFailureReason;
  /**
   * The error the pipeline caught and answered, when it did: the cause of a 5xx answer (a failing store, a
   * throwing host handler) or a `PetstoreError` thrown for a 4xx (a body that fails validation, say). Refusals
   * answered without an error (401, 429, 404 …) leave it unset. The pipeline answers every error, so the
   * channel's `error` event is not published for requests: read `status` and this field instead.
   */
  error?: unknown;
  /** The answer (set by `TracingChannel.tracePromise` at `asyncStart`). */
  result?: PetstoreResponse;
}

/**
 * The storage system a store runs on, in OpenTelemetry's `db.system.name` terms: `redis`, `postgresql`;
 * `memory` for a store in process memory; `custom` for a store that does not say (no `backend` property). A
 * store may declare any other value through its `backend` property.
 * @see https://opentelemetry.io/docs/specs/semconv/registry/attributes/db/#db-system-name
 */
export type StoreBackend = 'memory' | 'redis' | 'postgresql' | 'custom' | (string & {});

/**
 * The store call: `RateLimitStore.consume` / `peek` / `reset`; `CategoryStore.list` / `listVersion`
 * (`list_version`) / `create` / `createIdempotent` (`create_idempotent`); `ApiKeyStore.findPrincipal` (`find_key`,
 * the key lookup of a request) and `findByKeyId` (`find_key_by_id`, for `petstore.rateLimits`).
 */
export type StoreOperation =
  | 'consume'
  | 'peek'
  | 'reset'
  | 'list'
  | 'list_version'
  | 'create'
  | 'create_idempotent'
  | 'find_key'
  | 'find_key_by_id';

/** The message of the store channel: one object per store call. */
export interface PetstoreStoreContext {
  /** The store's `backend` property, or `custom` when it has none. */
  readonly backend: StoreBackend;
  /** Which call. */
  readonly operation: StoreOperation;
  /** `ok` when the call resolved, `error` when it rejected or threw; set before `asyncStart` (or `error`). */
  outcome?: 'ok' | 'error';
  /** What the call rejected with (set by `TracingChannel.tracePromise`, with the `error` event). */
  error?: unknown;
  /** What the call resolved to (set by `TracingChannel.tracePromise` at `asyncStart`). */
  result?: unknown;
}

/** A `TracingChannel` with `hasSubscribers` (Node ≥ 20.13; missing from @types/node 20). */
type Traced<Context extends object> = TracingChannel<unknown, Context> & { readonly hasSubscribers: boolean };

/** The request channel. Internal: subscribers find it by {@link PETSTORE_REQUEST_CHANNEL}. */
export const requestChannel = tracingChannel<unknown, PetstoreRequestContext>(PETSTORE_REQUEST_CHANNEL) as Traced<PetstoreRequestContext>;

/** The store channel. Internal: subscribers find it by {@link PETSTORE_STORE_CHANNEL}. */
export const storeChannel = tracingChannel<unknown, PetstoreStoreContext>(PETSTORE_STORE_CHANNEL) as Traced<PetstoreStoreContext>;

/**
 * Runs one store call, traced on the store channel while it has subscribers; without one, it only calls (no context
 * is built). Every store call of the core goes through here.
 */
export function traceStoreCall<Result>(backend: string | undefined, operation: StoreOperation, call: () => Promise<Result>): Promise<Result> {
  if (!storeChannel.hasSubscribers) return call();
  const context: PetstoreStoreContext = { backend: backend ?? 'custom', operation };
  return storeChannel.tracePromise(async () => {
    try {
      // Awaited, so a store that throws instead of rejecting is traced alike.
      const result = await call();
      context.outcome = 'ok';
      return result;
    } catch (error) {
      context.outcome = 'error';
      throw error;
    }
  }, context);
}

/**
 * The category store as the core calls it: each call traced on the store channel while it has subscribers,
 * passed straight through otherwise (same arguments, same answer: the same frozen array from `list`). Every
 * method of the contract the core calls must be here (an optional one only when the store has it).
 */
export function tracedCategoryStore(store: CategoryStore): CategoryStore {
  const { backend } = store;
  type Args<Name extends Exclude<keyof CategoryStore, 'backend'>> = Parameters<NonNullable<CategoryStore[Name]>>;
  const listVersion = store.listVersion?.bind(store);
  return {
    list: (...args: Args<'list'>) => traceStoreCall(backend, 'list', () => store.list(...args)),
    // Only where the store has one: without it, the list's ETag is a hash of the body (see CategoryStore).
    ...(listVersion === undefined ? {} : { listVersion: () => traceStoreCall(backend, 'list_version', listVersion) }),
    create: (...args: Args<'create'>) => traceStoreCall(backend, 'create', () => store.create(...args)),
    createIdempotent: (...args: Args<'createIdempotent'>) =>
      traceStoreCall(backend, 'create_idempotent', () => store.createIdempotent(...args)),
  };
}

/**
 * The name of the channel on which `managedApiKeys` publishes each change of its {@link ApiKeyWatchState}, with a
 * {@link PetstoreApiKeyWatchMessage} as the message (a plain channel: one message per change, none while it has
 * no subscriber). The library logs nothing itself: subscribe to log a lost watch or to export it as a metric.
 */
export const PETSTORE_API_KEY_WATCH_CHANNEL = 'petstore:api-key-watch';

/**
 * Whether managed API keys hear their store's changes (`ManagedApiKeys.watchState`):
 * - `connecting`: the first `watch()` of the store is under way;
 * - `watching`: changes are heard, and cached keys are trusted until their TTL;
 * - `disconnected`: the watch failed to start (it is tried again) or the store reported it broken
 *   (`onDisconnect`): a cached key is not trusted to be valid, every accepted key is checked at the store,
 *   until the watch is back (`onReconnect`, or a retry that starts it);
 * - `unwatched`: the store has no `watch`, or the manager was closed: cached keys are trusted for their TTL.
 * In `connecting` as in `disconnected`, accepted keys are checked at the store.
 */
export type ApiKeyWatchState = 'connecting' | 'watching' | 'disconnected' | 'unwatched';

/** The message of the {@link PETSTORE_API_KEY_WATCH_CHANNEL} channel: one change of a manager's watch state. */
export interface PetstoreApiKeyWatchMessage {
  /** The record store's `backend` (`custom` when it has none). */
  readonly backend: StoreBackend;
  /** The state now. */
  readonly state: ApiKeyWatchState;
  /** The state before this change. */
  readonly previousState: ApiKeyWatchState;
  /** With `disconnected`: why (the store's `onDisconnect` error, or the failure of `watch()`), without secrets. */
  readonly error?: Error;
}

/** The watch-state channel. Internal: subscribers find it by {@link PETSTORE_API_KEY_WATCH_CHANNEL}. */
export const apiKeyWatchChannel = channel(PETSTORE_API_KEY_WATCH_CHANNEL) as Channel<PetstoreApiKeyWatchMessage>;

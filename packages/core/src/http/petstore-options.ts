/**
 * The options of `createPetstore`, resolved once: checked (one TypeError at creation for any wrong option),
 * defaults filled in, the deprecations merged with their default and warned about, the OpenAPI description
 * built. The parts of the pipeline are made from the result; nothing here runs per request.
 */
import type { ApiKeyStore } from '../auth/api-key.js';
import { systemClock, type Clock } from '../clock.js';
import { buildOpenApiDocument, type OpenApiDocument, type OpenApiOptions, type OpenApiRateLimits } from '../openapi/document.js';
import { tracedCategoryStore } from '../diagnostics.js';
import { COST_NAMES, PetstoreOptionsSchema, assertOptions } from '../options.js';
import { PLAN_NAMES, type PlanLimits } from '../auth/principal.js';
import { DEFAULT_ANONYMOUS_LIMITS, DEFAULT_PLAN_LIMITS, type PlanPolicy } from '../rate-limit/plans.js';
import type { RateLimitAlgorithm } from '../rate-limit/types.js';
import type { RateLimiterOptions } from '../rate-limit/engine.js';
import type { CategoryStore } from '../storage/category-store.js';
import { DEFAULT_BODY_LIMIT_BYTES } from './body.js';
import { DEFAULT_DEPRECATIONS, type DeprecationPolicy } from './deprecation.js';
import { createDocsPages, type DocsOptions, type DocsPages } from './docs.js';
import type { PetstoreEvent } from './events.js';
import type { HostOperationHandler } from './host-operations.js';
import { DEFAULT_IDEMPOTENCY_RETENTION_MS } from './idempotency.js';
import type { HostOperationId, OperationId, Stability } from './operations.js';
import { DEFAULT_PREFIX } from './prefix.js';
import type { PetstoreHeaders } from './types.js';
import { warningsOnce, type PetstoreWarning } from './warnings.js';

/** What {@link PetstoreRateLimitOptions.anonymousKey} sees of a request. */
export interface AnonymousRequest {
  method: string;
  /** The path below the prefix, with the query string. */
  path: string;
  /** Header values by lowercase name. */
  headers: PetstoreHeaders;
  /** The client's IP address as the framework reports it, if any. */
  clientAddress?: string | undefined;
}

/** What `rateLimit.cost` prices: each operation, and `guard` (the host's own routes behind `petstore.guard`). */
export type CostName = OperationId | 'guard';

/**
 * `rateLimit` of {@link PetstoreOptions}: the engine's options (its clock is the petstore's), plus `anonymousKey`
 * and `cost`.
 */
export interface PetstoreRateLimitOptions extends Omit<RateLimiterOptions, 'clock'> {
  /**
   * Units each operation charges to every window of its caller, a whole number ≥ 1 each; default 1. Names:
   * `listCategories`, `createCategory`, `getOpenApiDocument`, `getPetById`, `listStoreOrders`, and `guard` for
   * the host's routes behind `petstore.guard` (a call may override it: `guard(request, { cost })`). Requests that
   * match no operation (404, 405) cost 1. The limits, `X-RateLimit-*` and the standard headers count units; the
   * OpenAPI description states each operation's cost (`x-rate-limit-cost`). Checked at creation: a cost above the
   * smallest limit of a plan or of the anonymous policy (a request that could never be admitted) is refused;
   * per-key custom `limits` below a cost answer 429 to that operation.
   * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#costs
   */
  cost?: Partial<Record<CostName, number>>;
  /**
   * Who a caller without a valid API key is, for the anonymous limits: a function of the request answering
   * a string (a client address your infrastructure vouches for, a session id …) or `undefined`. Default:
   * the client address the framework reports (`request.clientAddress`), IPv6 grouped by `ipv6Subnet`. An
   * `undefined` answer, like a missing or unparseable address, puts the caller in one shared `unknown`
   * counter and is warned about once (`PETSTORE_NO_CLIENT_ADDRESS`). While some caller is refused by the
   * anonymous limits, it is also called for requests that present a key, to tell whether their caller is the
   * refused one (its keys are then looked up in memory only; see docs/keys.md, "Under attack").
   * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#anonymous-callers
   */
  anonymousKey?: (request: AnonymousRequest) => string | undefined;
}

/** Options of `createPetstore`. */
export interface PetstoreOptions {
  /**
   * Resolves API keys to principals: one store, or several asked in order (e.g. `[managedApiKeys({ store }),
   * staticApiKeys(demoKeys)]`). For a presented key, each store whose `acceptsKey` is absent or answers true is
   * asked in turn; the first principal wins, and a key no store accepts is refused without being hashed.
   * `petstore.rateLimits` finds a `keyId` the same way, through the stores' `findByKeyId`.
   * @see https://github.com/petstore/petstore-categories/blob/main/docs/keys.md
   */
  apiKeys: ApiKeyStore | readonly ApiKeyStore[];
  /** Where categories live. */
  categories: CategoryStore;
  /**
   * Rate limiting: the store(s), and optionally the algorithm, plans (each with its own algorithm), anonymous limits,
   * bans, failure policy. The OpenAPI description states each plan's limits and algorithm (`x-rate-limits`).
   */
  rateLimit: PetstoreRateLimitOptions;
  /** Handlers of the host's operations (`getPetById`, `listStoreOrders`). Missing ones answer 501. */
  handlers?: Partial<Record<HostOperationId, HostOperationHandler>>;
  /**
   * Deprecated operations. Default {@link DEFAULT_DEPRECATIONS}: `getPetById` deprecated, with no sunset (it
   * keeps working; a sunset date and the 410 after it happen only when configured). Entries replace the
   * default per operation; `null` removes one.
   */
  deprecations?: Partial<Record<OperationId, DeprecationPolicy | null>>;
  /** Stability markers per operation, e.g. `{ listStoreOrders: 'beta' }`. Default: none. */
  stability?: Partial<Record<OperationId, Stability>>;
  /** The OpenAPI description's servers, title and description. */
  openapi?: OpenApiOptions;
  /** Source of time, Unix epoch ms. Default: the system clock. */
  clock?: Clock;
  /** Largest accepted request body in bytes; larger bodies get 413. Default 1 MiB (1,048,576). */
  bodyLimitBytes?: number;
  /**
   * Creates sent with an `Idempotency-Key` header: the category store keeps each key's record (the request's
   * fingerprint and the category it created) for `retentionMs` milliseconds; a repeat within that time replays
   * the first answer. Default `{ retentionMs: 86_400_000 }` (24 h); at least 1,000.
   * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#idempotency-key
   */
  idempotency?: { retentionMs?: number };
  /** The realm of the `WWW-Authenticate` challenge on 401 answers. Default `petstore`. */
  realm?: string;
  /**
   * Where the API is mounted, for the Fetch entry (`petstore.fetch`) and `petstoreNodeHandler`: `''` or a path
   * starting with `/` and not ending with `/`. Default `/v1`. The adapters take theirs from the framework
   * (their own `prefix` option).
   */
  prefix?: string;
  /**
   * The API reference page: `true` (or {@link DocsOptions}) serves Swagger UI at `{prefix}/docs`, built from the
   * OpenAPI description, with its scripts and styles read at creation from the `swagger-ui-dist` package (an
   * optional peer dependency: install it) and served by the API itself. Public like the description and rate
   * limited like it: each of the page's requests is charged `rateLimit.cost.getOpenApiDocument`. Default
   * `false` (no page; `{prefix}/docs` answers 404).
   * @throws TypeError at creation when `swagger-ui-dist` is not installed, naming it.
   * @see https://github.com/petstore/petstore-categories/blob/main/docs/reference-page.md
   */
  docs?: boolean | DocsOptions;
  /** Called with every event: unauthorized, rate_limited, banned, internal_error (see `PetstoreEvent`). */
  onEvent?: (event: PetstoreEvent) => void;
  /**
   * Called with every unexpected error behind a 500 answer (a store that throws, say), and with every
   * rate-limit store failure (unless `rateLimit.onStoreError` is set). Default: logs it with `console.error`.
   * Never receives API keys.
   */
  onInternalError?: (error: unknown) => void;
  /**
   * Receives each setup warning once: `PETSTORE_NO_CLIENT_ADDRESS` (callers without a key and without a usable
   * client address share one counter: set your framework's trust-proxy setting, or `rateLimit.anonymousKey`)
   * and `PETSTORE_DEPRECATED_WITHOUT_SUNSET` (at creation, for a deprecated operation with a handler and no
   * sunset date). Default: the request's logger when it has one (Fastify's `request.log`), else
   * `console.warn`.
   */
  onWarning?: (warning: PetstoreWarning) => void;
}

/** The options with every default filled in: what the parts of the pipeline are made from. */
export interface ResolvedOptions {
  /** The API-key stores, in the order they are asked (one or more). */
  apiKeys: readonly ApiKeyStore[];
  categories: CategoryStore;
  rateLimit: PetstoreRateLimitOptions;
  /** Units per operation and for the guard, every name present (default 1). */
  costs: Readonly<Record<CostName, number>>;
  handlers: Partial<Record<HostOperationId, HostOperationHandler>>;
  /** The configured deprecations over the default ones, without the removed (`null`) entries. */
  deprecations: Partial<Record<OperationId, DeprecationPolicy>>;
  stability: Partial<Record<OperationId, Stability>>;
  openapi: OpenApiDocument;
  /** The reference page (option `docs`), or `undefined` when it is off. */
  docs: DocsPages | undefined;
  /** `openapi` as JSON text, written once. */
  openapiJson: string;
  /** True when the options name the description's servers; else its one server is where the API is mounted. */
  serversConfigured: boolean;
  clock: Clock;
  bodyLimitBytes: number;
  /** How long an idempotent create's record is kept, ms. */
  retentionMs: number;
  realm: string;
  prefix: string;
  onEvent: ((event: PetstoreEvent) => void) | undefined;
  /** The host's `onInternalError` (or the default), made safe: a reporter that throws is ignored. */
  onInternalError: (error: unknown) => void;
  /** Gives each setup warning once (see {@link warningsOnce}). */
  warn: ReturnType<typeof warningsOnce>;
}

/** Each plan's limits and algorithm, and the anonymous policy's, as the engine resolves them, for the OpenAPI description. */
function describedRateLimits(rateLimit: PetstoreRateLimitOptions): OpenApiRateLimits {
  const algorithmOf = (policy: PlanPolicy): RateLimitAlgorithm => policy.algorithm ?? rateLimit.algorithm ?? 'fixed';
  const described = (policy: PlanPolicy) => ({ requestsPerMinute: policy.requestsPerMinute, requestsPerDay: policy.requestsPerDay, algorithm: algorithmOf(policy) });
  const plans = { ...DEFAULT_PLAN_LIMITS, ...rateLimit.plans };
  return {
    plans: Object.fromEntries(PLAN_NAMES.map((plan) => [plan, described(plans[plan])])) as OpenApiRateLimits['plans'],
    anonymous: described(rateLimit.anonymous ?? DEFAULT_ANONYMOUS_LIMITS),
  };
}

/**
 * Checks the options and fills in the defaults.
 * @throws TypeError naming the option and what it accepts, for any wrong or unknown option.
 */
export function resolveOptions(options: PetstoreOptions): ResolvedOptions {
  assertOptions(PetstoreOptionsSchema, options, 'createPetstore');
  // Every check before the first warning: a petstore that is refused warns about nothing.
  const costs = resolveCosts(options.rateLimit);
  const warn = warningsOnce(options.onWarning);
  const handlers = options.handlers ?? {};
  const deprecations: Partial<Record<OperationId, DeprecationPolicy>> = {};
  for (const [operationId, policy] of Object.entries({ ...DEFAULT_DEPRECATIONS, ...options.deprecations })) {
    if (policy === null || policy === undefined) continue;
    deprecations[operationId as OperationId] = policy;
    if (policy.sunsetAtMs === undefined && handlers[operationId as HostOperationId] !== undefined) {
      warn({
        code: 'PETSTORE_DEPRECATED_WITHOUT_SUNSET',
        message: `${operationId} is deprecated (answers carry a Deprecation header) and has no sunset date, so it keeps working. Set deprecations.${operationId}.sunsetAtMs to announce one.`,
      });
    }
  }
  const stability = { ...options.stability };
  const openapi = buildOpenApiDocument(options.openapi ?? {}, {
    deprecations,
    stability,
    costs,
    mountPath: options.prefix ?? DEFAULT_PREFIX,
    rateLimits: describedRateLimits(options.rateLimit),
  });
  const docs =
    options.docs === undefined || options.docs === false ? undefined : createDocsPages(options.docs, openapi['info'] as { title: string });
  const report = options.onInternalError ?? ((error: unknown) => console.error('[petstore] internal error:', error));
  return {
    apiKeys: Array.isArray(options.apiKeys) ? Object.freeze([...(options.apiKeys as readonly ApiKeyStore[])]) : [options.apiKeys as ApiKeyStore],
    // Every call the core makes to the category store goes through this wrapper (the petstore:store channel).
    categories: tracedCategoryStore(options.categories),
    rateLimit: options.rateLimit,
    costs,
    handlers,
    deprecations,
    stability,
    openapi,
    docs,
    openapiJson: JSON.stringify(openapi),
    serversConfigured: options.openapi?.servers?.production !== undefined || options.openapi?.servers?.staging !== undefined,
    clock: options.clock ?? systemClock,
    bodyLimitBytes: options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES,
    retentionMs: options.idempotency?.retentionMs ?? DEFAULT_IDEMPOTENCY_RETENTION_MS,
    realm: options.realm ?? 'petstore',
    prefix: options.prefix ?? DEFAULT_PREFIX,
    onEvent: options.onEvent,
    onInternalError: (error) => {
      try {
        report(error);
      } catch {
        // a failing reporter must not turn an answer into a thrown error
      }
    },
    warn,
  };
}

/**
 * Every cost, defaults filled in, checked against the limits: a cost above the smallest (non-zero) limit of a
 * plan or of the anonymous policy names an operation that plan could never be admitted to.
 * @throws TypeError naming the cost and the limit it exceeds.
 */
function resolveCosts(rateLimit: PetstoreRateLimitOptions): Readonly<Record<CostName, number>> {
  const costs = Object.fromEntries(COST_NAMES.map((name) => [name, rateLimit.cost?.[name] ?? 1])) as Record<CostName, number>;
  const policies: Array<[string, PlanLimits]> = [
    ...Object.entries({ ...DEFAULT_PLAN_LIMITS, ...rateLimit.plans }).map(([plan, limits]) => [`rateLimit.plans.${plan}`, limits] as [string, PlanLimits]),
    ['rateLimit.anonymous', rateLimit.anonymous ?? DEFAULT_ANONYMOUS_LIMITS],
  ];
  for (const [name, cost] of Object.entries(rateLimit.cost ?? {})) {
    for (const [where, limits] of policies) {
      for (const field of ['requestsPerMinute', 'requestsPerDay'] as const) {
        const limit = limits[field];
        if (limit > 0 && (cost as number) > limit) {
          throw new TypeError(
            `createPetstore: rateLimit.cost.${name} is ${String(cost)}, more than ${where}.${field} (${limit}): such a request could never be admitted`,
          );
        }
      }
    }
  }
  return Object.freeze(costs);
}

/**
 * The one transport-neutral entry of the API: a {@link PetstoreRequest} in, a {@link PetstoreResponse} out.
 *
 * Order of the steps, for every request below the prefix (each in the file named):
 * 1. authentication: the bearer API key is resolved to a principal, or not (admission.ts);
 * 2. rate limiting, after authentication: the operation's cost (`rateLimit.cost`; 1 for a path or method that
 *    matches no operation) charged to the key's account, or to the caller without a valid key (its client
 *    address or `rateLimit.anonymousKey`); over the limit → 429 (`rate_limited` / `temporarily_banned`) with
 *    `Retry-After` (admission.ts);
 * 3. header fields dropped by the server (`headersIncomplete`) → 431; no valid key → 401 with
 *    `WWW-Authenticate` (nothing is created), except for public operations (`GET /openapi.json`)
 *    (admission.ts);
 * 4. an `Expect` other than `100-continue` → 417 (RFC 9110 §10.1.1) (here);
 * 5. routing: unknown path → 404, known path with another method → 405 with `Allow` (here, operations.ts);
 * 6. deprecation headers; past the sunset → 410 (here, deprecation.ts);
 * 7. for createCategory: `Idempotency-Key` → 400, the same key in flight → 409, content type → 400,
 *    transfer/content coding → 415, body size → 413, JSON → 400, NewCategory validation → 400
 *    (category-operations.ts); for host operations: path parameters → 400, no handler → 501
 *    (host-operations.ts);
 * 8. the operation itself (category-operations.ts, host-operations.ts; `GET /openapi.json` here). For
 *    listCategories the store's list version is asked for once step 1 has found a valid key, beside the step 2
 *    charge rather than after it (one round trip less); a request refused later wastes that read.
 * The reference page (`docs` option: `/docs` and below) takes steps 1–3 as a public operation, then is answered
 * (docs.ts).
 * Every answer carries the `X-RateLimit-*` headers once step 2 has run; every error answer has the Error
 * body and nothing more (answers.ts). Steps 1–3 are also offered alone, as {@link Petstore.guard}, for the
 * host's own routes. The options are resolved once, at creation (petstore-options.ts).
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#order-of-checks
 */
import { LRUCache } from 'lru-cache';
import type { Principal } from '../auth/principal.js';
import { requestChannel, type PetstoreRequestContext } from '../diagnostics.js';
import { isPetstoreError } from '../errors.js';
import { mountedServer, type OpenApiDocument } from '../openapi/document.js';
import { createAdmission, type GuardOptions, type GuardRequest, type GuardResult, type PetstoreRateLimits } from './admission.js';
import { errorAnswer, failureAnswers, safeMethod, textAnswer } from './answers.js';
import { createCategoryOperations, type ListStart } from './category-operations.js';
import { deprecationHeaders, isGone } from './deprecation.js';
import { handleFetch } from './fetch.js';
import { createHostOperations } from './host-operations.js';
import { OPERATIONS, matchRoute, pathnameOf, type OperationDefinition, type OperationId } from './operations.js';
import { resolveOptions, type PetstoreOptions } from './petstore-options.js';
import type { PetstoreRequest, PetstoreResponse } from './types.js';

/** What a Fetch-based server knows about a request beyond the `Request` itself. */
export interface FetchInfo {
  /** The client's IP address, for the anonymous rate limit. */
  clientAddress?: string | undefined;
  /** `true` when the server dropped header fields past its limit; the answer is then 431. */
  headersIncomplete?: boolean | undefined;
}

/** A mounted petstore API: the transport-neutral entry, the Fetch-API entry, and the guard. */
export interface Petstore {
  /** Answers one plain request. Never throws: failures become Error-body answers. */
  handle(request: PetstoreRequest): Promise<PetstoreResponse>;
  /**
   * Fetch-API entry: `Request` → `Response`. The URL path must be under `prefix` (default `/v1`); other
   * paths get a plain 404 Error body. `info.clientAddress` feeds the anonymous rate limit;
   * `info.headersIncomplete` says the server dropped header fields past its limit (see
   * {@link PetstoreRequest}): on Node, `nodeHeadersCutOff(incoming)` from `@petstore/core/node`.
   */
  fetch(request: Request, info?: FetchInfo): Promise<Response>;
  /**
   * Authentication then rate limiting, alone — the same keys, plans, quotas, headers and errors as the API —
   * for the host's own routes, charging `options.cost` units (default: `rateLimit.cost.guard`, itself default 1).
   * Never throws for a request: every failure is an answer. Rejects with a TypeError for a `cost` that is not a
   * whole number ≥ 1 (a mistake in the calling code).
   */
  guard(request: GuardRequest, options?: GuardOptions): Promise<GuardResult>;
  /**
   * The operator's calls: `peek` (a caller's windows and bans, charging nothing) and `reset` (clear them), by
   * `{ keyId }`, `{ accountId }`, `{ clientAddress }` or `{ anonymousKey }`. Not exposed over HTTP.
   * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#reading-and-resetting-limits
   */
  readonly rateLimits: PetstoreRateLimits;
  /** The OpenAPI 3.0.3 description served at `{prefix}/openapi.json`. */
  readonly openapi: OpenApiDocument;
  /** Where the API is mounted for {@link Petstore.fetch} and `petstoreNodeHandler`: the `prefix` option, default `/v1`. */
  readonly prefix: string;
  /** The largest accepted request body in bytes. */
  readonly bodyLimitBytes: number;
}

const CONTINUE = /^\s*100-continue\s*$/i;

/** True when every `Expect` value is `100-continue`, the one expectation HTTP defines (RFC 9110 §10.1.1). */
function isContinueExpectation(value: string | readonly string[]): boolean {
  return typeof value === 'string' ? value.length <= 64 && CONTINUE.test(value) : value.every(isContinueExpectation);
}

/**
 * Creates the API.
 * @throws TypeError naming the option and what it accepts, for any wrong option: a missing store, a plan
 *   that does not exist, limits that are not whole numbers, an unknown option name, a server address that does
 *   not end with `/v1` … — once, here, never per request.
 */
export function createPetstore(options: PetstoreOptions): Petstore {
  const resolved = resolveOptions(options);
  const { clock, deprecations, docs, openapiJson, prefix } = resolved;
  const failures = failureAnswers(resolved);
  const { admit, guard, rateLimits } = createAdmission(resolved, failures);
  const { costs } = resolved;
  const categories = createCategoryOperations(resolved);
  const runHostOperation = createHostOperations(resolved);

  // The route template of each operation with the prefix, for the request channel; another mount path is
  // prepended per request.
  const routeTemplates = new Map(OPERATIONS.map((operation) => [operation.operationId, `${prefix}${operation.path}`] as const));
  const routeOf = (mountPath: string | undefined, path: string, operationId?: OperationId): string | undefined => {
    if (mountPath === undefined || mountPath === prefix) return operationId === undefined ? `${prefix}${path}` : routeTemplates.get(operationId);
    return `${mountPath}${path}`;
  };

  // The description as served at each mount path: without configured servers, its one (relative) server is the
  // mount path of the request, so the reference page's Try-it-out calls the API where it is mounted. Bounded: a
  // host whose mount path holds parameters (Express `/:tenant`) has one per value.
  const mountedDescriptions = new LRUCache<string, string>({ maxSize: 64, sizeCalculation: () => 1 });
  function openapiJsonAt(mountPath: string | undefined): string {
    if (resolved.serversConfigured || mountPath === undefined || mountPath === prefix) return openapiJson;
    let json = mountedDescriptions.get(mountPath);
    if (json === undefined) {
      json = JSON.stringify({ ...resolved.openapi, servers: [mountedServer(mountPath)] });
      mountedDescriptions.set(mountPath, json);
    }
    return json;
  }

  /** The request channel's context of a request: what routing tells before the pipeline runs. */
  function traceContext(request: PetstoreRequest): PetstoreRequestContext {
    if (docs?.owns(request.path) === true) {
      // The page, and every file below it under one template (a bounded set of labels).
      const route = routeOf(request.mountPath, pathnameOf(request.path) === '/docs' ? '/docs' : '/docs/{file}');
      return { method: request.method, operationId: undefined, route };
    }
    let operation: OperationDefinition | undefined;
    try {
      const route = matchRoute(request.method, request.path);
      if (route.kind === 'operation') operation = route.operation;
    } catch {
      // a request the pipeline answers with 500; it has no route
    }
    const operationId = operation?.operationId;
    return { method: request.method, operationId, route: operation === undefined ? undefined : routeOf(request.mountPath, operation.path, operationId) };
  }

  // Traced on the request channel only while it has subscribers: otherwise nothing is built (BENCHMARKS.md,
  // section "Observability").
  function handle(request: PetstoreRequest): Promise<PetstoreResponse> {
    if (!requestChannel.hasSubscribers) return answer(request, undefined);
    const trace = traceContext(request);
    return requestChannel.tracePromise(async () => {
      const response = await answer(request, trace);
      trace.status = response.status;
      return response;
    }, trace);
  }

  async function answer(request: PetstoreRequest, trace: PetstoreRequestContext | undefined): Promise<PetstoreResponse> {
    // Until admitted (a failing store, say), the answer has no rate-limit headers.
    let headers: Record<string, string> = {};
    try {
      // The reference page (option `docs`): public, and charged like the description (docs/reference-page.md).
      if (docs?.owns(request.path) === true) {
        const admitted = await admit(request, true, costs.getOpenApiDocument, trace);
        return 'response' in admitted ? admitted.response : docs.answer(request.path, request.method, admitted.headers);
      }
      const route = matchRoute(request.method, request.path);
      const isOperation = route.kind === 'operation';
      // The list's version read goes out beside the rate-limit charge (see step 8 above).
      let listStart: ListStart | undefined;
      const startList = isOperation && route.operation.operationId === 'listCategories' ? () => (listStart = categories.startList(request)) : undefined;
      const admitted = await admit(request, isOperation && route.operation.public, isOperation ? costs[route.operation.operationId] : 1, trace, startList);
      if ('response' in admitted) return admitted.response;
      headers = admitted.headers;
      const principal = admitted.principal as Principal; // only public operations admit without one
      const expectation = request.headers['expect'];
      if (expectation !== undefined && !isContinueExpectation(expectation)) {
        const message = 'The server cannot meet the expectation in the Expect header; only 100-continue is supported.';
        return errorAnswer('expectation_failed', message, headers, request.method);
      }
      if (route.kind === 'not_found') return errorAnswer('not_found', 'There is no operation at this path.', headers, request.method);
      if (route.kind === 'method_not_allowed') {
        headers['allow'] = route.allow;
        const message = `The method ${safeMethod(request.method)} is not allowed here; allowed: ${route.allow}.`;
        return errorAnswer('method_not_allowed', message, headers, request.method);
      }
      const { operationId } = route.operation;
      const deprecation = deprecations[operationId];
      if (deprecation !== undefined) {
        Object.assign(headers, deprecationHeaders(deprecation));
        if (isGone(deprecation, clock.now())) {
          const message = `The operation ${operationId} was retired on ${new Date(deprecation.sunsetAtMs as number).toUTCString()}.`;
          return errorAnswer('gone', message, headers, request.method);
        }
      }
      switch (operationId) {
        case 'getOpenApiDocument':
          return textAnswer(200, openapiJsonAt(request.mountPath), headers, request.method);
        case 'listCategories':
          return await categories.listCategories(request, headers, listStart);
        case 'createCategory':
          return await categories.createCategory(request, principal, headers);
        case 'getPetById':
        case 'listStoreOrders':
          return await runHostOperation(operationId, request, principal, route.params, headers);
      }
    } catch (error) {
      if (trace !== undefined) trace.error = error;
      if (isPetstoreError(error)) return failures.failedAnswer(error, request, headers);
      return failures.internalAnswer(error, request, headers);
    }
  }

  const petstore: Petstore = {
    handle,
    guard,
    rateLimits,
    fetch: (request, info) => handleFetch(petstore, request, info),
    openapi: resolved.openapi,
    prefix: resolved.prefix,
    bodyLimitBytes: resolved.bodyLimitBytes,
  };
  return petstore;
}

/**
 * The one transport-neutral entry of the API: a {@link PetstoreRequest} in, a {@link PetstoreResponse} out.
 *
 * Order of the steps, for every request below the prefix:
 * 1. authentication: the bearer API key is resolved to a principal, or not;
 * 2. rate limiting, after authentication: charged to the key, or to the client address when there is no
 *    valid key; over the limit → 429 (`rate_limited` / `temporarily_banned`) with `Retry-After`;
 * 3. header fields dropped by the server (`headersIncomplete`) → 431; no valid key → 401 with
 *    `WWW-Authenticate` (nothing is created), except for public operations (`GET /openapi.json`);
 * 4. an `Expect` other than `100-continue` → 417 (RFC 9110 §10.1.1);
 * 5. routing: unknown path → 404, known path with another method → 405 with `Allow`;
 * 6. deprecation headers; past the sunset → 410;
 * 7. for createCategory: content type → 400, transfer/content coding → 415, body size → 413, JSON → 400,
 *    NewCategory validation → 400; for host operations: path parameters → 400, no handler → 501;
 * 8. the operation itself.
 * Every answer carries the `X-RateLimit-*` headers once step 2 has run; every error answer has the Error
 * body and nothing more. Steps 1–3 are also offered alone, as {@link Petstore.guard}, for the
 * host's own routes.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#order-of-checks
 */
import { hashApiKey, type ApiKeyStore } from '../auth/api-key.js';
import { bearerChallenge, readBearerCredential } from '../auth/bearer.js';
import type { Principal } from '../auth/principal.js';
import { systemClock, type Clock } from '../clock.js';
import { ERROR_STATUS, PetstoreError, errorBody, isPetstoreError, type ErrorCode } from '../errors.js';
import { buildOpenApiDocument, type OpenApiDocument, type OpenApiOptions } from '../openapi/document.js';
import { createRateLimitDecider, type RateLimitDecision, type RateLimiterOptions } from '../rate-limit/engine.js';
import { parseNewCategory, type Category, type NewCategory } from '../schemas.js';
import { DEFAULT_IDEMPOTENCY_RETENTION_MS, newCategoryFingerprint, readIdempotencyKey, scopedIdempotencyKey } from './idempotency.js';
import type { CategoryStore } from '../storage/category-store.js';
import {
  DEFAULT_BODY_LIMIT_BYTES,
  assertJsonContentType,
  assertSupportedCodings,
  readJsonBody,
} from './body.js';
import { PetstoreOptionsSchema, assertOptions } from '../options.js';
import { UNKNOWN_CLIENT_ADDRESS, normalizeClientAddress } from '../rate-limit/client-address.js';
import {
  DEFAULT_DEPRECATIONS,
  deprecationHeaders,
  isGone,
  type DeprecationPolicy,
} from './deprecation.js';
import { emitEvent, type PetstoreEvent } from './events.js';
import { handleFetch } from './fetch.js';
import { matchRoute, type HostOperationId, type OperationId, type Stability } from './operations.js';
import { DEFAULT_PREFIX } from './prefix.js';
import { warningsOnce, type PetstoreWarning } from './warnings.js';
import type { PetstoreHeaders, PetstoreRequest, PetstoreRequestBody, PetstoreResponse } from './types.js';

/** What a host handler receives (the pets and store-order operations are the host's). */
export interface HostOperationContext {
  operationId: HostOperationId;
  /** The authenticated caller. */
  principal: Principal;
  /** Path parameters, percent-decoded (`petId` is checked to be a positive integer). */
  params: Readonly<Record<string, string>>;
  /** The query string. */
  query: URLSearchParams;
  headers: PetstoreHeaders;
  /** The operation's stability marker, if configured. */
  stability: Stability | undefined;
  /** The operation's deprecation, if any. */
  deprecation: DeprecationPolicy | undefined;
  /**
   * Aborted when the client goes away before the answer is sent (the adapters and the Fetch entry wire it to
   * the connection): pass it on to slow work (`fetch(url, { signal })`, database queries) to stop it early.
   * Never aborted when the transport cannot tell.
   */
  signal: AbortSignal;
}

/**
 * What a host handler answers: `status` (default 200, 200–599), a JSON-serialisable `body` (omit for no
 * body), and extra `headers` (the library's own headers win). Throw a `PetstoreError` to answer with the
 * Error body; anything else thrown becomes a 500.
 */
export interface HostOperationResult {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** A handler for one host operation. */
export type HostOperationHandler = (context: HostOperationContext) => HostOperationResult | Promise<HostOperationResult>;

/** Options of {@link createPetstore}. */
export interface PetstoreOptions {
  /** Resolves API keys to principals. */
  apiKeys: ApiKeyStore;
  /** Where categories live. */
  categories: CategoryStore;
  /** Rate limiting: the store(s), and optionally plans, anonymous limits, bans, failure policy. */
  rateLimit: Omit<RateLimiterOptions, 'clock'>;
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
  /** Path prefix of the API for the Fetch entry ({@link Petstore.fetch}). Default `/v1`. */
  basePath?: string;
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

/** What a Fetch-based server knows about a request beyond the `Request` itself. */
export interface FetchInfo {
  /** The client's IP address, for the anonymous rate limit. */
  clientAddress?: string | undefined;
  /** `true` when the server dropped header fields past its limit; the answer is then 431. */
  headersIncomplete?: boolean | undefined;
}

/** The request {@link Petstore.guard} needs: who is calling, for what. */
export type GuardRequest = Pick<PetstoreRequest, 'method' | 'path' | 'headers' | 'clientAddress' | 'logger' | 'headersIncomplete'>;

/**
 * The outcome of {@link Petstore.guard}: admitted with the principal and the rate-limit headers to send, or
 * refused with the complete answer to send (401, 429 or 503, with the Error body and headers).
 */
export type GuardResult =
  | { allowed: true; principal: Principal; headers: Record<string, string> }
  | { allowed: false; response: PetstoreResponse };

/** A mounted petstore API: the transport-neutral entry, the Fetch-API entry, and the guard. */
export interface Petstore {
  /** Answers one plain request. Never throws: failures become Error-body answers. */
  handle(request: PetstoreRequest): Promise<PetstoreResponse>;
  /**
   * Fetch-API entry: `Request` → `Response`. The URL path must start with `basePath` (default `/v1`); other
   * paths get a plain 404 Error body. `info.clientAddress` feeds the anonymous rate limit;
   * `info.headersIncomplete` says the server dropped header fields past its limit (see
   * {@link PetstoreRequest}): on Node, `nodeHeadersCutOff(incoming)` from `@petstore/core/node`.
   */
  fetch(request: Request, info?: FetchInfo): Promise<Response>;
  /**
   * Authentication then rate limiting, alone — the same keys, plans, quotas, headers and errors as the API —
   * for the host's own routes. Never throws.
   */
  guard(request: GuardRequest): Promise<GuardResult>;
  /** The OpenAPI 3.0.3 description served at `{prefix}/openapi.json`. */
  readonly openapi: OpenApiDocument;
  /** The path prefix used by {@link Petstore.fetch}. */
  readonly basePath: string;
  /** The largest accepted request body in bytes. */
  readonly bodyLimitBytes: number;
}

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** The outcome of authentication: the principal of a valid key; `presented` when a credential was sent. */
interface Authentication {
  principal?: Principal;
  presented: boolean;
}
/** The outcome of steps 1–3: admitted (with the principal, if any), or the answer that refuses. */
type Admission = { principal: Principal | undefined; headers: Record<string, string> } | { response: PetstoreResponse };
const NOT_PRESENTED: Authentication = Object.freeze({ presented: false });
const PRESENTED_INVALID: Authentication = Object.freeze({ presented: true });
const POSITIVE_INTEGER = /^[1-9][0-9]{0,15}$/;
const NO_BODY: PetstoreRequestBody = Object.freeze({ kind: 'none' });
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
  assertOptions(PetstoreOptionsSchema, options, 'createPetstore');
  const clock = options.clock ?? systemClock;
  const warn = warningsOnce(options.onWarning);
  const { anonymousKey, ipv6Subnet } = options.rateLimit;
  const onInternalError =
    options.onInternalError ?? ((error: unknown) => console.error('[petstore] internal error:', error));
  const decideRateLimit = createRateLimitDecider({
    onStoreError: (error) => reportSafely(onInternalError, error),
    ...options.rateLimit,
    clock,
  });
  const bodyLimitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const retentionMs = options.idempotency?.retentionMs ?? DEFAULT_IDEMPOTENCY_RETENTION_MS;
  // Scoped idempotency keys of the creates this instance is processing: a repeat that arrives meanwhile gets 409.
  // One entry per create in flight, removed when it is answered.
  const createsInFlight = new Set<string>();
  const basePath = options.basePath ?? DEFAULT_PREFIX;
  const deprecations: Partial<Record<OperationId, DeprecationPolicy>> = {};
  for (const [operationId, policy] of Object.entries({ ...DEFAULT_DEPRECATIONS, ...options.deprecations })) {
    if (policy === null || policy === undefined) continue;
    deprecations[operationId as OperationId] = policy;
    if (policy.sunsetAtMs === undefined && options.handlers?.[operationId as HostOperationId] !== undefined) {
      warn({
        code: 'PETSTORE_DEPRECATED_WITHOUT_SUNSET',
        message: `${operationId} is deprecated (answers carry a Deprecation header) and has no sunset date, so it keeps working. Set deprecations.${operationId}.sunsetAtMs to announce one.`,
      });
    }
  }
  const stability = { ...options.stability };
  const openapi = buildOpenApiDocument(options.openapi ?? {}, { deprecations, stability });
  const openapiJson = JSON.stringify(openapi);
  const realm = options.realm ?? 'petstore';
  // The JSON of the last frozen list: a store that answers the same frozen array between writes (the memory
  // store does) has it serialised once, not per request (see CategoryStore.list). A frozen array stays frozen,
  // so the same array object needs no other check. Measured (benchmarks/src/pipeline-bench.ts, `handle` for an
  // authenticated GET /categories on the memory stores, median ns per request): saves 1.3–1.6 µs per request
  // with 3 categories (3–4 % of the 43 µs of server CPU per request) and 25–32 µs with 100; it grows with the list.
  let lastList: readonly Category[] | undefined;
  let lastListJson = '';
  const listJson = (list: readonly Category[]): string => {
    if (list === lastList) return lastListJson;
    const json = JSON.stringify(list);
    if (Object.isFrozen(list)) {
      lastList = list;
      lastListJson = json;
    }
    return json;
  };
  const { apiKeys, categories, onEvent, handlers = {} } = options;

  /** Who is calling. */
  async function authenticate(request: GuardRequest): Promise<Authentication> {
    const credential = readBearerCredential(request.headers['authorization']);
    if (credential.kind === 'missing') return NOT_PRESENTED;
    if (credential.kind === 'malformed') return PRESENTED_INVALID;
    const principal = await apiKeys.findPrincipal(hashApiKey(credential.token));
    return principal ? { principal, presented: true } : PRESENTED_INVALID;
  }

  const eventFor = (request: GuardRequest, type: PetstoreEvent['type'], principal?: Principal): PetstoreEvent => ({
    type,
    method: request.method,
    path: request.path,
    clientAddress: request.clientAddress,
    ...(principal ? { keyId: principal.keyId, accountId: principal.accountId } : {}),
  });

  /**
   * An Error-body answer, with the headers gathered so far (and `Retry-After` when `retryAfterSeconds` is
   * given). The pipeline's own refusals (401, 404, 429 …) come here directly: an Error object would capture a
   * stack trace nobody reads, about half the cost of a refusal, and refusals are what a flood is made of.
   */
  function errorAnswer(
    code: ErrorCode,
    message: string,
    headers: Record<string, string>,
    method: string,
    retryAfterSeconds?: number,
  ): PetstoreResponse {
    if (typeof retryAfterSeconds === 'number' && Number.isFinite(retryAfterSeconds)) {
      headers['retry-after'] = String(Math.max(1, Math.ceil(retryAfterSeconds)));
    }
    // RFC 9110 §15.5.16 / §12.5.3: a 415 for a content coding names the codings the server accepts.
    if (code === 'unsupported_encoding') headers['accept-encoding'] = 'identity';
    return jsonAnswer(ERROR_STATUS[code], errorBody(code, message), headers, method);
  }

  function internalAnswer(error: unknown, request: GuardRequest, headers: Record<string, string>): PetstoreResponse {
    reportSafely(onInternalError, error);
    emitEvent({ ...eventFor(request, 'internal_error'), error }, onEvent, request.logger);
    return jsonAnswer(500, errorBody('internal_error', 'The server failed to answer this request.'), headers, request.method);
  }

  /**
   * The answer for a PetstoreError raised while handling. A `service_unavailable` caused by a failing store
   * (fail-closed) is also reported as an `internal_error` event, with the store's error.
   */
  function failedAnswer(error: PetstoreError, request: GuardRequest, headers: Record<string, string>): PetstoreResponse {
    if (error.code === 'service_unavailable' && error.cause !== undefined) {
      emitEvent({ ...eventFor(request, 'internal_error'), error: error.cause }, onEvent, request.logger);
    }
    return errorAnswer(error.code, error.message, headers, request.method, error.retryAfterSeconds);
  }

  /**
   * Steps 1–3: authentication, rate limiting, 401. Admitted requests get the headers their answer starts
   * from (the rate-limit headers). A failure rejects. Every store call is simply awaited: a synchronous path
   * for stores that answer without a promise saved 0.5 µs per request (1 % of 43 µs), measured, so it is gone.
   */
  async function admit(request: GuardRequest, publicOperation: boolean): Promise<Admission> {
    const authentication = await authenticate(request);
    const principal = authentication.principal;
    const decision = await decideRateLimit(principal ? { principal } : { anonymousKey: anonymousKeyOf(request) });
    return conclude(request, publicOperation, authentication, decision);
  }

  /** Who a caller without a valid key is: the host's `anonymousKey`, else the normalised client address. */
  function anonymousKeyOf(request: GuardRequest): string {
    const key = anonymousKey === undefined ? normalizeClientAddress(request.clientAddress, ipv6Subnet) : anonymousKey(request);
    if (key !== undefined && key !== UNKNOWN_CLIENT_ADDRESS) return key;
    const got = request.clientAddress === undefined ? 'none' : JSON.stringify(request.clientAddress.slice(0, 60));
    warn(
      {
        code: 'PETSTORE_NO_CLIENT_ADDRESS',
        message:
          anonymousKey === undefined
            ? `A request without a valid API key had no usable client address (got ${got}), so all such callers share one rate-limit counter. Behind a proxy or load balancer, tell the framework to trust it (Fastify: trustProxy; Express: app.set('trust proxy', …)), or pass rateLimit.anonymousKey.`
            : 'rateLimit.anonymousKey answered no key for a request, so all such callers share one rate-limit counter.',
      },
      request.logger,
    );
    return UNKNOWN_CLIENT_ADDRESS;
  }

  function conclude(
    request: GuardRequest,
    publicOperation: boolean,
    { principal, presented }: Authentication,
    decision: RateLimitDecision,
  ): Admission {
    // A fresh object per decision: the answer's headers start from it.
    const headers = decision.headers;
    if (!decision.allowed) {
      const banned = decision.reason === 'banned';
      emitEvent(
        { ...eventFor(request, banned ? 'banned' : 'rate_limited', principal), retryAfterSeconds: decision.retryAfterSeconds },
        onEvent,
        request.logger,
      );
      const who = principal ? 'This API key' : 'This client';
      const retryAfter = decision.retryAfterSeconds;
      const response = banned
        ? errorAnswer(
            'temporarily_banned',
            `${who} is temporarily banned for repeated requests after being rate limited; retry after ${retryAfter} seconds.`,
            headers,
            request.method,
            retryAfter,
          )
        : errorAnswer('rate_limited', `Rate limit exceeded; retry after ${retryAfter} seconds.`, headers, request.method, retryAfter);
      return { response };
    }
    if (request.headersIncomplete === true) {
      // The header fields the server dropped may hold a second Authorization or Content-Type.
      const message = 'The request has more header fields than the server reads; send fewer.';
      return { response: errorAnswer('header_fields_too_large', message, headers, request.method) };
    }
    if (!principal && !publicOperation) {
      emitEvent({ ...eventFor(request, 'unauthorized'), presentedKey: presented }, onEvent, request.logger);
      headers['www-authenticate'] = bearerChallenge(realm, presented);
      const message = presented
        ? 'The API key is invalid.'
        : 'An API key is required: send the header Authorization: Bearer <API_KEY>.';
      return { response: errorAnswer('unauthorized', message, headers, request.method) };
    }
    return { principal, headers };
  }

  async function runHostOperation(
    operationId: HostOperationId,
    request: PetstoreRequest,
    principal: Principal,
    params: Record<string, string>,
  ): Promise<[number, unknown, Record<string, string>]> {
    const petId = params['petId'];
    if (petId !== undefined && (!POSITIVE_INTEGER.test(petId) || !Number.isSafeInteger(Number(petId)))) {
      throw new PetstoreError('validation_failed', 'petId must be a positive integer.');
    }
    const handler = handlers[operationId];
    if (handler === undefined) {
      throw new PetstoreError('not_implemented', `The operation ${operationId} is not implemented by this server.`);
    }
    const queryStart = request.path.indexOf('?');
    const result = await handler({
      operationId,
      principal,
      params: Object.freeze({ ...params }),
      query: new URLSearchParams(queryStart === -1 ? '' : request.path.slice(queryStart + 1)),
      headers: request.headers,
      stability: stability[operationId],
      deprecation: deprecations[operationId],
      // A transport that cannot tell when the client leaves gives a signal that is never aborted.
      signal: request.signal ?? new AbortController().signal,
    });
    const status = result.status ?? 200;
    if (!Number.isInteger(status) || status < 200 || status > 599) {
      throw new TypeError(`The ${operationId} handler answered with an invalid status ${String(status)}`);
    }
    return [status, result.body, handlerHeaders(operationId, result.headers)];
  }

  async function handle(request: PetstoreRequest): Promise<PetstoreResponse> {
    // Until admitted (a failing store, say), the answer has no rate-limit headers.
    let headers: Record<string, string> = {};
    try {
      const route = matchRoute(request.method, request.path);
      const admitted = await admit(request, route.kind === 'operation' && route.operation.public);
      if ('response' in admitted) return admitted.response;
      const { principal } = admitted;
      headers = admitted.headers;
      const expectation = request.headers['expect'];
      if (expectation !== undefined && !isContinueExpectation(expectation)) {
        const message = 'The server cannot meet the expectation in the Expect header; only 100-continue is supported.';
        return errorAnswer('expectation_failed', message, headers, request.method);
      }
      if (route.kind === 'not_found') {
        return errorAnswer('not_found', 'There is no operation at this path.', headers, request.method);
      }
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
          return textAnswer(200, openapiJson, headers, request.method);
        case 'listCategories':
          return textAnswer(200, listJson(await categories.list()), headers, request.method);
        case 'createCategory': {
          const idempotencyKey = readIdempotencyKey(request.headers);
          if (idempotencyKey === undefined) {
            return jsonAnswer(201, await categories.create(await readNewCategory(request)), headers, request.method);
          }
          return await createIdempotently(request, scopedIdempotencyKey((principal as Principal).keyId, idempotencyKey), headers);
        }
        case 'getPetById':
        case 'listStoreOrders': {
          const [status, body, hostHeaders] = await runHostOperation(operationId, request, principal as Principal, route.params);
          const merged = { ...hostHeaders, ...headers };
          return body === undefined
            ? { status, headers: merged, body: undefined }
            : jsonAnswer(status, body, merged, request.method);
        }
      }
    } catch (error) {
      if (isPetstoreError(error)) return failedAnswer(error, request, headers);
      return internalAnswer(error, request, headers);
    }
  }

  /** The validated NewCategory of a create: Content-Type, codings, the body read within its limit, the schema. */
  async function readNewCategory(request: PetstoreRequest): Promise<NewCategory> {
    const body = request.body ?? NO_BODY;
    assertJsonContentType(request.headers);
    assertSupportedCodings(request.headers, body);
    const json = await readJsonBody(body, request.headers, bodyLimitBytes);
    const parsed = parseNewCategory(json);
    if (!parsed.success) throw new PetstoreError('validation_failed', parsed.message);
    return parsed.value;
  }

  /**
   * A create with an `Idempotency-Key`: 409 while the same key is in flight here; else the store creates and
   * records in one step, or answers the record: a replay (201, the first category, `Idempotent-Replayed: true`)
   * or a mismatch (422). Only a create that succeeded is recorded: a request that failed created nothing and
   * may be retried with its key.
   */
  async function createIdempotently(request: PetstoreRequest, key: string, headers: Record<string, string>): Promise<PetstoreResponse> {
    if (createsInFlight.has(key)) {
      const message = 'A create with this Idempotency-Key is still being processed; retry after 1 second.';
      return errorAnswer('idempotency_key_in_flight', message, headers, request.method, 1);
    }
    createsInFlight.add(key);
    try {
      const newCategory = await readNewCategory(request);
      const result = await categories.createIdempotent(newCategory, { key, fingerprint: newCategoryFingerprint(newCategory), retentionMs });
      if (result.outcome === 'mismatch') {
        const message = 'This Idempotency-Key was used for a create with another body; nothing was created. Send a new key.';
        return errorAnswer('idempotency_key_reused', message, headers, request.method);
      }
      if (result.outcome === 'replayed') headers['idempotent-replayed'] = 'true';
      return jsonAnswer(201, result.category, headers, request.method);
    } finally {
      createsInFlight.delete(key);
    }
  }

  async function guard(request: GuardRequest): Promise<GuardResult> {
    try {
      const admitted = await admit(request, false);
      if ('response' in admitted) return { allowed: false, response: admitted.response };
      return { allowed: true, principal: admitted.principal as Principal, headers: admitted.headers };
    } catch (error) {
      const response = isPetstoreError(error) ? failedAnswer(error, request, {}) : internalAnswer(error, request, {});
      return { allowed: false, response };
    }
  }

  const petstore: Petstore = {
    handle,
    guard,
    fetch: (request, info) => handleFetch(petstore, request, info),
    openapi,
    basePath,
    bodyLimitBytes,
  };
  return petstore;
}

/** A JSON answer; HEAD answers carry no body. */
function jsonAnswer(status: number, body: unknown, headers: Record<string, string>, method: string): PetstoreResponse {
  return textAnswer(status, JSON.stringify(body), headers, method);
}

function textAnswer(status: number, json: string, headers: Record<string, string>, method: string): PetstoreResponse {
  // Set last, so a host handler's own Content-Type cannot relabel the JSON text written here. The headers
  // object belongs to this one answer, so it is completed in place rather than copied.
  headers['content-type'] = JSON_CONTENT_TYPE;
  // Methods are case-sensitive tokens, but `head` is routed as HEAD too (see matchRoute).
  const head = method === 'HEAD' || (method.length === 4 && method.toUpperCase() === 'HEAD');
  return { status, headers, body: head ? undefined : json };
}

// RFC 9110 §5.1 field-name (a token) and §5.5 field-value (visible characters, obs-text, spaces and tabs).
const FIELD_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
// Framing and connection headers belong to the server, not to a handler's answer.
const SERVER_HEADERS = new Set(['connection', 'content-length', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/**
 * A host handler's headers, by lowercase name, without framing and connection headers.
 * @throws TypeError for a name that is not a token or a value that is not a string of field-value characters
 *   (a CR or LF would split the answer): the handler's mistake is a 500, caught before anything is sent.
 */
function handlerHeaders(operationId: string, headers: Record<string, string> | undefined): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (!FIELD_NAME.test(name) || typeof value !== 'string' || !FIELD_VALUE.test(value)) {
      throw new TypeError(`The ${operationId} handler answered with an invalid header ${JSON.stringify(name.slice(0, 40))}`);
    }
    const lower = name.toLowerCase();
    if (!SERVER_HEADERS.has(lower)) result[lower] = value;
  }
  return result;
}

/** Calls an error reporter; a reporter that throws must not turn an answer into a thrown error. */
function reportSafely(report: (error: unknown) => void, error: unknown): void {
  try {
    report(error);
  } catch {
    // ignored on purpose
  }
}

/** A method name for a message: an HTTP token of at most 20 characters, else a placeholder. */
function safeMethod(method: string): string {
  return /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,20}$/.test(method) ? method.toUpperCase() : '(this method)';
}

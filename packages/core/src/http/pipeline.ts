/**
 * The one transport-neutral entry of the API: a {@link PetstoreRequest} in, a {@link PetstoreResponse} out.
 *
 * Order of the steps, for every request below the prefix:
 * 1. authentication (SPEC §5): the bearer API key is resolved to a principal, or not;
 * 2. rate limiting (SPEC §8): charged to the key, or to the client address when there is no valid key;
 *    over the limit → 429 (`rate_limited` / `temporarily_banned`) with `Retry-After`;
 * 3. no valid key → 401 with `WWW-Authenticate` (nothing is created);
 * 4. routing: unknown path → 404, known path with another method → 405 with `Allow`;
 * 5. for createCategory: content type → 400, body size → 413, JSON → 400, NewCategory validation → 400;
 * 6. the operation itself (200 / 201).
 * Every answer carries the `X-RateLimit-*` headers once step 2 has run; every error answer has the Error
 * body of SPEC §2 and nothing more.
 */
import { hashApiKey, type ApiKeyStore } from '../auth/api-key.js';
import { bearerChallenge, readBearerCredential } from '../auth/bearer.js';
import type { Principal } from '../auth/principal.js';
import { systemClock, type Clock } from '../clock.js';
import { ERROR_STATUS, PetstoreError, errorBody, isPetstoreError } from '../errors.js';
import { createRateLimiter, type RateLimiterOptions } from '../rate-limit/engine.js';
import { parseNewCategory } from '../schemas.js';
import type { CategoryStore } from '../storage/category-store.js';
import { DEFAULT_BODY_LIMIT_BYTES, assertJsonContentType, readJsonBody } from './body.js';
import { handleFetch } from './fetch.js';
import { matchRoute, type OperationId } from './operations.js';
import type { PetstoreRequest, PetstoreResponse } from './types.js';

/** Options of {@link createPetstore}. */
export interface PetstoreOptions {
  /** Resolves API keys to principals (SPEC §5). */
  apiKeys: ApiKeyStore;
  /** Where categories live. */
  categories: CategoryStore;
  /** Rate limiting (SPEC §8): the store(s), and optionally plans, anonymous limits and ban policy. */
  rateLimit: Omit<RateLimiterOptions, 'clock'>;
  /** Source of time, Unix epoch ms. Default: the system clock. */
  clock?: Clock;
  /** Largest accepted request body in bytes; larger bodies get 413. Default 1 MiB (1,048,576). */
  bodyLimitBytes?: number;
  /** The realm of the `WWW-Authenticate` challenge on 401 answers. Default `petstore`. */
  realm?: string;
  /** Path prefix of the API for the Fetch entry ({@link Petstore.fetch}). Default `/v1` (SPEC §9). */
  basePath?: string;
  /**
   * Called with every unexpected error behind a 500 answer (a store that throws, say), and with every
   * rate-limit store failure (unless `rateLimit.onStoreError` is set). Default: logs it with `console.error`.
   * Never receives API keys.
   */
  onInternalError?: (error: unknown) => void;
}

/** A mounted petstore API: the transport-neutral entry and the Fetch-API entry. */
export interface Petstore {
  /** Answers one plain request. Never throws: failures become Error-body answers. */
  handle(request: PetstoreRequest): Promise<PetstoreResponse>;
  /**
   * Fetch-API entry: `Request` → `Response`. The URL path must start with `basePath` (default `/v1`); other
   * paths get a plain 404 Error body. `info.clientAddress` feeds the anonymous rate limit.
   */
  fetch(request: Request, info?: { clientAddress?: string }): Promise<Response>;
  /** The path prefix used by {@link Petstore.fetch}. */
  readonly basePath: string;
  /** The largest accepted request body in bytes. */
  readonly bodyLimitBytes: number;
}

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/**
 * Creates the API.
 * @throws TypeError on invalid options (limits, ban policy, body limit, base path).
 */
export function createPetstore(options: PetstoreOptions): Petstore {
  const clock = options.clock ?? systemClock;
  const onInternalError =
    options.onInternalError ?? ((error: unknown) => console.error('[petstore] internal error:', error));
  const limiter = createRateLimiter({
    onStoreError: (error) => reportSafely(onInternalError, error),
    ...options.rateLimit,
    clock,
  });
  const bodyLimitBytes = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  if (!Number.isSafeInteger(bodyLimitBytes) || bodyLimitBytes < 1) {
    throw new TypeError(`bodyLimitBytes must be a whole number >= 1, got ${String(bodyLimitBytes)}`);
  }
  const basePath = options.basePath ?? '/v1';
  if (basePath !== '' && (!basePath.startsWith('/') || basePath.endsWith('/'))) {
    throw new TypeError(`basePath must be empty or start with "/" and not end with "/", got "${basePath}"`);
  }
  const realm = options.realm ?? 'petstore';
  const { apiKeys, categories } = options;

  async function authenticate(request: PetstoreRequest): Promise<{ principal?: Principal; presented: boolean }> {
    const credential = readBearerCredential(request.headers['authorization']);
    if (credential.kind === 'missing') return { presented: false };
    if (credential.kind === 'malformed') return { presented: true };
    const principal = await apiKeys.findPrincipal(hashApiKey(credential.token));
    return principal ? { principal, presented: true } : { presented: true };
  }

  async function runOperation(operationId: OperationId, request: PetstoreRequest): Promise<[number, unknown]> {
    switch (operationId) {
      case 'listCategories':
        return [200, await categories.list()];
      case 'createCategory': {
        assertJsonContentType(request.headers);
        const json = await readJsonBody(request.body ?? { kind: 'none' }, request.headers, bodyLimitBytes);
        const parsed = parseNewCategory(json);
        if (!parsed.success) throw new PetstoreError('validation_failed', parsed.message);
        return [201, await categories.create(parsed.value)];
      }
    }
  }

  async function handle(request: PetstoreRequest): Promise<PetstoreResponse> {
    const headers: Record<string, string> = { 'content-type': JSON_CONTENT_TYPE };
    const respond = (status: number, body: unknown): PetstoreResponse => ({
      status,
      headers,
      body: request.method.toUpperCase() === 'HEAD' ? undefined : JSON.stringify(body),
    });
    // By code, not through the instance: a PetstoreError from another copy of the library (or a look-alike
    // that isPetstoreError accepts) may lack `toBody` or carry another `status`.
    const fail = (error: PetstoreError) => {
      const retryAfter = error.retryAfterSeconds;
      if (typeof retryAfter === 'number' && Number.isFinite(retryAfter)) {
        headers['retry-after'] = String(Math.max(1, Math.ceil(retryAfter)));
      }
      return respond(ERROR_STATUS[error.code], errorBody(error.code, error.message));
    };
    try {
      const { principal, presented } = await authenticate(request);
      const decision = await limiter.consume(principal ? { principal } : { clientAddress: request.clientAddress });
      Object.assign(headers, decision.headers);
      if (!decision.allowed) {
        const who = principal ? 'This API key' : 'This client';
        return decision.reason === 'banned'
          ? fail(
              new PetstoreError(
                'temporarily_banned',
                `${who} is temporarily banned for repeated requests after being rate limited; retry after ${decision.retryAfterSeconds} seconds.`,
              ),
            )
          : fail(
              new PetstoreError(
                'rate_limited',
                `Rate limit exceeded; retry after ${decision.retryAfterSeconds} seconds.`,
              ),
            );
      }
      if (!principal) {
        headers['www-authenticate'] = bearerChallenge(realm, presented);
        return fail(
          new PetstoreError(
            'unauthorized',
            presented
              ? 'The API key is invalid.'
              : 'An API key is required: send the header Authorization: Bearer <API_KEY>.',
          ),
        );
      }
      const route = matchRoute(request.method, request.path);
      if (route.kind === 'not_found') {
        return fail(new PetstoreError('not_found', 'There is no operation at this path.'));
      }
      if (route.kind === 'method_not_allowed') {
        headers['allow'] = route.allow;
        return fail(
          new PetstoreError(
            'method_not_allowed',
            `The method ${safeMethod(request.method)} is not allowed here; allowed: ${route.allow}.`,
          ),
        );
      }
      const [status, body] = await runOperation(route.operationId, request);
      return respond(status, body);
    } catch (error) {
      if (isPetstoreError(error)) return fail(error);
      reportSafely(onInternalError, error);
      return respond(500, errorBody('internal_error', 'The server failed to answer this request.'));
    }
  }

  const petstore: Petstore = {
    handle,
    fetch: (request, info) => handleFetch(petstore, request, info?.clientAddress),
    basePath,
    bodyLimitBytes,
  };
  return petstore;
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


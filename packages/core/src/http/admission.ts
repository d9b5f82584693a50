/**
 * Admission, steps 1–3 of the pipeline (see pipeline.ts): authentication, then rate limiting — charged to the
 * key, or to the caller without one — then the refusals: 429 over the limit (`rate_limited` or
 * `temporarily_banned`, with `Retry-After`), 431 when the server dropped header fields, 401 without a valid
 * key (except for public operations). `Petstore.guard` is admission alone, for the host's own routes.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#order-of-checks
 */
import { hashApiKey } from '../auth/api-key.js';
import { bearerChallenge, readBearerCredential } from '../auth/bearer.js';
import type { Principal } from '../auth/principal.js';
import { isPetstoreError } from '../errors.js';
import { UNKNOWN_CLIENT_ADDRESS, normalizeClientAddress } from '../rate-limit/client-address.js';
import { createRateLimitDecider, type RateLimitDecision } from '../rate-limit/engine.js';
import { errorAnswer, eventFor, type FailureAnswers } from './answers.js';
import { emitEvent } from './events.js';
import type { ResolvedOptions } from './petstore-options.js';
import type { PetstoreRequest, PetstoreResponse } from './types.js';

/** The request `Petstore.guard` needs: who is calling, for what. */
export type GuardRequest = Pick<PetstoreRequest, 'method' | 'path' | 'headers' | 'clientAddress' | 'logger' | 'headersIncomplete'>;

/**
 * The outcome of `Petstore.guard`: admitted with the principal and the rate-limit headers to send, or
 * refused with the complete answer to send (401, 429, 431 or 503, with the Error body and headers).
 */
export type GuardResult =
  | { allowed: true; principal: Principal; headers: Record<string, string> }
  | { allowed: false; response: PetstoreResponse };

/**
 * The outcome of steps 1–3: admitted (with the principal, if any, and the headers the answer starts from: the
 * rate-limit headers), or the answer that refuses.
 */
export type Admission = { principal: Principal | undefined; headers: Record<string, string> } | { response: PetstoreResponse };

/** The admission of one petstore. */
export interface Admitter {
  /**
   * Steps 1–3 for a request; `publicOperation` spares it the 401 (it is still rate limited). A failing store
   * rejects (the caller answers it).
   */
  admit(request: GuardRequest, publicOperation: boolean): Promise<Admission>;
  /** Steps 1–3 for a host route, failures answered too. Never throws. */
  guard(request: GuardRequest): Promise<GuardResult>;
}

/** The outcome of authentication: the principal of a valid key; `presented` when a credential was sent. */
interface Authentication {
  principal?: Principal;
  presented: boolean;
}
const NOT_PRESENTED: Authentication = Object.freeze({ presented: false });
const PRESENTED_INVALID: Authentication = Object.freeze({ presented: true });

export function createAdmission(options: ResolvedOptions, failures: FailureAnswers): Admitter {
  const { apiKeys, realm, onEvent, warn, clock } = options;
  const { anonymousKey, ...rateLimit } = options.rateLimit;
  const ipv6Subnet = rateLimit.ipv6Subnet;
  const decideRateLimit = createRateLimitDecider({ onStoreError: options.onInternalError, ...rateLimit, clock });

  /** Step 1: who is calling. */
  async function authenticate(request: GuardRequest): Promise<Authentication> {
    const credential = readBearerCredential(request.headers['authorization']);
    if (credential.kind === 'missing') return NOT_PRESENTED;
    if (credential.kind === 'malformed') return PRESENTED_INVALID;
    const principal = await apiKeys.findPrincipal(hashApiKey(credential.token));
    return principal ? { principal, presented: true } : PRESENTED_INVALID;
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

  /** Step 3, and the 429 of step 2: the refusals, in their order. */
  function conclude(request: GuardRequest, publicOperation: boolean, authentication: Authentication, decision: RateLimitDecision): Admission {
    const { principal, presented } = authentication;
    // A fresh object per decision: the answer's headers start from it.
    const headers = decision.headers;
    if (!decision.allowed) {
      const banned = decision.reason === 'banned';
      const retryAfter = decision.retryAfterSeconds;
      emitEvent({ ...eventFor(request, banned ? 'banned' : 'rate_limited', principal), retryAfterSeconds: retryAfter }, onEvent, request.logger);
      const who = principal ? 'This API key' : 'This client';
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
      const message = presented ? 'The API key is invalid.' : 'An API key is required: send the header Authorization: Bearer <API_KEY>.';
      return { response: errorAnswer('unauthorized', message, headers, request.method) };
    }
    return { principal, headers };
  }

  // Every store call is simply awaited: a synchronous path for stores that answer without a promise was
  // measured to save too little to keep (BENCHMARKS.md, section "HTTP: GET /v1/categories, authenticated,
  // three categories", holds the server CPU per request it was weighed against).
  async function admit(request: GuardRequest, publicOperation: boolean): Promise<Admission> {
    const authentication = await authenticate(request);
    const principal = authentication.principal;
    const decision = await decideRateLimit(principal ? { principal } : { anonymousKey: anonymousKeyOf(request) });
    return conclude(request, publicOperation, authentication, decision);
  }

  async function guard(request: GuardRequest): Promise<GuardResult> {
    try {
      const admitted = await admit(request, false);
      if ('response' in admitted) return { allowed: false, response: admitted.response };
      return { allowed: true, principal: admitted.principal as Principal, headers: admitted.headers };
    } catch (error) {
      const response = isPetstoreError(error) ? failures.failedAnswer(error, request, {}) : failures.internalAnswer(error, request, {});
      return { allowed: false, response };
    }
  }

  return { admit, guard };
}

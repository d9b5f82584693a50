/**
 * Admission, steps 1–3 of the pipeline (see pipeline.ts): authentication, then rate limiting — charged to the
 * key, or to the caller without one — then the refusals: 429 over the limit (`rate_limited` or
 * `temporarily_banned`, with `Retry-After`), 431 when the server dropped header fields, 401 without a valid
 * key (except for public operations). `Petstore.guard` is admission alone, for the host's own routes.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#order-of-checks
 */
import { LRUCache } from 'lru-cache';
import { hashApiKey, type ApiKeyStore, type FindPrincipalContext } from '../auth/api-key.js';
import { bearerChallenge, readBearerCredential } from '../auth/bearer.js';
import type { Principal } from '../auth/principal.js';
import { isPetstoreError } from '../errors.js';
import { UNKNOWN_CLIENT_ADDRESS, normalizeClientAddress } from '../rate-limit/client-address.js';
import { PetstoreError } from '../errors.js';
import { assertCost, createRateLimitEngine, type RateLimitDecision, type RateLimitOwner, type RateLimitPeek } from '../rate-limit/engine.js';
import { errorAnswer, eventFor, type FailureAnswers } from './answers.js';
import { requestChannel, traceStoreCall, type ApiKeyRefusalReason, type AuthFailureReason, type PetstoreRequestContext } from '../diagnostics.js';
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

/** Options of `Petstore.guard` for one call. */
export interface GuardOptions {
  /** Units this call charges, a whole number ≥ 1. Default: `rateLimit.cost.guard` (default 1). */
  cost?: number;
}

/**
 * Whose limits `petstore.rateLimits` reads or resets: an API key by its `keyId` (its account's record: the
 * windows all the account's keys share, and — for `peek` — this key's ban), an account by `accountId` (the
 * windows and every banned key), or a caller without a valid key by its client address (normalised like a
 * request's: IPv6 grouped by `rateLimit.ipv6Subnet`) or by the key `rateLimit.anonymousKey` answered for it.
 */
export type PetstoreRateLimitSubject = { keyId: string } | { accountId: string } | { clientAddress: string } | { anonymousKey: string };

/**
 * The operator's view of the rate limits: read (`peek`) or clear (`reset`) one caller's windows and bans. Never
 * exposed over HTTP by the library: call it from your own admin code.
 */
export interface PetstoreRateLimits {
  /**
   * The caller's windows (units used and left, reset times) and live bans with their ends, charging nothing.
   * @throws PetstoreError `not_found` for a `keyId` the API-key store does not know; `service_unavailable`
   *   (with `retryAfterSeconds`) when the rate-limit store fails; TypeError for a `keyId` when the API-key store
   *   has no `findByKeyId`.
   */
  peek(subject: PetstoreRateLimitSubject): Promise<RateLimitPeek>;
  /**
   * Clears the caller's record: for a key or an account, the account's windows (shared by its keys) and the bans
   * of all its keys; for an anonymous caller, its windows and ban. This instance obeys it from the next request;
   * other instances as their store allows (a Redis store's block cache: within `blockCache.maxAgeMs`, 1 s by default).
   * Fail-open insurance stores (per process) are not reset.
   * @throws as {@link PetstoreRateLimits.peek}.
   */
  reset(subject: PetstoreRateLimitSubject): Promise<void>;
}

/** The admission of one petstore. */
export interface Admitter {
  /**
   * Steps 1–3 for a request charged `cost` units; `publicOperation` spares it the 401 (it is still rate
   * limited). A failing store rejects (the caller answers it). `trace`, the request's diagnostics context when
   * the request channel has subscribers, gets the caller, the rate-limit outcome and the 401's reason.
   * `onAuthenticated` is called once a valid key is known, just before its charge is sent, so that the operation's
   * own first read can go out beside the charge (it is called for a request that may still get a 429).
   */
  admit(
    request: GuardRequest,
    publicOperation: boolean,
    cost: number,
    trace?: PetstoreRequestContext,
    onAuthenticated?: () => void,
  ): Promise<Admission>;
  /** Steps 1–3 for a host route, failures answered too. Never throws but for a wrong `cost` (TypeError). */
  guard(request: GuardRequest, options?: GuardOptions): Promise<GuardResult>;
  /** `petstore.rateLimits`. */
  rateLimits: PetstoreRateLimits;
}

/**
 * The outcome of authentication: the principal of a valid key; `presented` when a credential was sent; without a
 * principal, why (`failure`).
 */
interface Authentication {
  principal?: Principal;
  presented: boolean;
  failure?: AuthFailureReason;
}
const NOT_PRESENTED: Authentication = Object.freeze({ presented: false, failure: 'missing' });
const MALFORMED: Authentication = Object.freeze({ presented: true, failure: 'malformed' });
const PRESENTED_INVALID: Authentication = Object.freeze({ presented: true, failure: 'unknown' });
const REFUSED: Readonly<Record<ApiKeyRefusalReason, Authentication>> = Object.freeze({
  revoked: Object.freeze({ presented: true, failure: 'revoked' }),
  expired: Object.freeze({ presented: true, failure: 'expired' }),
});

/** A key lookup, traced on the store channel while it has subscribers. */
function findPrincipal(store: ApiKeyStore, digest: Buffer, context: FindPrincipalContext | undefined): Promise<Principal | undefined> {
  return traceStoreCall(store.backend, 'find_key', () => store.findPrincipal(digest, context));
}

/**
 * The authentication of a known key the stores refused: `revoked` or `expired` when a store says so
 * (`ApiKeyStore.refusalReason`), else `unknown`. Asked only while the request channel has subscribers.
 */
function refusedAuthentication(stores: readonly ApiKeyStore[], digest: Buffer): Authentication {
  if (!requestChannel.hasSubscribers) return PRESENTED_INVALID;
  for (const store of stores) {
    const reason = store.refusalReason?.(digest);
    if (reason !== undefined) return REFUSED[reason];
  }
  return PRESENTED_INVALID;
}
const CACHED_ONLY: FindPrincipalContext = Object.freeze({ cachedOnly: true });

/**
 * A request's turn to have a key looked up that its store knows nothing of (see `reserveLookup`), held from
 * the lookup until the request's anonymous charge is known; `release` is set while it is held.
 */
interface LookupTurn {
  release?: () => void;
}

/**
 * Most callers without a valid key remembered as refused by the anonymous rate limit (see `refusedAnonymous`
 * in createAdmission); past it the least recently refused is forgotten first.
 */
export const MAX_REFUSED_ANONYMOUS_CALLERS = 10_000;

export function createAdmission(options: ResolvedOptions, failures: FailureAnswers): Admitter {
  const { apiKeys, realm, onEvent, warn, clock, costs } = options;
  const { anonymousKey, cost: _costs, ...rateLimit } = options.rateLimit;
  const ipv6Subnet = rateLimit.ipv6Subnet;
  const limiter = createRateLimitEngine({ onStoreError: options.onInternalError, ...rateLimit, clock });
  // One store that checks no format: the common case, asked without the loop.
  const onlyStore: ApiKeyStore | undefined = apiKeys.length === 1 && apiKeys[0]?.acceptsKey === undefined ? apiKeys[0] : undefined;

  /**
   * Callers without a valid key that the anonymous rate limit refused (rate limited or banned), by their
   * anonymous key, each until its `Retry-After` ends (timed by the petstore's clock); an admitted anonymous
   * request removes its caller. While a caller is here, a key it presents is looked up in the API-key stores'
   * memory only (`cachedOnly`): a flood of well-formed unknown keys from one address stops reaching the key
   * store once the address is refused, at the cost that a valid key this instance never accepted is refused
   * (429, charged to the address) from that address until its refusal ends.
   */
  // maxSize, with a size of 1 per entry, bounds the entry count as `max` would, but allocates as entries come:
  // `max` makes lru-cache allocate its arrays for every entry when the cache is created (BENCHMARKS.md,
  // "Memory store").
  const refusedAnonymous = new LRUCache<string, number>({ maxSize: MAX_REFUSED_ANONYMOUS_CALLERS, sizeCalculation: () => 1, ttlResolution: 0, perf: { now: () => clock.now() } });

  /**
   * Per caller without a valid key (anonymous key), the last turn in its queue of lookups of keys the stores
   * know nothing of: one at a time, each held until its anonymous charge is known, so a burst of made-up keys
   * costs the lookups that sent one at a time would (the anonymous limit, then the refused request), not one
   * per request. An entry lives while a request of the caller holds or awaits a turn.
   */
  const lookupQueues = new Map<string, Promise<void>>();

  function callerKeyOf(request: GuardRequest): string {
    const key = anonymousKey === undefined ? normalizeClientAddress(request.clientAddress, ipv6Subnet) : anonymousKey(request);
    return key ?? UNKNOWN_CLIENT_ADDRESS;
  }
  function isRefused(callerKey: string): boolean {
    const refusedUntilMs = refusedAnonymous.get(callerKey);
    return refusedUntilMs !== undefined && refusedUntilMs > clock.now();
  }

  /** Waits for the request's turn to look up an unheard-of key; `false` when its caller is refused by then. */
  async function reserveLookup(request: GuardRequest, turn: LookupTurn): Promise<boolean> {
    if (turn.release !== undefined) return true; // held already (the key is asked of a second store)
    const callerKey = callerKeyOf(request);
    const previous = lookupQueues.get(callerKey);
    let resolve: () => void = () => undefined;
    const mine = new Promise<void>((resolveTurn) => (resolve = resolveTurn));
    lookupQueues.set(callerKey, mine);
    turn.release = () => {
      turn.release = undefined;
      if (lookupQueues.get(callerKey) === mine) lookupQueues.delete(callerKey);
      resolve();
    };
    if (previous !== undefined) await previous;
    if (!isRefused(callerKey)) return true;
    turn.release();
    return false;
  }

  /**
   * The lookup context of a request's key: cached only while its caller is refused as anonymous, else a lookup of
   * an unheard-of key waits for the caller's turn.
   */
  function lookupContext(request: GuardRequest, turn: LookupTurn): FindPrincipalContext {
    if (refusedAnonymous.size > 0 && isRefused(callerKeyOf(request))) return CACHED_ONLY;
    return { reserveLookup: () => reserveLookup(request, turn) };
  }

  /** Step 1: who is calling. A lookup turn it takes is put in `turn`, for the caller to release. */
  async function authenticate(request: GuardRequest, turn: LookupTurn): Promise<Authentication> {
    const credential = readBearerCredential(request.headers['authorization']);
    if (credential.kind === 'missing') return NOT_PRESENTED;
    if (credential.kind === 'malformed') return MALFORMED;
    const token = credential.token;
    if (onlyStore !== undefined) {
      const onlyDigest = hashApiKey(token);
      const principal = await findPrincipal(onlyStore, onlyDigest, lookupContext(request, turn));
      return principal ? { principal, presented: true } : refusedAuthentication(apiKeys, onlyDigest);
    }
    // Each store that accepts the key's format, in order; the key is hashed once, and only if one does.
    let digest: Buffer | undefined;
    let context: FindPrincipalContext | undefined;
    for (const store of apiKeys) {
      if (store.acceptsKey !== undefined && !store.acceptsKey(token)) continue;
      if (digest === undefined) {
        digest = hashApiKey(token);
        context = lookupContext(request, turn);
      }
      const principal = await findPrincipal(store, digest, context);
      if (principal) return { principal, presented: true };
    }
    return digest === undefined ? PRESENTED_INVALID : refusedAuthentication(apiKeys, digest);
  }

  /** Remembers or forgets an anonymous caller as refused, by the decision of its request. */
  function noteAnonymous(key: string, decision: RateLimitDecision): void {
    if (!decision.allowed) {
      const refusalMs = Math.max(1, decision.retryAfterSeconds ?? 1) * 1000;
      refusedAnonymous.set(key, clock.now() + refusalMs, { ttl: refusalMs });
    } else if (refusedAnonymous.size > 0) {
      refusedAnonymous.delete(key);
    }
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
  function conclude(
    request: GuardRequest,
    publicOperation: boolean,
    authentication: Authentication,
    decision: RateLimitDecision,
    cost: number,
    trace: PetstoreRequestContext | undefined,
  ): Admission {
    const { principal, presented } = authentication;
    if (trace !== undefined) {
      if (principal !== undefined) {
        trace.keyId = principal.keyId;
        trace.accountId = principal.accountId;
        trace.plan = principal.plan;
      }
      trace.rateLimitOutcome = decision.allowed ? 'admitted' : decision.reason === 'banned' ? 'banned' : 'limited';
      trace.cost = cost;
    }
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
      if (trace !== undefined) trace.authFailure = authentication.failure ?? 'unknown';
      emitEvent({ ...eventFor(request, 'unauthorized'), presentedKey: presented }, onEvent, request.logger);
      headers['www-authenticate'] = bearerChallenge(realm, presented);
      const message = presented ? 'The API key is invalid.' : 'An API key is required: send the header Authorization: Bearer <API_KEY>.';
      return { response: errorAnswer('unauthorized', message, headers, request.method) };
    }
    return { principal, headers };
  }

  // Every store call is simply awaited: a synchronous path for stores that answer without a promise saves too
  // little to keep.
  async function admit(
    request: GuardRequest,
    publicOperation: boolean,
    cost: number,
    trace?: PetstoreRequestContext,
    onAuthenticated?: () => void,
  ): Promise<Admission> {
    const turn: LookupTurn = {};
    try {
      const authentication = await authenticate(request, turn);
      const principal = authentication.principal;
      const consumeOptions = cost === 1 ? undefined : { cost };
      if (principal) {
        turn.release?.(); // a valid key: charged to its account, not to the caller's anonymous budget
        onAuthenticated?.();
        return conclude(request, publicOperation, authentication, await limiter.consume({ principal }, consumeOptions), cost, trace);
      }
      const key = anonymousKeyOf(request);
      const decision = await limiter.consume({ anonymousKey: key }, consumeOptions);
      noteAnonymous(key, decision);
      return conclude(request, publicOperation, authentication, decision, cost, trace);
    } finally {
      turn.release?.(); // once the anonymous charge is noted: the next lookup of this caller sees a refusal
    }
  }

  async function guard(request: GuardRequest, guardOptions?: GuardOptions): Promise<GuardResult> {
    const cost = guardOptions?.cost ?? costs.guard;
    if (guardOptions?.cost !== undefined) assertCost(cost, 'petstore.guard: cost');
    try {
      const admitted = await admit(request, false, cost);
      if ('response' in admitted) return { allowed: false, response: admitted.response };
      return { allowed: true, principal: admitted.principal as Principal, headers: admitted.headers };
    } catch (error) {
      const response = isPetstoreError(error) ? failures.failedAnswer(error, request, {}) : failures.internalAnswer(error, request, {});
      return { allowed: false, response };
    }
  }

  /** The engine's owner for an operator's subject. */
  async function ownerOf(subject: PetstoreRateLimitSubject): Promise<RateLimitOwner> {
    if (typeof subject !== 'object' || subject === null) {
      throw new TypeError('petstore.rateLimits: the subject must be { keyId }, { accountId }, { clientAddress } or { anonymousKey }');
    }
    if ('keyId' in subject) {
      const searchable = apiKeys.filter((store) => store.findByKeyId !== undefined);
      if (searchable.length === 0) {
        throw new TypeError('petstore.rateLimits: { keyId } needs an ApiKeyStore with findByKeyId(keyId); pass { accountId } instead');
      }
      // The stores in order, as for a request: the first that knows the keyId answers.
      for (const store of searchable) {
        const principal = await traceStoreCall(store.backend, 'find_key_by_id', async () => store.findByKeyId?.(subject.keyId));
        if (principal !== undefined) return { accountId: principal.accountId, keyId: principal.keyId };
      }
      throw new PetstoreError('not_found', `No API key has the keyId ${JSON.stringify(String(subject.keyId).slice(0, 60))}.`);
    }
    if ('accountId' in subject) return { accountId: subject.accountId };
    if ('anonymousKey' in subject) return { anonymousKey: subject.anonymousKey };
    if ('clientAddress' in subject) return { clientAddress: subject.clientAddress };
    throw new TypeError('petstore.rateLimits: the subject must be { keyId }, { accountId }, { clientAddress } or { anonymousKey }');
  }

  const rateLimits: PetstoreRateLimits = {
    peek: async (subject) => limiter.peek(await ownerOf(subject)),
    reset: async (subject) => limiter.reset(await ownerOf(subject)),
  };

  return { admit, guard, rateLimits };
}

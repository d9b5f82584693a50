/**
 * The rate-limit engine: picks the windows for a caller, asks the store to consume them atomically, and
 * turns the outcome into headers.
 */
import type { PlanLimits, PlanName, Principal } from '../auth/principal.js';
import { systemClock, type Clock } from '../clock.js';
import { DEFAULT_IPV6_SUBNET, normalizeClientAddress } from './client-address.js';
import { RateLimiterOptionsSchema, assertOptions } from '../options.js';
import { PetstoreError } from '../errors.js';
import { traceStoreCall } from '../diagnostics.js';
import { rateLimitHeaders, retryAfterSeconds, standardRateLimitHeaders } from './headers.js';
import { DEFAULT_ANONYMOUS_LIMITS, DEFAULT_BAN_POLICY, DEFAULT_PLAN_LIMITS, assertPlanLimits, windowsForLimits, type PlanPolicy } from './plans.js';
import type {
  BanPolicy,
  ConsumeRequest,
  ConsumeResult,
  RateLimitAlgorithm,
  RateLimitSnapshot,
  RateLimitStore,
  RateLimitWindow,
  WindowUsage,
} from './types.js';

/** Options of {@link createRateLimiter}. */
export interface RateLimiterOptions {
  /**
   * Store for callers with a valid API key: one record per account (`account:<accountId>`), shared by its keys.
   * Its `consume`, `peek` and `reset` are all required (checked at creation).
   */
  store: RateLimitStore;
  /**
   * Store for callers without a valid key (records `anon:<address>`). Default: a separate, empty store of the same
   * kind and bounds, from `store.newStore()` (the memory store has it), so a flood of anonymous addresses
   * cannot evict the counters of paying keys from a bounded store; `store` itself when it has no `newStore`
   * (a shared store such as Redis, where keys are not evicted for lack of room).
   */
  anonymousStore?: RateLimitStore;
  /**
   * The algorithm every window counts by, unless its plan names another (see {@link RateLimitAlgorithm}):
   * `fixed` (default), `sliding` or `gcra`. The store must list it in its `algorithms` (checked at creation).
   * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#algorithms
   */
  algorithm?: RateLimitAlgorithm;
  /**
   * Limits per plan, each optionally with its own `algorithm`; missing plans fall back to
   * {@link DEFAULT_PLAN_LIMITS} (counted by `algorithm`). A key with custom `limits` counts by its plan's algorithm.
   */
  plans?: Partial<Record<PlanName, PlanPolicy>>;
  /**
   * Limits per client address for callers without a valid key, optionally with their own `algorithm`. Default
   * {@link DEFAULT_ANONYMOUS_LIMITS}, counted by `algorithm`.
   */
  anonymous?: PlanPolicy;
  /** Temporary ban policy, or `false` to turn bans off. Default {@link DEFAULT_BAN_POLICY}. */
  ban?: BanPolicy | false;
  /** Source of time (Unix epoch ms). Default: the system clock. */
  clock?: Clock;
  /** What happens when the store fails (throws, e.g. unreachable or timed out). Default: fail closed. */
  onStoreFailure?: StoreFailurePolicy;
  /** Called with every store failure, for logging and metrics. */
  onStoreError?: (error: unknown) => void;
  /**
   * Also send the standard `RateLimit-Policy` and `RateLimit` headers of
   * draft-ietf-httpapi-ratelimit-headers-11 (see `standardRateLimitHeaders`). Default `false`; the
   * `X-RateLimit-*` headers are always sent.
   * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#standard-rate-limit-headers
   */
  standardHeaders?: boolean;
  /**
   * IPv6 prefix length by which the client addresses of anonymous subjects (`consume({ clientAddress })`) are
   * grouped, 1–128. Default 64.
   */
  ipv6Subnet?: number;
}

/**
 * What the engine does when the rate-limit store fails.
 *
 * - `fail-closed` (default): the request is refused with 503 `service_unavailable` and `Retry-After:
 *   retryAfterSeconds` (default 5); nothing is executed.
 * - `fail-open`: the request is charged to `insuranceStore` instead — a per-process store (e.g.
 *   `memoryRateLimitStore()`), so each process still enforces the limits on its own and the rate-limit headers
 *   are still sent — and proceeds when that admits it. Only its `consume` is used: `peek` and `reset` read and
 *   clear the shared store alone.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#store-failures
 */
export type StoreFailurePolicy =
  | { mode: 'fail-closed'; retryAfterSeconds?: number }
  | { mode: 'fail-open'; insuranceStore: Pick<RateLimitStore, 'consume' | 'algorithms'> };

/** Default `Retry-After` of a fail-closed 503, in seconds. */
export const DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS = 5;

/**
 * Who a request is charged to: a principal (valid key); or, without a valid key, a client address
 * (normalised: IPv6 grouped by `ipv6Subnet`) or an anonymous key chosen by the caller, used as it is.
 */
export type RateLimitSubject =
  | { principal: Principal }
  | { clientAddress: string | undefined }
  | { anonymousKey: string };

/**
 * Whose limits `peek` and `reset` read or clear: an account (its record is shared by all its keys; with
 * `keyId`, `peek` reports that key's ban only), or a caller without a valid key, by client address (normalised
 * like a request's: IPv6 grouped by `ipv6Subnet`) or by the anonymous key the caller chose.
 */
export type RateLimitOwner = { accountId: string; keyId?: string } | { clientAddress: string | undefined } | { anonymousKey: string };

/**
 * What `peek` answers: the owner's windows as of `nowMs` (units used and remaining, reset times, the limits they
 * were last charged with; `used` 0 for a window whose period has ended), and the live bans with their ends — of
 * the account's keys (`keyId`), or of the anonymous caller (no `keyId`). Nothing was charged.
 */
export interface RateLimitPeek {
  /** When the record was read, Unix epoch ms (the store's own clock where it decides by one). */
  nowMs: number;
  windows: WindowUsage[];
  bans: Array<{ keyId?: string; bannedUntilMs: number }>;
}

/** Options of {@link RateLimiter.consume}. */
export interface ConsumeOptions {
  /** Units charged to every window; a whole number ≥ 1. Default 1. */
  cost?: number;
}

/**
 * The engine's answer for one request.
 *
 * `headers`: lowercase header names → values, for every answer; they count units. `retryAfterSeconds` is set
 * when rejected. `result` is the store's raw outcome.
 */
export interface RateLimitDecision {
  allowed: boolean;
  reason: 'rate_limited' | 'banned' | undefined;
  headers: Record<string, string>;
  retryAfterSeconds: number | undefined;
  result: ConsumeResult;
}

/** The rate-limit engine: `consume` charges a request for a subject; `peek` and `reset` are the operator's. */
export interface RateLimiter {
  /**
   * Charges `cost` units (default 1) to every window of the subject, all or nothing: a principal is charged to
   * its account's record (`account:<accountId>`), its key being the ban subject; a caller without a valid key to
   * its own (`anon:<address or key>`).
   * @throws PetstoreError `service_unavailable` (with `retryAfterSeconds`) when the store fails and the policy
   *   is fail-closed; whatever the insurance store throws under fail-open; TypeError when the principal
   *   carries invalid custom `limits` or `cost` is not a whole number ≥ 1.
   */
  consume(subject: RateLimitSubject, options?: ConsumeOptions): Promise<RateLimitDecision>;
  /**
   * Reads an owner's windows and bans without charging anything (see {@link RateLimitPeek}). The shared store
   * only: a fail-open insurance store (per process, used while the shared store is down) is not read.
   * @throws PetstoreError `service_unavailable` (with `retryAfterSeconds`) when the store fails.
   */
  peek(owner: RateLimitOwner): Promise<RateLimitPeek>;
  /**
   * Clears an owner's record: for an account, the windows its keys share and the bans of all its keys (also
   * when given a `keyId`); for an anonymous caller, its windows and ban. The shared store only (not a fail-open
   * insurance store).
   * @throws PetstoreError `service_unavailable` (with `retryAfterSeconds`) when the store fails.
   */
  reset(owner: RateLimitOwner): Promise<void>;
}

/**
 * Creates the rate-limit engine. It sees no request: who is charged is the subject its caller passes to
 * `consume` — a principal, a client address, or an anonymous key the caller chose (what `createPetstore`'s
 * `rateLimit.anonymousKey` answers is passed so).
 * @throws TypeError naming the option, on a missing store, invalid limits, ban or failure policy, or an option
 *   the engine does not have (`anonymousKey` among them: pass `consume({ anonymousKey })` instead).
 */
export function createRateLimiter(options: RateLimiterOptions): RateLimiter {
  assertOptions(RateLimiterOptionsSchema, options, 'createRateLimiter');
  return createRateLimitEngine(options);
}

/** Checks a cost: a whole number ≥ 1. */
export function assertCost(cost: unknown, what: string): asserts cost is number {
  if (!Number.isSafeInteger(cost) || (cost as number) < 1) throw new TypeError(`${what} must be a whole number >= 1, got ${String(cost)}`);
}

/**
 * The engine without the check of its options, which the caller makes (`createRateLimiter`, `createPetstore`).
 * Internal: not exported from the package.
 */
export function createRateLimitEngine(options: RateLimiterOptions): RateLimiter {
  const defaultAlgorithm = options.algorithm ?? 'fixed';
  const planLimits: Record<string, PlanPolicy> = { ...DEFAULT_PLAN_LIMITS, ...options.plans };
  const algorithmOf = (policy: PlanPolicy): RateLimitAlgorithm => policy.algorithm ?? defaultAlgorithm;
  const anonymousPolicy = options.anonymous ?? DEFAULT_ANONYMOUS_LIMITS;
  for (const [plan, policy] of Object.entries(planLimits)) assertPlanLimits(policy, `rateLimit.plans.${plan}`, algorithmOf(policy));
  assertPlanLimits(anonymousPolicy, 'rateLimit.anonymous', algorithmOf(anonymousPolicy));
  const anonymousWindows = frozenWindows(anonymousPolicy, algorithmOf(anonymousPolicy));
  const givenBan = options.ban === false ? undefined : (options.ban ?? DEFAULT_BAN_POLICY);
  const ipv6Subnet = options.ipv6Subnet ?? DEFAULT_IPV6_SUBNET;
  // A frozen copy, like the windows: stores may build what they send for a policy once (the Redis store does).
  const ban = givenBan === undefined ? undefined : Object.freeze({ ...givenBan });
  // Windows are built once per plan and once per custom-limits object (key stores hand out the same
  // principal objects), not per request. Custom limits are checked when first seen, so a broken record
  // fails closed (500) instead of leaving a window unlimited.
  const planWindows = new Map(
    Object.entries(planLimits).map(([plan, limits]) => [plan, frozenWindows(limits, algorithmOf(limits))] as const),
  );
  const customWindows = new WeakMap<PlanLimits, RateLimitWindow[]>();
  function windowsOf(principal: Principal): RateLimitWindow[] {
    const custom = principal.limits;
    if (custom === undefined) {
      const windows = planWindows.get(principal.plan);
      if (windows === undefined) throw new TypeError(`principal.plan "${String(principal.plan)}" is not a plan`);
      return windows;
    }
    let windows = customWindows.get(custom);
    if (windows === undefined) {
      // Custom limits count by the algorithm of the principal's plan.
      const plan = planLimits[principal.plan];
      const algorithm = plan === undefined || !Object.hasOwn(planLimits, principal.plan) ? defaultAlgorithm : algorithmOf(plan);
      assertPlanLimits(custom, 'principal.limits', algorithm);
      windows = frozenWindows(custom, algorithm);
      customWindows.set(custom, windows);
    }
    return windows;
  }
  const anonymousStore = options.anonymousStore ?? options.store.newStore?.() ?? options.store;
  const { clock = systemClock, store, standardHeaders = false, onStoreError } = options;
  const failure = options.onStoreFailure ?? { mode: 'fail-closed' };
  // A store that does not implement an algorithm would count its windows as fixed ones: refused here instead.
  const used = new Set<RateLimitAlgorithm>([defaultAlgorithm, ...Object.values(planLimits).map(algorithmOf)]);
  const usedByAnonymous = algorithmOf(anonymousPolicy);
  assertImplements(store, 'rateLimit.store', used);
  assertImplements(anonymousStore, options.anonymousStore === undefined ? 'the anonymous store (rateLimit.store.newStore())' : 'rateLimit.anonymousStore', new Set([usedByAnonymous]));
  if (failure.mode === 'fail-open') {
    assertImplements(failure.insuranceStore, 'rateLimit.onStoreFailure.insuranceStore', new Set([...used, usedByAnonymous]));
  }
  const failClosedRetryAfterSeconds =
    failure.mode === 'fail-closed'
      ? (failure.retryAfterSeconds ?? DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS)
      : DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS;

  function unavailable(error: unknown): PetstoreError {
    return new PetstoreError('service_unavailable', 'The rate-limit store is unavailable; retry later.', {
      cause: error,
      retryAfterSeconds: failClosedRetryAfterSeconds,
    });
  }

  /** One consume of a store: every one the engine makes goes through here, traced while the store channel has subscribers. */
  function consumeIn(consumeStore: Pick<RateLimitStore, 'consume' | 'backend'>, key: string, request: ConsumeRequest): Promise<ConsumeResult> {
    return traceStoreCall(consumeStore.backend, 'consume', () => consumeStore.consume(key, request));
  }

  /** What a failed consume on the primary store turns into, as the failure policy says. */
  async function onFailure(error: unknown, key: string, request: ConsumeRequest): Promise<RateLimitDecision> {
    onStoreError?.(error);
    if (failure.mode === 'fail-open') return decisionOf(await consumeIn(failure.insuranceStore, key, request), request.cost);
    throw unavailable(error);
  }

  function decisionOf(result: ConsumeResult, cost: number): RateLimitDecision {
    return {
      allowed: result.allowed,
      reason: result.allowed ? undefined : result.reason,
      headers: standardHeaders
        ? { ...rateLimitHeaders(result, cost), ...standardRateLimitHeaders(result, cost) }
        : rateLimitHeaders(result, cost),
      retryAfterSeconds: retryAfterSeconds(result, cost),
      result,
    };
  }

  // The store key and windows of each principal, found once (principals from a key store are long-lived,
  // frozen objects): one lookup per request.
  const principalPlans = new WeakMap<Principal, { key: string; windows: RateLimitWindow[] }>();
  function planOf(principal: Principal): { key: string; windows: RateLimitWindow[] } {
    let plan = principalPlans.get(principal);
    if (plan === undefined) {
      plan = { key: `account:${principal.accountId}`, windows: windowsOf(principal) };
      // Only a frozen principal cannot change plan or limits behind the cache's back.
      if (Object.isFrozen(principal) && (principal.limits === undefined || Object.isFrozen(principal.limits))) {
        principalPlans.set(principal, plan);
      }
    }
    return plan;
  }

  const anonymousRecordKey = (owner: { clientAddress: string | undefined } | { anonymousKey: string }): string =>
    'anonymousKey' in owner ? `anon:${owner.anonymousKey}` : `anon:${normalizeClientAddress(owner.clientAddress, ipv6Subnet)}`;

  /** The store and record key of an owner. */
  function recordOf(owner: RateLimitOwner): { store: RateLimitStore; key: string } {
    if (typeof owner !== 'object' || owner === null) throw new TypeError('the owner must be { accountId, keyId? }, { clientAddress } or { anonymousKey }');
    if ('accountId' in owner) {
      if (typeof owner.accountId !== 'string' || owner.accountId === '') throw new TypeError('accountId must be a non-empty string');
      return { store, key: `account:${owner.accountId}` };
    }
    if ('anonymousKey' in owner && typeof owner.anonymousKey !== 'string') throw new TypeError('anonymousKey must be a string');
    if (!('anonymousKey' in owner) && !('clientAddress' in owner)) {
      throw new TypeError('the owner must be { accountId, keyId? }, { clientAddress } or { anonymousKey }');
    }
    return { store: anonymousStore, key: anonymousRecordKey(owner) };
  }

  // An async function: whatever it throws (invalid custom limits, a wrong cost) is a rejection.
  async function consume(subject: RateLimitSubject, consumeOptions?: ConsumeOptions): Promise<RateLimitDecision> {
    const cost = consumeOptions?.cost ?? 1;
    if (cost !== 1) assertCost(cost, 'cost');
    const nowMs = clock.now();
    let primary: RateLimitStore;
    let key: string;
    let request: ConsumeRequest;
    if ('principal' in subject) {
      const plan = planOf(subject.principal);
      primary = store;
      key = plan.key;
      request = { windows: plan.windows, cost, nowMs, ban, banSubject: subject.principal.keyId };
    } else {
      primary = anonymousStore;
      key = anonymousRecordKey(subject);
      request = { windows: anonymousWindows, cost, nowMs, ban, banSubject: '' };
    }
    let result: ConsumeResult;
    try {
      // Awaited, so a store that throws instead of rejecting is handled alike.
      result = await consumeIn(primary, key, request);
    } catch (error) {
      return onFailure(error, key, request);
    }
    return decisionOf(result, cost);
  }

  async function peek(owner: RateLimitOwner): Promise<RateLimitPeek> {
    const { store: ownerStore, key } = recordOf(owner);
    let snapshot: RateLimitSnapshot;
    try {
      const nowMs = clock.now();
      snapshot = await traceStoreCall(ownerStore.backend, 'peek', () => ownerStore.peek(key, nowMs));
    } catch (error) {
      onStoreError?.(error);
      throw unavailable(error);
    }
    const onlyKey = 'accountId' in owner ? owner.keyId : undefined;
    const bans: RateLimitPeek['bans'] = [];
    for (const { subject, bannedUntilMs } of snapshot.bans) {
      if (!('accountId' in owner)) bans.push({ bannedUntilMs });
      else if (onlyKey === undefined || subject === onlyKey) bans.push({ keyId: subject, bannedUntilMs });
    }
    return { nowMs: snapshot.nowMs, windows: snapshot.windows, bans };
  }

  async function reset(owner: RateLimitOwner): Promise<void> {
    const { store: ownerStore, key } = recordOf(owner);
    try {
      await traceStoreCall(ownerStore.backend, 'reset', () => ownerStore.reset(key));
    } catch (error) {
      onStoreError?.(error);
      throw unavailable(error);
    }
  }

  return { consume, peek, reset };
}

/** The windows of some limits, frozen: one array is shared by every request of a plan. */
function frozenWindows(limits: PlanLimits, algorithm: RateLimitAlgorithm): RateLimitWindow[] {
  return Object.freeze(windowsForLimits(limits, algorithm).map((window) => Object.freeze(window))) as RateLimitWindow[];
}

/**
 * Checks that a store implements every algorithm it will be asked for (`store.algorithms`; absent: `fixed` only).
 * @throws TypeError naming the store and the algorithm.
 */
function assertImplements(store: Pick<RateLimitStore, 'algorithms'>, what: string, algorithms: ReadonlySet<RateLimitAlgorithm>): void {
  const implemented: readonly RateLimitAlgorithm[] = store.algorithms ?? ['fixed'];
  for (const algorithm of algorithms) {
    if (!implemented.includes(algorithm)) {
      throw new TypeError(`${what} does not implement the ${algorithm} algorithm (it implements: ${implemented.join(', ')}); choose a store that lists it in algorithms`);
    }
  }
}

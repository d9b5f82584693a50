/**
 * An in-test {@link RateLimitStore}: a Map of states to which {@link decideConsume} is applied in one
 * synchronous step, so concurrent calls are atomic per key. For this package's own tests only; not exported.
 */
import { decideConsume, peekState, type RateLimitState } from '../src/rate-limit/decide.js';
import { RATE_LIMIT_ALGORITHMS, type RateLimitAlgorithm, type RateLimitStore } from '../src/rate-limit/types.js';

/** A {@link RateLimitStore} that also tells which keys it holds. */
export interface TestRateLimitStore extends RateLimitStore {
  /** Keys that currently hold (unexpired) state. */
  keys(nowMs: number): string[];
  /** Remaining lifetime of a key at `nowMs`: `undefined` when absent, `Infinity` after {@link dropTtl}. */
  ttlMs(key: string, nowMs: number): number | undefined;
  /** Removes a key's expiry, as a lost TTL would. */
  dropTtl(key: string): void;
  /** The state held for a key (unexpired at `nowMs`), as the store keeps it. */
  stateOf(key: string, nowMs: number): RateLimitState | undefined;
  /** A copy of the state held for a key, expired or not (the model comparison's `readState`). */
  readState(key: string): Promise<RateLimitState | undefined>;
}

/**
 * Creates an empty in-memory store. A key's state is dropped once the decision's `expiresAtMs` is reached,
 * so tests also catch an `expiresAtMs` that comes too early. `decide` replaces `decideConsume` (the conformance
 * meta-tests give it broken decisions); `algorithms` is what it says it implements (default: all).
 */
export function testRateLimitStore(options: { decide?: typeof decideConsume; algorithms?: readonly RateLimitAlgorithm[] } = {}): TestRateLimitStore {
  const decide = options.decide ?? decideConsume;
  const entries = new Map<string, { state: RateLimitState; expiresAtMs: number }>();
  return {
    algorithms: options.algorithms ?? RATE_LIMIT_ALGORITHMS,
    consume(key, request) {
      const stored = entries.get(key);
      const previous = stored !== undefined && request.nowMs < stored.expiresAtMs ? stored.state : undefined;
      const decision = decide(previous, request);
      entries.set(key, { state: decision.state, expiresAtMs: decision.expiresAtMs });
      return Promise.resolve(decision.result);
    },
    peek(key, nowMs) {
      const stored = entries.get(key);
      return Promise.resolve(peekState(stored !== undefined && nowMs < stored.expiresAtMs ? stored.state : undefined, nowMs));
    },
    reset(key) {
      entries.delete(key);
      return Promise.resolve();
    },
    readState(key) {
      const stored = entries.get(key);
      return Promise.resolve(stored === undefined ? undefined : structuredClone(stored.state));
    },
    stateOf(key, nowMs) {
      const stored = entries.get(key);
      return stored !== undefined && nowMs < stored.expiresAtMs ? stored.state : undefined;
    },
    ttlMs(key, nowMs) {
      const entry = entries.get(key);
      return entry === undefined ? undefined : entry.expiresAtMs - nowMs;
    },
    dropTtl(key) {
      const entry = entries.get(key);
      if (entry !== undefined) entry.expiresAtMs = Number.POSITIVE_INFINITY;
    },
    keys(nowMs) {
      return [...entries].filter(([, entry]) => nowMs < entry.expiresAtMs).map(([key]) => key);
    },
  };
}

/**
 * `peek` and `reset` for a store written inline for one test of `consume` alone: both reject, so a test that
 * reaches them by mistake fails loudly.
 */
export const NO_PEEK_RESET: Pick<RateLimitStore, 'peek' | 'reset'> = Object.freeze({
  peek: () => Promise.reject(new Error('peek is not part of this test store')),
  reset: () => Promise.reject(new Error('reset is not part of this test store')),
});

/**
 * How both stores call Redis: a deadline on every call, and one rule for what a failure means.
 */
import { DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS, PetstoreError } from '@petstore/core';

/** Default key prefix of both stores. */
export const DEFAULT_KEY_PREFIX = 'petstore:';

/** Default deadline of one store call, in ms: the `callTimeoutMs` option of both stores. */
export const DEFAULT_CALL_TIMEOUT_MS = 1000;

/**
 * Redis error replies that mean "not now" rather than "never": the server is loading, failing over,
 * running a long script, out of memory, or a cluster slot is moving. Any other error reply (a wrong-typed
 * key, a script error) is a configuration or programming fault and is not retried.
 */
const TRANSIENT_REPLY_PREFIXES = ['LOADING', 'BUSY', 'READONLY', 'MASTERDOWN', 'TRYAGAIN', 'CLUSTERDOWN', 'NOREPLICAS', 'OOM'];

/**
 * The cause of a store failure when Redis did not answer within the deadline. The command may still run
 * later on the server: a timed-out create may have been written. A timed-out consume is not charged: its script
 * carries the deadline and, run past it, charges nothing (it is also this error's cause when Redis answered that
 * its deadline had passed).
 */
export class RedisTimeoutError extends Error {
  override readonly name = 'RedisTimeoutError';
  /** @param callTimeoutMs the deadline that passed (the store's `callTimeoutMs`), in ms */
  constructor(readonly callTimeoutMs: number) {
    super(`Redis did not answer within callTimeoutMs (${callTimeoutMs} ms)`);
  }
}

/**
 * The cause of a failed rate-limit call when its key holds a string that is not a rate-limit record (another
 * program's value under this store's prefix, or one written by another layout): the store neither reads nor
 * overwrites it. A configuration fault, not an outage (a 500, not a 503).
 */
export class NotARecordError extends Error {
  override readonly name = 'NotARecordError';
  /** @param redisKey the key holding the value */
  constructor(readonly redisKey: string) {
    super(`The Redis key ${redisKey} holds a string that is not a rate-limit record`);
  }
}

/** Checks a `callTimeoutMs` option: a whole number of ms ≥ 1. @throws TypeError naming `callTimeoutMs`. */
export function assertCallTimeoutMs(callTimeoutMs: number): void {
  if (!Number.isSafeInteger(callTimeoutMs) || callTimeoutMs < 1) {
    throw new TypeError(`callTimeoutMs must be a whole number of milliseconds >= 1, got ${String(callTimeoutMs)}`);
  }
}

/** Checks a `keyPrefix` option: any string, empty included. */
export function assertKeyPrefix(keyPrefix: string): void {
  if (typeof keyPrefix !== 'string') throw new TypeError(`keyPrefix must be a string, got ${typeof keyPrefix}`);
}

/**
 * True when keys built as `${fullPrefix}{tag}…` (the full prefix: client-level ioredis `keyPrefix`, then the
 * store's `keyPrefix`) fall in one Redis Cluster hash slot. Redis hashes only what is between the key's first
 * `{` and the first `}` after it, unless that is empty; all such keys share everything up to the `}` of the
 * store's `{tag}`, so they differ in slot only when the first `{` of the prefix is directly followed by `}`.
 */
export function tagKeysShareSlot(fullPrefix: string): boolean {
  const open = fullPrefix.indexOf('{');
  return open === -1 || fullPrefix[open + 1] !== '}';
}

/**
 * Runs one Redis call under the deadline of {@link createDeadline}: `callTimeoutMs` from now, or `timeoutMs` when
 * given (what is left of a deadline that started earlier).
 */
export type WithDeadline = <T>(call: Promise<T>, timeoutMs?: number) => Promise<T>;

/**
 * Deadlines of `callTimeoutMs` for a store's calls: each call rejects with {@link RedisTimeoutError} when the
 * deadline passes first, and the call's own late outcome is then ignored (never an unhandled rejection). One
 * unref'd timer per call, cleared when the call settles. (ioredis's own `commandTimeout` is a client-wide option of
 * the host's client, which the store does not change; set it too if every command should have one.)
 */
export function createDeadline(callTimeoutMs: number): WithDeadline {
  return <T>(call: Promise<T>, timeoutMs = callTimeoutMs) =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new RedisTimeoutError(callTimeoutMs)), timeoutMs);
      timer.unref();
      call.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
}

/**
 * True when a failure means Redis is unreachable, too slow or temporarily unable to serve: a timeout, a
 * connection error (anything ioredis raises that is not an error reply or a {@link NotARecordError}), or a
 * transient error reply.
 */
export function isUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return true;
  if (error instanceof NotARecordError) return false;
  if (error.name !== 'ReplyError') return true;
  return TRANSIENT_REPLY_PREFIXES.some((prefix) => error.message.startsWith(prefix));
}

/**
 * Wraps a failed call: `service_unavailable` (503, `Retry-After` of the core's
 * `DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS`, 5) when Redis is unavailable, else a plain Error (500). Both carry
 * the original failure as `cause`.
 */
export function storeFailure(error: unknown, what: string, store: string): Error {
  if (isUnavailable(error)) {
    return new PetstoreError('service_unavailable', `The ${store} is unavailable; retry later.`, {
      retryAfterSeconds: DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS,
      cause: error,
    });
  }
  return new Error(`Redis refused the ${store}'s ${what}`, { cause: error });
}

/**
 * How both stores call Redis: a deadline on every call, and one rule for what a failure means.
 */
import { PetstoreError } from '@petstore/core';

/** Default key prefix of both stores. */
export const DEFAULT_KEY_PREFIX = 'petstore:';

/** Default deadline of one store call, in ms (`timeoutMs` of both stores). */
export const DEFAULT_TIMEOUT_MS = 1000;

/** Default `Retry-After` of a `service_unavailable` answer from these stores, in seconds. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

/**
 * Redis error replies that mean "not now" rather than "never": the server is loading, failing over,
 * running a long script, out of memory, or a cluster slot is moving. Any other error reply (a wrong-typed
 * key, a script error) is a configuration or programming fault and is not retried.
 */
const TRANSIENT_REPLY_PREFIXES = ['LOADING', 'BUSY', 'READONLY', 'MASTERDOWN', 'TRYAGAIN', 'CLUSTERDOWN', 'NOREPLICAS', 'OOM'];

/**
 * The cause of a store failure when Redis did not answer within the deadline. The command may still run
 * later on the server: a timed-out consume may have been charged, a timed-out create may have been written.
 */
export class RedisTimeoutError extends Error {
  override readonly name = 'RedisTimeoutError';
  /** @param timeoutMs the deadline that passed, in ms */
  constructor(readonly timeoutMs: number) {
    super(`Redis did not answer within ${timeoutMs} ms`);
  }
}

/** Checks a `timeoutMs` option: a whole number of ms ≥ 1. */
export function assertTimeoutMs(timeoutMs: number): void {
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
    throw new TypeError(`timeoutMs must be a whole number of milliseconds >= 1, got ${String(timeoutMs)}`);
  }
}

/** Checks a `keyPrefix` option: any string, empty included. */
export function assertKeyPrefix(keyPrefix: string): void {
  if (typeof keyPrefix !== 'string') throw new TypeError(`keyPrefix must be a string, got ${typeof keyPrefix}`);
}

/** Runs one Redis call under the deadline of {@link createDeadline}. */
export type WithDeadline = <T>(call: Promise<T>) => Promise<T>;

/**
 * Deadlines of `timeoutMs` for a store's calls: each call rejects with {@link RedisTimeoutError} when the
 * deadline passes first, and the call's own late outcome is then ignored (never an unhandled rejection).
 *
 * One timer serves every call, instead of a `setTimeout`/`clearTimeout` pair per call (a third of a
 * microsecond each, on every request). Every call waits the same `timeoutMs`, so calls queued in start
 * order have their deadlines in order: the timer is armed for the oldest unsettled call; when it fires it
 * rejects every call past its deadline and is armed again for the next. Settled calls leave the queue
 * from its head as they settle. The timer is unref'd: it never keeps the process alive.
 */
export function createDeadline(timeoutMs: number): WithDeadline {
  interface Pending {
    deadlineMs: number;
    reject: (error: Error) => void;
    settled: boolean;
  }
  let queue: Pending[] = [];
  let head = 0;
  let timer: NodeJS.Timeout | undefined;

  /** Drops settled calls from the head; compacts the array once its settled prefix is most of it. */
  const dropSettled = (): void => {
    while (head < queue.length && (queue[head] as Pending).settled) head += 1;
    if (head === queue.length) {
      queue.length = 0;
      head = 0;
    } else if (head >= 1024 && head * 2 >= queue.length) {
      queue = queue.slice(head);
      head = 0;
    }
  };
  const arm = (): void => {
    dropSettled();
    const oldest = queue[head];
    if (oldest === undefined) {
      timer = undefined;
      return;
    }
    timer = setTimeout(expire, Math.max(1, Math.ceil(oldest.deadlineMs - performance.now())));
    timer.unref();
  };
  const expire = (): void => {
    const nowMs = performance.now();
    for (; head < queue.length; head += 1) {
      const pending = queue[head] as Pending;
      if (pending.settled) continue;
      if (pending.deadlineMs > nowMs) break;
      pending.settled = true;
      pending.reject(new RedisTimeoutError(timeoutMs));
    }
    arm();
  };

  /** Marks a call settled; false when its deadline already answered it. */
  const settle = (pending: Pending): boolean => {
    if (pending.settled) return false;
    pending.settled = true;
    if (pending === queue[head]) dropSettled();
    return true;
  };
  return <T>(call: Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      const pending: Pending = { deadlineMs: performance.now() + timeoutMs, reject, settled: false };
      queue.push(pending);
      if (timer === undefined) arm();
      call.then(
        (value) => settle(pending) && resolve(value),
        (error: unknown) => settle(pending) && reject(error),
      );
    });
}

/**
 * True when a failure means Redis is unreachable, too slow or temporarily unable to serve: a timeout, a
 * connection error (anything ioredis raises that is not an error reply), or a transient error reply.
 */
export function isUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return true;
  if (error.name !== 'ReplyError') return true;
  return TRANSIENT_REPLY_PREFIXES.some((prefix) => error.message.startsWith(prefix));
}

/**
 * Wraps a failed call: `service_unavailable` (503, `Retry-After: 5`) when Redis is unavailable, else a plain
 * Error (500). Both carry the original failure as `cause`.
 */
export function storeFailure(error: unknown, what: string, store: string): Error {
  if (isUnavailable(error)) {
    return new PetstoreError('service_unavailable', `The ${store} is unavailable; retry later.`, {
      retryAfterSeconds: UNAVAILABLE_RETRY_AFTER_SECONDS,
      cause: error,
    });
  }
  return new Error(`Redis refused the ${store}'s ${what}`, { cause: error });
}

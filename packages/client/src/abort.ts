/**
 * Internal timing and cancellation helpers of the client: an abortable timers-based sleep, the per-attempt
 * signal (the caller's signal plus a timeout), and a race that ends a promise's wait when a signal aborts.
 * Not exported by the package.
 */

/** `setTimeout` fires at once (with a warning) past 2^31 − 1 ms; longer delays are armed in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Calls `onFire` after `ms` milliseconds (any finite delay, chained past the `setTimeout` limit).
 * @returns a function that cancels the timer; calling it after the timer fired does nothing
 */
function startTimer(ms: number, onFire: () => void): () => void {
  let left = Math.max(0, ms);
  let handle: ReturnType<typeof setTimeout>;
  const arm = () => {
    const step = Math.min(left, MAX_TIMER_MS);
    left -= step;
    handle = setTimeout(() => (left > 0 ? arm() : onFire()), step);
  };
  arm();
  return () => clearTimeout(handle);
}

/**
 * The default `sleep`: resolves after `ms` milliseconds of real time (timers-based).
 *
 * When `signal` aborts first, the timer is cleared and the promise rejects at once with `signal.reason`;
 * an already aborted signal rejects without arming a timer.
 */
export function sleepWithTimers(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      cancel();
      reject(signal?.reason);
    };
    const cancel = startTimer(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Waits for `promise`, but rejects with `signal.reason` as soon as `signal` aborts (at once when it already
 * has), whether or not the work behind `promise` honours the signal. A later rejection of `promise` is
 * handled (and dropped), so abandoning it cannot cause an unhandled rejection.
 */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** The signal of one attempt; see {@link attemptSignal}. */
export interface AttemptSignal {
  /** Aborts when the caller's signal aborts (with its reason) or when the attempt's time is up. */
  readonly signal: AbortSignal;
  /** True once the attempt's timer fired (and the caller's signal had not aborted before). */
  readonly timedOut: boolean;
  /** Clears the timer and detaches from the caller's signal. Call it when the attempt ends, whatever the outcome. */
  dispose(): void;
}

/**
 * One attempt's signal: aborts with the caller's `reason` when `callerSignal` aborts, or with a
 * `DOMException` named `TimeoutError` after `limitMs` milliseconds.
 *
 * Behaves like `AbortSignal.any([callerSignal, AbortSignal.timeout(limitMs)])`, but the timer is cleared
 * and the listener on the caller's signal removed by `dispose()`. (`AbortSignal.any` keeps every combined
 * signal registered on a long-lived source signal in Node 20, so a shutdown signal passed to many calls
 * would grow without bound.)
 */
export function attemptSignal(callerSignal: AbortSignal | undefined, limitMs: number, timeoutMessage: string): AttemptSignal {
  const controller = new AbortController();
  let timedOut = false;
  const onCallerAbort = () => controller.abort(callerSignal?.reason);
  if (callerSignal?.aborted) onCallerAbort();
  else callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
  const cancel = startTimer(limitMs, () => {
    if (controller.signal.aborted) return;
    timedOut = true;
    controller.abort(new DOMException(timeoutMessage, 'TimeoutError'));
  });
  return {
    signal: controller.signal,
    get timedOut() {
      return timedOut;
    },
    dispose() {
      cancel();
      callerSignal?.removeEventListener('abort', onCallerAbort);
    },
  };
}

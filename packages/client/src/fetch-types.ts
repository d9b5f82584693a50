/**
 * The part of the Fetch API the client uses, typed structurally so that the global `fetch`, node-fetch v3,
 * undici's `fetch` and test fakes all fit without casts.
 */

/**
 * What the client passes as `init`: a method, plain string headers, a JSON string body for POST, and the
 * attempt's `signal`.
 */
export interface PetstoreFetchInit {
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  /**
   * Aborts when the call's `signal` aborts or the attempt runs out of time (`attemptTimeoutMs`, or what is left of
   * `retry.maxElapsedMs`). A fetch should then stop the request and reject; one that ignores it still has
   * its answer discarded, since the client stops waiting at once.
   */
  signal?: AbortSignal;
}

/** Header lookup by (case-insensitive) name, as `Headers#get`: `null` when absent. */
export interface PetstoreFetchHeaders {
  get(name: string): string | null;
}

/** The part of a Fetch `Response` the client reads. */
export interface PetstoreFetchResponse {
  readonly status: number;
  readonly headers: PetstoreFetchHeaders;
  text(): Promise<string>;
}

/**
 * A fetch implementation: called with an absolute URL string and a {@link PetstoreFetchInit}; resolves with
 * the answer whatever its status, and rejects when no answer was received or `init.signal` aborted (with any
 * error: an aborted attempt is recognised by the signal's state, not by the error's class).
 */
export type PetstoreFetch = (url: string, init: PetstoreFetchInit) => Promise<PetstoreFetchResponse>;

/**
 * The part of the Fetch API the client uses, typed structurally so that the global `fetch`, node-fetch v3,
 * undici's `fetch` and test fakes all fit without casts.
 */

/** What the client passes as `init`: a method, plain string headers, and a JSON string body for POST. */
export interface PetstoreFetchInit {
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
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
 * the answer whatever its status, and rejects only when no answer was received.
 */
export type PetstoreFetch = (url: string, init: PetstoreFetchInit) => Promise<PetstoreFetchResponse>;

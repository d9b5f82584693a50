/**
 * The client's one error class. Every failed call of a {@link PetstoreClient} rejects with it.
 */
import type { ErrorCode } from './api-types.js';

/**
 * What went wrong:
 *
 * - one of the API's error codes (`ErrorCode`, e.g. `unauthorized`, `validation_failed`,
 *   `rate_limited`, `temporarily_banned`, `service_unavailable`), taken from the Error body;
 * - `network_error`: no HTTP answer was received (connection refused or reset, DNS failure, the body could
 *   not be read); `status` is 0;
 * - `invalid_response`: an HTTP answer that is not what the API sends — an error status whose body is not
 *   an Error body (e.g. a proxy's HTML page), or a success whose body is not the expected JSON;
 * - `aborted`: the caller's `signal` aborted (before the call, during an attempt, or during a wait between
 *   attempts); `cause` is the signal's `reason`, `status` is 0. Never retried;
 * - `timeout`: the last attempt did not get its whole answer (headers and body) within the client's
 *   `attemptTimeoutMs`, or the call's `retry.maxElapsedMs` budget ran out during an attempt; `status` is 0 and
 *   `cause` is the `DOMException` named `TimeoutError` the attempt was aborted with.
 *
 * A code the server sends that this version does not know is passed through as is.
 */
export type PetstoreClientErrorCode = ErrorCode | 'network_error' | 'invalid_response' | 'aborted' | 'timeout';

/** Fields of a {@link PetstoreClientError} besides `code` and `message`. */
export interface PetstoreClientErrorDetails {
  /** HTTP status of the answer; 0 when no (complete) answer was received (`network_error`, `timeout`, `aborted`). */
  status: number;
  /**
   * How many requests this call sent, the failed one included (1 when it was not retried; 0 when the call
   * was `aborted` before sending anything).
   */
  attempts: number;
  /** Whole seconds from the answer's `Retry-After` header (RFC 9110 §10.2.3), when it had one. */
  retryAfterSeconds?: number | undefined;
  /**
   * The underlying error: the fetch implementation's error for `network_error`, the signal's `reason` for
   * `aborted`, a `TimeoutError` `DOMException` for `timeout`, a JSON SyntaxError, …
   */
  cause?: unknown;
}

/**
 * A failed call of the petstore client.
 *
 * Identify it with {@link isPetstoreClientError} (by `name` and `code`) rather than only `instanceof`: the
 * ESM and CJS builds of this package each carry their own copy of the class.
 */
export class PetstoreClientError extends Error {
  override readonly name = 'PetstoreClientError';
  /**
   * The Error body's `code`, or `network_error` / `invalid_response` / `aborted` / `timeout`; see
   * {@link PetstoreClientErrorCode}.
   */
  readonly code: PetstoreClientErrorCode;
  /** HTTP status of the (last) answer; 0 for `network_error`, `timeout` and `aborted`. */
  readonly status: number;
  /** Whole seconds the server asked to wait (`Retry-After`), when the answer carried the header. */
  readonly retryAfterSeconds: number | undefined;
  /** Requests sent by the call, retries included (0 when it was aborted before the first). */
  readonly attempts: number;

  /**
   * @param code what went wrong
   * @param message the Error body's `message`, or a description of the network or response failure
   * @param details status, attempts, Retry-After and cause
   */
  constructor(code: PetstoreClientErrorCode, message: string, details: PetstoreClientErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.code = code;
    this.status = details.status;
    this.attempts = details.attempts;
    this.retryAfterSeconds = details.retryAfterSeconds;
  }
}

/** True for a {@link PetstoreClientError} from any copy of this package (ESM or CJS build). */
export function isPetstoreClientError(value: unknown): value is PetstoreClientError {
  if (!(value instanceof Error) || value.name !== 'PetstoreClientError') return false;
  const { code, status, attempts } = value as { code?: unknown; status?: unknown; attempts?: unknown };
  return typeof code === 'string' && typeof status === 'number' && typeof attempts === 'number';
}

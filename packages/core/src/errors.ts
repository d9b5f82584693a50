/**
 * One error class, a closed set of error codes, one code → HTTP status map.
 *
 * Every error answer of the API has the Error body — exactly `{ code, message, status }` —
 * and nothing else: no stack trace, no cause, no internals.
 */

/**
 * The closed set of error codes and the HTTP status each one answers with.
 *
 * - `validation_failed` 400: the body is JSON but not a valid NewCategory.
 * - `invalid_json` 400: the body is empty, not valid UTF-8, not valid JSON, or over the nesting or member bound.
 * - `invalid_content_type` 400: a body-carrying request without `Content-Type: application/json` (the
 *   contract puts a missing JSON content type under 400, so this is not 415).
 * - `invalid_idempotency_key` 400: the `Idempotency-Key` header of a create is not one structured-field string of
 *   1–255 printable ASCII characters (draft-ietf-httpapi-idempotency-key-header).
 * - `unauthorized` 401: the API key is missing or invalid.
 * - `not_found` 404: no operation at this path under the API prefix.
 * - `method_not_allowed` 405: the path exists but not with this method; the answer carries `Allow`.
 * - `idempotency_key_in_flight` 409: a create with the same `Idempotency-Key` is still being processed; carries
 *   `Retry-After`.
 * - `gone` 410: the operation is past its sunset date (RFC 8594). Also raised, never over HTTP, by
 *   `managedApiKeys` for a revoked key that is rotated or updated, or an expired key that is rotated.
 * - `payload_too_large` 413: the body is over the configured limit (default 1 MiB).
 * - `unsupported_encoding` 415: the body is sent with a transfer coding other than `chunked` or a content
 *   coding other than `identity` (RFC 9110 §15.5.16); the answer carries `Accept-Encoding: identity`.
 * - `expectation_failed` 417: the request's `Expect` holds something other than `100-continue` (RFC 9110
 *   §10.1.1).
 * - `idempotency_key_reused` 422: the `Idempotency-Key` was used for a create with another body; nothing was
 *   created.
 * - `header_fields_too_large` 431: the server dropped header fields past its limit (Node 20 does so
 *   silently past `maxHeadersCount`), so a header sent twice may have gone unseen (RFC 6585 §5).
 * - `rate_limited` 429: a rate-limit window is exhausted; carries `Retry-After`.
 * - `temporarily_banned` 429: the key kept sending after being limited; carries `Retry-After`.
 * - `internal_error` 500: an unexpected failure; the message never says more than that.
 * - `not_implemented` 501: the operation exists but the host application supplied no handler for it.
 * - `service_unavailable` 503: a store is unreachable or too slow; nothing was done; carries `Retry-After`.
 * - `storage_full` 507: the category store has reached its configured capacity; nothing was written.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#errors
 */
export const ERROR_STATUS = {
  validation_failed: 400,
  invalid_json: 400,
  invalid_content_type: 400,
  invalid_idempotency_key: 400,
  unauthorized: 401,
  not_found: 404,
  method_not_allowed: 405,
  idempotency_key_in_flight: 409,
  gone: 410,
  payload_too_large: 413,
  unsupported_encoding: 415,
  expectation_failed: 417,
  idempotency_key_reused: 422,
  header_fields_too_large: 431,
  rate_limited: 429,
  temporarily_banned: 429,
  internal_error: 500,
  not_implemented: 501,
  service_unavailable: 503,
  storage_full: 507,
} as const satisfies Record<string, number>;

/** One of the closed set of error codes; see {@link ERROR_STATUS}. */
export type ErrorCode = keyof typeof ERROR_STATUS;

/** Every error code, in a stable order. */
export const ERROR_CODES = Object.freeze(Object.keys(ERROR_STATUS) as ErrorCode[]);

/**
 * The Error body: `code` (machine-readable), `message` (human-readable), `status` (HTTP status).
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#error-body
 */
export interface ErrorBody {
  code: ErrorCode;
  message: string;
  status: number;
}

/**
 * The one error class of the library. Internal code throws it; public edges turn it into an Error body.
 *
 * Identify it with {@link isPetstoreError} (by `name` and `code`), not only `instanceof`: the ESM and CJS
 * builds each carry their own copy of the class.
 */
export class PetstoreError extends Error {
  override readonly name = 'PetstoreError';
  /** The machine-readable code; its HTTP status is `ERROR_STATUS[code]`. */
  readonly code: ErrorCode;
  /** The HTTP status this error answers with. */
  readonly status: number;
  /** When set, the answer carries `Retry-After` with this many seconds (RFC 9110 §10.2.3). */
  readonly retryAfterSeconds: number | undefined;

  /**
   * @param options.cause the underlying error (never sent to clients)
   * @param options.retryAfterSeconds whole seconds for a `Retry-After` header (e.g. on 503)
   */
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }

  /** The Error body for this error. */
  toBody(): ErrorBody {
    return errorBody(this.code, this.message);
  }
}

/** True for a {@link PetstoreError} from any copy of this library (ESM or CJS). */
export function isPetstoreError(value: unknown): value is PetstoreError {
  if (!(value instanceof Error) || value.name !== 'PetstoreError') return false;
  const code = (value as { code?: unknown }).code;
  return typeof code === 'string' && Object.hasOwn(ERROR_STATUS, code);
}

/** Builds the Error body for a code; `status` always comes from {@link ERROR_STATUS}. */
export function errorBody(code: ErrorCode, message: string): ErrorBody {
  return { code, message, status: ERROR_STATUS[code] };
}

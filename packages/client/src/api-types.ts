/**
 * The API's bodies, as the client sees them. The client runs without `@petstore/core` (a browser or another
 * service talking to the API needs none of the server), so it states the shapes itself; the installed-package
 * tests compile a check against the published core types, which fails when either side drifts.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#schemas
 */

/** A stored category, as `listCategories` and `createCategory` answer it. */
export interface Category {
  /** Positive safe integer, assigned by the server, increasing. */
  id: number;
  /** 1–100 characters (grapheme clusters), trimmed. */
  name: string;
  /** Absent when the category was created without one; at most 1,000 characters. */
  description?: string;
}

/** The body of `createCategory`. Unknown fields are refused by the server (400 `validation_failed`). */
export interface NewCategory {
  /** Required; 1–100 characters after trimming, no control characters. */
  name: string;
  /** Optional; at most 1,000 characters. Omit it rather than sending `null`. */
  description?: string;
}

/**
 * The error codes the API answers with, each with its HTTP status.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#errors
 */
export type ErrorCode =
  | 'validation_failed' // 400
  | 'invalid_json' // 400
  | 'invalid_content_type' // 400
  | 'invalid_idempotency_key' // 400
  | 'unauthorized' // 401
  | 'not_found' // 404
  | 'method_not_allowed' // 405
  | 'idempotency_key_in_flight' // 409
  | 'gone' // 410
  | 'payload_too_large' // 413
  | 'unsupported_encoding' // 415
  | 'expectation_failed' // 417
  | 'idempotency_key_reused' // 422
  | 'header_fields_too_large' // 431
  | 'rate_limited' // 429
  | 'temporarily_banned' // 429
  | 'internal_error' // 500
  | 'not_implemented' // 501
  | 'service_unavailable' // 503
  | 'storage_full'; // 507

/** The body of every error answer: `code` (machine-readable), `message` (human-readable), `status` (HTTP status). */
export interface ErrorBody {
  code: ErrorCode;
  message: string;
  status: number;
}

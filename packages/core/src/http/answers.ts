/**
 * The answers the pipeline writes: JSON text (none for HEAD), the Error body of a refusal, and the answers of
 * failures — a PetstoreError raised while handling, or anything else (500, reported). The headers object
 * passed in belongs to the one answer being written, so it is completed in place rather than copied.
 */
import type { Principal } from '../auth/principal.js';
import { ERROR_STATUS, errorBody, type ErrorCode, type PetstoreError } from '../errors.js';
import { emitEvent, type PetstoreEvent } from './events.js';
import type { ResolvedOptions } from './petstore-options.js';
import type { PetstoreRequest, PetstoreResponse } from './types.js';

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** What an answer and its event need of the request. */
export type AnsweredRequest = Pick<PetstoreRequest, 'method' | 'path' | 'clientAddress' | 'logger'>;

/** A JSON answer; HEAD answers carry no body. */
export function jsonAnswer(status: number, body: unknown, headers: Record<string, string>, method: string): PetstoreResponse {
  return textAnswer(status, JSON.stringify(body), headers, method);
}

/** An answer whose body is JSON text already written; HEAD answers carry no body. */
export function textAnswer(status: number, json: string, headers: Record<string, string>, method: string): PetstoreResponse {
  // Set last, so a host handler's own Content-Type cannot relabel the JSON text written here.
  headers['content-type'] = JSON_CONTENT_TYPE;
  // Methods are case-sensitive tokens, but `head` is routed as HEAD too (see matchRoute).
  const head = method === 'HEAD' || (method.length === 4 && method.toUpperCase() === 'HEAD');
  return { status, headers, body: head ? undefined : json };
}

/**
 * An Error-body answer, with the headers gathered so far (and `Retry-After` when `retryAfterSeconds` is
 * given). The pipeline's own refusals (401, 404, 429 …) come here directly: an Error object would capture a
 * stack trace nobody reads, about half the cost of a refusal, and refusals are what a flood is made of.
 */
export function errorAnswer(
  code: ErrorCode,
  message: string,
  headers: Record<string, string>,
  method: string,
  retryAfterSeconds?: number,
): PetstoreResponse {
  if (typeof retryAfterSeconds === 'number' && Number.isFinite(retryAfterSeconds)) {
    headers['retry-after'] = String(Math.max(1, Math.ceil(retryAfterSeconds)));
  }
  // RFC 9110 §15.5.16 / §12.5.3: a 415 for a content coding names the codings the server accepts.
  if (code === 'unsupported_encoding') headers['accept-encoding'] = 'identity';
  return jsonAnswer(ERROR_STATUS[code], errorBody(code, message), headers, method);
}

/** The event of type `type` for a request, naming the caller's key when there is one. */
export function eventFor(request: AnsweredRequest, type: PetstoreEvent['type'], principal?: Principal): PetstoreEvent {
  return {
    type,
    method: request.method,
    path: request.path,
    clientAddress: request.clientAddress,
    ...(principal ? { keyId: principal.keyId, accountId: principal.accountId } : {}),
  };
}

/** The answers of failures, reported to the host's `onInternalError` and `onEvent`. */
export interface FailureAnswers {
  /** The answer for a PetstoreError raised while handling. */
  failedAnswer(error: PetstoreError, request: AnsweredRequest, headers: Record<string, string>): PetstoreResponse;
  /** 500 `internal_error` for anything else thrown, reported; the error itself is never sent. */
  internalAnswer(error: unknown, request: AnsweredRequest, headers: Record<string, string>): PetstoreResponse;
}

export function failureAnswers({ onInternalError, onEvent }: Pick<ResolvedOptions, 'onInternalError' | 'onEvent'>): FailureAnswers {
  return {
    // A `service_unavailable` caused by a failing store (fail-closed) is also reported as an `internal_error`
    // event, with the store's error.
    failedAnswer(error, request, headers) {
      if (error.code === 'service_unavailable' && error.cause !== undefined) {
        emitEvent({ ...eventFor(request, 'internal_error'), error: error.cause }, onEvent, request.logger);
      }
      return errorAnswer(error.code, error.message, headers, request.method, error.retryAfterSeconds);
    },
    internalAnswer(error, request, headers) {
      onInternalError(error);
      emitEvent({ ...eventFor(request, 'internal_error'), error }, onEvent, request.logger);
      return jsonAnswer(500, errorBody('internal_error', 'The server failed to answer this request.'), headers, request.method);
    },
  };
}

/** A method name for a message: an HTTP token of at most 20 characters, else a placeholder. */
export function safeMethod(method: string): string {
  return /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,20}$/.test(method) ? method.toUpperCase() : '(this method)';
}

/**
 * The host's operations (`getPetById`, `listStoreOrders`), steps 7–8 of the pipeline for them (see
 * pipeline.ts): the path parameters checked, the host's handler called, and its answer checked before anything
 * is sent — a status outside 200–599 or a header that could split the answer is the handler's mistake, a 500.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#host-operations
 */
import type { Principal } from '../auth/principal.js';
import { PetstoreError } from '../errors.js';
import { jsonAnswer } from './answers.js';
import type { DeprecationPolicy } from './deprecation.js';
import { queryStringOf, type HostOperationId, type Stability } from './operations.js';
import type { ResolvedOptions } from './petstore-options.js';
import type { PetstoreHeaders, PetstoreRequest, PetstoreResponse } from './types.js';

/** What a host handler receives (the pets and store-order operations are the host's). */
export interface HostOperationContext {
  operationId: HostOperationId;
  /** The authenticated caller. */
  principal: Principal;
  /** Path parameters, percent-decoded (`petId` is checked to be a positive integer). */
  params: Readonly<Record<string, string>>;
  /** The query string. */
  query: URLSearchParams;
  headers: PetstoreHeaders;
  /** The operation's stability marker, if configured. */
  stability: Stability | undefined;
  /** The operation's deprecation, if any. */
  deprecation: DeprecationPolicy | undefined;
  /**
   * Aborted when the client goes away before the answer is sent (the adapters and the Fetch entry wire it to
   * the connection): pass it on to slow work (`fetch(url, { signal })`, database queries) to stop it early.
   * Never aborted when the transport cannot tell.
   */
  signal: AbortSignal;
}

/**
 * What a host handler answers: `status` (default 200, 200–599), a JSON-serialisable `body` (omit for no
 * body), and extra `headers` (the library's own headers win). Throw a `PetstoreError` to answer with the
 * Error body; anything else thrown becomes a 500.
 */
export interface HostOperationResult {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** A handler for one host operation. */
export type HostOperationHandler = (context: HostOperationContext) => HostOperationResult | Promise<HostOperationResult>;

/**
 * Runs one host operation: the answer, its headers over the handler's.
 * @throws PetstoreError `validation_failed` (400) for a `petId` that is not a positive safe integer,
 *   `not_implemented` (501) without a handler, or whatever the handler throws; TypeError for an invalid answer.
 */
export type HostOperationRunner = (
  operationId: HostOperationId,
  request: PetstoreRequest,
  principal: Principal,
  params: Record<string, string>,
  headers: Record<string, string>,
) => Promise<PetstoreResponse>;

const POSITIVE_INTEGER = /^[1-9][0-9]{0,15}$/;

export function createHostOperations({ handlers, stability, deprecations }: ResolvedOptions): HostOperationRunner {
  return async (operationId, request, principal, params, headers) => {
    const petId = params['petId'];
    if (petId !== undefined && (!POSITIVE_INTEGER.test(petId) || !Number.isSafeInteger(Number(petId)))) {
      throw new PetstoreError('validation_failed', 'petId must be a positive integer.');
    }
    const handler = handlers[operationId];
    if (handler === undefined) {
      throw new PetstoreError('not_implemented', `The operation ${operationId} is not implemented by this server.`);
    }
    const result = await handler({
      operationId,
      principal,
      params: Object.freeze({ ...params }),
      query: new URLSearchParams(queryStringOf(request.path) ?? ''),
      headers: request.headers,
      stability: stability[operationId],
      deprecation: deprecations[operationId],
      // A transport that cannot tell when the client leaves gives a signal that is never aborted.
      signal: request.signal ?? new AbortController().signal,
    });
    const status = result.status ?? 200;
    if (!Number.isInteger(status) || status < 200 || status > 599) {
      throw new TypeError(`The ${operationId} handler answered with an invalid status ${String(status)}`);
    }
    const merged = { ...handlerHeaders(operationId, result.headers), ...headers };
    return result.body === undefined ? { status, headers: merged, body: undefined } : jsonAnswer(status, result.body, merged, request.method);
  };
}

// RFC 9110 §5.1 field-name (a token) and §5.5 field-value (visible characters, obs-text, spaces and tabs).
const FIELD_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
// Framing and connection headers belong to the server, not to a handler's answer.
const SERVER_HEADERS = new Set(['connection', 'content-length', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/**
 * A host handler's headers, by lowercase name, without framing and connection headers.
 * @throws TypeError for a name that is not a token or a value that is not a string of field-value characters
 *   (a CR or LF would split the answer): the handler's mistake is a 500, caught before anything is sent.
 */
function handlerHeaders(operationId: string, headers: Record<string, string> | undefined): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (!FIELD_NAME.test(name) || typeof value !== 'string' || !FIELD_VALUE.test(value)) {
      throw new TypeError(`The ${operationId} handler answered with an invalid header ${JSON.stringify(name.slice(0, 40))}`);
    }
    const lower = name.toLowerCase();
    if (!SERVER_HEADERS.has(lower)) result[lower] = value;
  }
  return result;
}

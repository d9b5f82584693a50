/**
 * The Node layer: one translation between Node's `http` request/response and the API's plain
 * `PetstoreRequest`/`PetstoreResponse`, shared by every adapter on a Node server (Fastify, Express, plain
 * `node:http`). A framework adapter keeps only its framework's part; {@link petstoreNodeHandler} serves the API
 * from `http.createServer` directly, and is where an adapter author starts.
 *
 * @packageDocumentation
 */
import type { IncomingHttpHeaders, IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import getRawBody from 'raw-body';
import type { PetstoreLogger } from './http/events.js';
import type { Petstore } from './http/pipeline.js';
import { DEFAULT_PREFIX, notFoundOutsideThePrefix, originFormTarget, pathBelowPrefix } from './http/prefix.js';
import type { PetstoreHeaders, PetstoreRequest, PetstoreRequestBody, PetstoreResponse } from './http/types.js';

import type { GuardOptions } from './http/admission.js';
import { assertCost } from './rate-limit/engine.js';
export { DEFAULT_PREFIX, originFormTarget, pathBelowPrefix } from './http/prefix.js';

/** Options of {@link nodePetstoreRequest}: what the framework knows better than the bare Node request. */
export interface NodeRequestOptions {
  /**
   * The mount path still at the start of `request.url`, removed from the API's path. `''` when the framework
   * already removed it (Express does). Default {@link DEFAULT_PREFIX} (`/v1`).
   */
  prefix?: string;
  /**
   * Where the API is mounted in the server's URL space (`/api/petstore`; `''` at the root), which the description's
   * default server, the reference page and the traced route follow. Default: `prefix`, or {@link DEFAULT_PREFIX}.
   * Express: `request.baseUrl`.
   */
  mountPath?: string;
  /** The parsed headers to start from (Fastify: `request.headers`). Default `request.headers`. */
  headers?: IncomingHttpHeaders;
  /** The body. Default: read lazily from the request ({@link nodeRequestBody}). */
  body?: PetstoreRequestBody;
  /** The client's address as the framework decides it (behind a trusted proxy, the forwarded one). Default: the socket's peer. */
  clientAddress?: string | undefined;
  /** A pino-style logger for this request (Fastify's `request.log`). */
  logger?: PetstoreLogger | undefined;
  /** The response, so that host handlers' `signal` aborts when the client goes away before it is sent. */
  response?: ServerResponse;
}

/**
 * Translates a Node request into the API's plain request: method; the path below `prefix` in origin form
 * (absolute-form targets accepted); the headers with repeated `Authorization`/`Content-Type` kept
 * ({@link nodeRequestHeaders}); whether Node dropped header fields ({@link nodeHeadersCutOff}); the body, read
 * only if the operation takes one; the client address; and a `signal` (made only when a host handler asks
 * for it) aborted when the client goes away before `response` is sent.
 */
export function nodePetstoreRequest(request: IncomingMessage, options: NodeRequestOptions = {}): PetstoreRequest {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  return new NodePetstoreRequest(
    request.method ?? 'GET',
    nodeRequestPath(request.url ?? '/', prefix),
    options.mountPath ?? prefix,
    nodeRequestHeaders(request, options.headers),
    nodeHeadersCutOff(request),
    options.body ?? nodeRequestBody(request),
    'clientAddress' in options ? options.clientAddress : request.socket?.remoteAddress,
    options.logger,
    options.response,
  );
}

/**
 * A {@link PetstoreRequest} whose `signal` is made on first read. A class, so the getter lives once on the
 * prototype: a `get signal()` closure per request kept requests alive through young-generation collections.
 */
class NodePetstoreRequest implements PetstoreRequest {
  #controller: AbortController | undefined;
  readonly #response: ServerResponse | undefined;
  constructor(
    readonly method: string,
    readonly path: string,
    readonly mountPath: string,
    readonly headers: PetstoreHeaders,
    readonly headersIncomplete: boolean,
    readonly body: PetstoreRequestBody,
    readonly clientAddress: string | undefined,
    readonly logger: PetstoreLogger | undefined,
    response: ServerResponse | undefined,
  ) {
    this.#response = response;
  }

  get signal(): AbortSignal | undefined {
    if (this.#response === undefined) return undefined;
    this.#controller ??= abortedWhenClientLeaves(this.#response);
    return this.#controller.signal;
  }
}

/** An AbortController aborted when `response`'s connection closes before the response finished. */
function abortedWhenClientLeaves(response: ServerResponse): AbortController {
  const controller = new AbortController();
  const onClose = () => {
    if (!response.writableFinished) controller.abort();
  };
  if (response.destroyed || response.socket?.destroyed === true) onClose();
  else response.once('close', onClose);
  return controller;
}

/**
 * Writes the API's answer: status, headers (over any the host set before), body — in one `end`, so Node sends
 * a `Content-Length` (`writeHead` first would send the headers before the body's length is known, and the
 * answer would go out chunked).
 */
export function writeNodeResponse(response: ServerResponse, answer: PetstoreResponse): void {
  response.statusCode = answer.status;
  for (const name in answer.headers) response.setHeader(name, answer.headers[name] as string);
  response.end(answer.body);
}

/** Options of {@link petstoreNodeHandler}. */
export interface NodeHandlerOptions {
  /** Where the API is mounted. Default: the petstore's `prefix` (`/v1` unless configured). */
  prefix?: string;
  /**
   * Answers requests outside the prefix (your own routes). Default: 404 with the Error body and no rate-limit
   * headers, as the Fetch entry answers them.
   */
  fallback?: RequestListener;
  /** The client address of a request (e.g. from a proxy header you trust). Default: the socket's peer. */
  clientAddress?: (request: IncomingMessage) => string | undefined;
}

/**
 * A `node:http` request listener serving the API: `http.createServer(petstoreNodeHandler(petstore))`. Requests
 * under the prefix go to `petstore.handle`; others to `fallback`. Pair it with
 * `server.on('checkExpectation', petstoreCheckExpectation({ prefix }))` for unknown `Expect` headers.
 */
export function petstoreNodeHandler(petstore: Petstore, options: NodeHandlerOptions = {}): RequestListener {
  const prefix = options.prefix ?? petstore.prefix;
  const fallback = options.fallback ?? ((_request, response) => writeNodeResponse(response, notFoundOutsideThePrefix()));
  return (request, response) => {
    if (pathBelowPrefix(originFormTarget(request.url ?? '/'), prefix) === undefined) {
      fallback(request, response);
      return;
    }
    const clientAddress = options.clientAddress === undefined ? request.socket?.remoteAddress : options.clientAddress(request);
    void petstore.handle(nodePetstoreRequest(request, { prefix, clientAddress, response })).then((answer) => {
      // The connection may be gone by now; nothing is left to tell anyone.
      if (!response.destroyed) writeNodeResponse(response, answer);
    });
  };
}

const NO_BODY: PetstoreRequestBody = Object.freeze({ kind: 'none' });

/**
 * The headers of a Node request for the API: `request.headers`, except that an `Authorization` or
 * `Content-Type` sent more than once becomes the array of all its values. Node keeps only the first of these
 * in `request.headers` (it drops later duplicates of some singleton fields), which would let
 * `Authorization: Bearer <valid>` + `Authorization: Bearer nope` through as valid; the API answers several
 * Authorization headers as an invalid key (401) and several Content-Type headers as 400. Decided from
 * `request.rawHeaders`, in one pass over the header names.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#repeated-headers
 *
 * @param headers the parsed headers to start from; default `request.headers` (Fastify passes `request.headers`).
 */
export function nodeRequestHeaders(
  request: IncomingMessage,
  headers: IncomingHttpHeaders = request.headers,
): PetstoreHeaders {
  const raw = request.rawHeaders;
  let authorization = 0;
  let contentType = 0;
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index] as string;
    // Compare the length first: most header names are neither.
    if (name.length === 13 && name.toLowerCase() === 'authorization') authorization++;
    else if (name.length === 12 && name.toLowerCase() === 'content-type') contentType++;
  }
  if (authorization < 2 && contentType < 2) return headers;
  const copy: Record<string, string | readonly string[] | undefined> = { ...headers };
  if (authorization > 1) copy['authorization'] = rawValues(raw, 'authorization');
  if (contentType > 1) copy['content-type'] = rawValues(raw, 'content-type');
  return copy;
}

function rawValues(raw: readonly string[], name: string): string[] {
  const values: string[] = [];
  for (let index = 0; index < raw.length; index += 2) {
    if ((raw[index] as string).toLowerCase() === name) values.push(raw[index + 1] as string);
  }
  return values;
}

/**
 * True when Node may have dropped header fields of this request: Node 20 keeps only the first fields up to
 * its limit (`server.maxHeadersCount`; 1,000 fields by default, 0 for none) and drops the rest without a
 * word, so a second `Authorization` or `Content-Type` could go unseen. Pass it on as
 * `PetstoreRequest.headersIncomplete` (the adapters do) and the API answers 431. Node 22 and later answer
 * such a request 431 themselves, before any application code.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#input-bounds
 */
export function nodeHeadersCutOff(request: Pick<IncomingMessage, 'rawHeaders'> & { socket?: unknown }): boolean {
  const server = (request.socket as { server?: { maxHeadersCount?: number | null } } | null | undefined)?.server;
  const maxHeadersCount = server?.maxHeadersCount;
  if (maxHeadersCount === 0) return false;
  // Node reads the limit in names and values together: 2 × maxHeadersCount, 2,000 when it is not set.
  const limit = typeof maxHeadersCount === 'number' && maxHeadersCount > 0 ? 2 * maxHeadersCount : 2000;
  return request.rawHeaders.length >= limit;
}

/**
 * The path of a Node request below the API's mount path, for `PetstoreRequest.path`: the request target in
 * origin form (an absolute-form target, `GET http://host/v1/categories`, is accepted as RFC 9112 §3.2.2
 * requires), without `prefix`. A target that is not under `prefix` is returned whole (in origin form), so the
 * API answers it 404.
 *
 * @param url the target as the framework holds it (`request.url`; Express has already removed its mount path)
 * @param prefix the mount path still to remove (`''` when the framework removed it)
 */
export function nodeRequestPath(url: string, prefix: string): string {
  const target = originFormTarget(url);
  return pathBelowPrefix(target, prefix) ?? target;
}

/**
 * A listener for the host server's `checkExpectation` event. Node answers a request whose `Expect` is not
 * `100-continue` with a bare 417 before any application code runs, unless the server has such a listener.
 * With this one, requests under `prefix` go to the server's `request` handlers as usual, and the API answers
 * them (417 `expectation_failed` with the Error body and the rate-limit headers, after authentication and
 * rate limiting); every other request gets Node's own bare 417, as before.
 *
 * ```ts
 * server.on('checkExpectation', petstoreCheckExpectation({ prefix: '/v1' })); // Fastify: app.server.on(…)
 * ```
 *
 * @param options.prefix where the API is mounted. Default `/v1`.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#never-seen
 */
export function petstoreCheckExpectation(
  options: { prefix?: string } = {},
): (this: Server, request: IncomingMessage, response: ServerResponse) => void {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  return function checkExpectation(this: Server, request, response) {
    if (pathBelowPrefix(originFormTarget(request.url ?? ''), prefix) !== undefined) {
      this.emit('request', request, response);
      return;
    }
    response.writeHead(417);
    response.end();
  };
}

/**
 * The body of a Node request as a lazily read stream: the pipeline reads it only for operations that take a
 * body, after auth and rate limiting, and stops at the limit (then answers 413).
 *
 * A request that announces no body (no `Transfer-Encoding`, and `Content-Length` absent or 0) is `none`.
 * A stream that was already consumed, aborted, or whose length does not match `Content-Length` reads as
 * `unreadable` (→ 400).
 *
 * @param request the Node request (its headers decide whether there is a body)
 * @param stream where to read the body from; default `request`. Fastify passes its (possibly transformed)
 *   payload stream here.
 */
export function nodeRequestBody(request: IncomingMessage, stream: Readable = request): PetstoreRequestBody {
  if (!nodeRequestHasBody(request)) return NO_BODY;
  return {
    kind: 'stream',
    async read(limitBytes) {
      try {
        const bytes = await getRawBody(stream, {
          limit: limitBytes,
          length: request.headers['content-length'],
        });
        return { ok: true, bytes };
      } catch (error) {
        const type = (error as { type?: unknown }).type;
        return { ok: false, reason: type === 'entity.too.large' ? 'too_large' : 'unreadable' };
      }
    },
  };
}

/**
 * True when a Node request carries a body (RFC 9112 §6.3): a `Transfer-Encoding` header, or a
 * `Content-Length` other than 0.
 */
export function nodeRequestHasBody(request: IncomingMessage): boolean {
  if (request.headers['transfer-encoding'] !== undefined) return true;
  const length = request.headers['content-length'];
  return length !== undefined && length !== '0';
}

/**
 * Checks the options of an adapter's guard (`petstoreGuard(petstore, { cost })` in the Fastify and Express
 * adapters) once, when the guard is made, and answers them as `petstore.guard` takes them.
 * @param where the name in the message, e.g. `petstoreGuard`.
 * @throws TypeError when the options are not an object, name an unknown option, or `cost` is not a whole number ≥ 1.
 */
export function guardOptionsOf(options: unknown, where: string): GuardOptions {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null) throw new TypeError(`${where}: the options must be an object ({ cost? })`);
  for (const name of Object.keys(options)) {
    if (name !== 'cost') throw new TypeError(`${where}: ${name} is not an option (options: cost)`);
  }
  const { cost } = options as GuardOptions;
  if (cost === undefined) return {};
  assertCost(cost, `${where}: cost`);
  return { cost };
}

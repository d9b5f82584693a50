/**
 * @petstore/adapter-express — serves the petstore categories API from an Express 4 (4.21+) or 5 app.
 *
 * ```ts
 * app.use('/v1', petstoreExpress({ petstore: createPetstore({ ... }) }));
 * ```
 *
 * It only translates between Express and `petstore.handle`, through the core's Node layer; every rule lives in
 * the core. It answers the same whether or not the host installed `express.json()` (or another body parser)
 * before it, and Express's HTML error page never answers for its routes. It uses no Express API beyond the
 * middleware signature, so it behaves the same on Express 4 and 5.
 *
 * @packageDocumentation
 */
import {
  createPetstore,
  type GuardOptions,
  type Petstore,
  type PetstoreOptions,
  type PetstoreRequestBody,
  type Principal,
} from '@petstore/core';
import {
  guardOptionsOf,
  nodeHeadersCutOff,
  nodePetstoreRequest,
  nodeRequestBody,
  nodeRequestHasBody,
  nodeRequestHeaders,
  writeNodeResponse,
} from '@petstore/core/node';
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Locals {
      /** The caller admitted by `petstoreGuard`, as {@link principalOf} answers it. */
      petstorePrincipal?: Principal;
    }
  }
}

/** Options of {@link petstoreExpress}: a ready `petstore` (from `createPetstore`), or the options to create one. */
export type PetstoreExpressOptions = { petstore: Petstore } | PetstoreOptions;

/**
 * What {@link petstoreExpress} returns, for `app.use(prefix, …)`: the middleware serving the API, and an error
 * middleware that answers — through the core — for requests whose body the host's own parser (e.g.
 * `express.json()`) rejected before the API ran. Express skips ordinary middleware while an error is pending,
 * so that case needs the second element. Every other error (a host middleware that failed before the API, say)
 * is passed on to the host's error handlers untouched.
 */
export type PetstoreExpressHandlers = [api: RequestHandler, bodyParserErrors: ErrorRequestHandler];

/** Creates the Express middleware of the API. Mount it with `app.use('/v1', petstoreExpress(...))`. */
export function petstoreExpress(options: PetstoreExpressOptions): PetstoreExpressHandlers {
  const petstore = 'petstore' in options ? options.petstore : createPetstore(options);

  const answer = async (request: Request, response: Response, body: PetstoreRequestBody) => {
    // Express has removed its mount path from request.url (keeping an absolute-form target's origin).
    const apiRequest = nodePetstoreRequest(request, { prefix: '', mountPath: request.baseUrl, body, clientAddress: request.ip, response });
    writeNodeResponse(response, await petstore.handle(apiRequest));
  };

  // Express 4 ignores a middleware's promise: a failure is handed to next() here, never left unhandled.
  const api: RequestHandler = (request, response, next) => {
    answer(request, response, requestBody(request)).catch(next);
  };

  const bodyParserErrors: ErrorRequestHandler = (error, request, response, next) => {
    const parserError = bodyParserError(error);
    if (parserError === undefined || response.headersSent) {
      next(error);
      return;
    }
    answer(request, response, parserError).catch(next);
  };

  return [api, bodyParserErrors];
}

/** The body as the host left it: already parsed by a host body parser, or still to be read by the core. */
function requestBody(request: Request): PetstoreRequestBody {
  const parsed: unknown = request.body;
  if (parsed === undefined) return nodeRequestBody(request);
  // express.json() turns an empty body into {}; the core must see that there was no body at all.
  if (!nodeRequestHasBody(request)) return { kind: 'none' };
  if (typeof parsed === 'string' || parsed instanceof Uint8Array) return { kind: 'bytes', bytes: parsed };
  return { kind: 'parsed', value: parsed };
}

/** The `type` of every error body-parser (Express's body parsers) raises; an error with another is the host's. */
const BODY_PARSER_ERROR_TYPES = new Set([
  'charset.unsupported',
  'encoding.unsupported',
  'entity.parse.failed',
  'entity.too.large',
  'entity.verify.failed',
  'parameters.too.many',
  'request.aborted',
  'request.size.invalid',
  'stream.encoding.set',
  'stream.not.readable',
]);

/**
 * A body-parser failure as the core's body kind: an http-errors error with one of body-parser's `type`s, or a
 * zlib error (`code` `Z_DATA_ERROR` …) that body-parser passes on with status 400 when a body labelled
 * gzip/deflate/br does not inflate. Anything else is the host's.
 */
function bodyParserError(error: unknown): PetstoreRequestBody | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { type, status, body, code } = error as { type?: unknown; status?: unknown; body?: unknown; code?: unknown };
  if (typeof status !== 'number' || status < 400 || status > 499) return undefined;
  if (typeof type !== 'string') {
    return typeof code === 'string' && code.startsWith('Z_') ? { kind: 'unreadable', reason: 'malformed' } : undefined;
  }
  if (!BODY_PARSER_ERROR_TYPES.has(type)) return undefined;
  if (type === 'entity.too.large') return { kind: 'unreadable', reason: 'too_large' };
  if (type === 'encoding.unsupported') return { kind: 'unreadable', reason: 'unsupported_encoding' };
  // The parser keeps the raw text of a body it could not parse; the core judges it like any other body.
  if (type === 'entity.parse.failed' && typeof body === 'string') return { kind: 'bytes', bytes: body };
  return { kind: 'unreadable', reason: 'malformed' };
}

const principals = new WeakMap<Request, Principal>();

/**
 * A middleware that protects a host route with the API's own authentication and rate limits — the same keys,
 * plans, quotas, `X-RateLimit-*` headers and Error bodies (401, 429, 503). Rate limiting runs after
 * authentication; each request is charged `options.cost` units (default: the petstore's `rateLimit.cost.guard`,
 * itself default 1). Admitted requests get the rate-limit headers on their response; read the caller with
 * {@link principalOf} (also in `res.locals.petstorePrincipal`). Refused ones are answered here.
 *
 * ```ts
 * app.get('/reports', petstoreGuard(petstore, { cost: 5 }), (req, res) => res.json(principalOf(req)));
 * ```
 *
 * @throws TypeError when `options.cost` is not a whole number ≥ 1.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#guard
 */
export function petstoreGuard(petstore: Petstore, options?: GuardOptions): RequestHandler {
  const guardOptions = guardOptionsOf(options, 'petstoreGuard');
  return (request, response, next) => {
    petstore
      .guard(
        {
          method: request.method,
          path: request.originalUrl,
          headers: nodeRequestHeaders(request),
          headersIncomplete: nodeHeadersCutOff(request),
          clientAddress: request.ip,
        },
        guardOptions,
      )
      .then((result) => {
        if (!result.allowed) {
          writeNodeResponse(response, result.response);
          return;
        }
        for (const [name, value] of Object.entries(result.headers)) response.setHeader(name, value);
        principals.set(request, result.principal);
        response.locals.petstorePrincipal = result.principal;
        next();
      }, next);
  };
}

/**
 * The caller {@link petstoreGuard} admitted for this request — `{ keyId, accountId, plan, limits? }` — or
 * `undefined` when the guard did not run for it (or refused it). The same function as the Fastify adapter's
 * `principalOf`.
 */
export function principalOf(request: Request): Principal | undefined {
  return principals.get(request);
}

export default petstoreExpress;

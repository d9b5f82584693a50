/**
 * @petstore/adapter-fastify — mounts the petstore categories API on a Fastify 5 app.
 *
 * ```ts
 * app.register(petstoreFastify, { prefix: '/v1', petstore: createPetstore({ ... }) });
 * ```
 *
 * The plugin is encapsulated (no `fastify-plugin`): its content-type parser, `preParsing` hook and not-found
 * handler apply to its own routes only, it sets no error handler, and the host's parsers, hooks, error handler
 * and routes are untouched. It only translates between Fastify and `petstore.handle`; every rule lives in the
 * core.
 *
 * @packageDocumentation
 */
import {
  createPetstore,
  type GuardOptions,
  type Petstore,
  type PetstoreOptions,
  type PetstoreResponse,
  type Principal,
} from '@petstore/core';
import {
  DEFAULT_PREFIX,
  guardOptionsOf,
  nodeHeadersCutOff,
  nodePetstoreRequest,
  nodeRequestBody,
  nodeRequestHeaders,
  originFormTarget,
  pathBelowPrefix,
} from '@petstore/core/node';
import { parse as parseContentType } from 'content-type';
import type {
  FastifyError,
  FastifyInstance,
  FastifyPluginAsync,
  FastifyReply,
  FastifyRequest,
  FastifySchema,
  FastifyServerOptions,
  HTTPMethods,
  onRequestAsyncHookHandler,
} from 'fastify';

/**
 * Options of {@link petstoreFastify}: either a ready `petstore` (from `createPetstore`), or the options to
 * create one. `prefix` is Fastify's own register option; when it is not given the API is mounted at `/v1`.
 * A petstore the plugin creates reports its setup warnings through Fastify's logger unless `onWarning` is
 * given.
 */
export type PetstoreFastifyOptions = ({ petstore: Petstore } | PetstoreOptions) & { prefix?: string };

const METHODS: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
/** Options Fastify itself reads from a plugin's register options: not petstore options. */
const REGISTER_OPTIONS = new Set(['prefix', 'logLevel', 'logSerializers']);

/**
 * The Fastify plugin. Register it with a `prefix`; without one it mounts itself at `/v1`, in a context of its
 * own so that its not-found handler covers `/v1` only.
 *
 * It answers only for its own routes and sets no error handler: an error raised before its handler runs — a
 * host `onRequest` hook that refuses, say — goes to the host's error handler (or Fastify's default), and
 * `petstore.handle` runs at most once per request.
 */
export const petstoreFastify: FastifyPluginAsync<PetstoreFastifyOptions> = async (fastify, options) => {
  if (options.prefix === undefined) await fastify.register(mountPetstore, { ...options, prefix: DEFAULT_PREFIX });
  else await mountPetstore(fastify, options);
};

const mountPetstore: FastifyPluginAsync<PetstoreFastifyOptions> = async (fastify, options) => {
  const petstore = 'petstore' in options ? options.petstore : createPetstore(petstoreOptionsOf(options, fastify));
  const prefix = fastify.prefix;

  // The core reads and parses bodies itself, so every adapter answers bad bodies identically.
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

  /** The API's answer to `request`, whose body is read from `payload` (the request stream, or a host preParsing hook's). */
  const answer = (request: FastifyRequest, reply: FastifyReply, payload: unknown) =>
    petstore.handle(
      nodePetstoreRequest(request.raw, {
        prefix,
        headers: request.headers,
        body: nodeRequestBody(request.raw, payload as never),
        clientAddress: request.ip,
        logger: request.log,
        response: reply.raw,
      }),
    );
  const handler = async (request: FastifyRequest, reply: FastifyReply) => send(reply, await answer(request, reply, request.body));

  // Between the preParsing hooks and the handler, Fastify judges the Content-Type of a request whose method may
  // carry a body, and refuses some through the error handler — so without the Error body and the rate-limit
  // headers (fastify/lib/handle-request.js): a Content-Type it cannot parse (`application/json, application/json`,
  // an empty value: 415 FST_ERR_CTP_INVALID_MEDIA_TYPE) and a QUERY without one (400
  // FST_ERR_ROUTE_MISSING_CONTENT_TYPE). Those requests are answered here instead, after every onRequest and
  // preParsing hook (the host's first), exactly as the handler would answer them. The hook is the plugin's own:
  // it runs under the prefix only.
  fastify.addHook('preParsing', (request, reply, payload, done) => {
    if (!fastifyMayRefuseContentType(request.method, request.headers['content-type'])) {
      done(null, payload);
      return;
    }
    // Answered without calling done: the lifecycle stops here (Fastify, "Respond to a request from a hook").
    answer(request, reply, payload).then(
      (response) => {
        void send(reply, response);
      },
      (error: unknown) => {
        void reply.send(error);
      },
    );
  });
  // `hide`: @fastify/swagger, when the host registers it, leaves these catch-all routes out of the host's document;
  // the petstore's operations go in with mergeOpenApiDocument (docs/reference-page.md, "The host's own OpenAPI document").
  for (const url of ['/*', '/']) fastify.route({ method: METHODS, url, handler, exposeHeadRoute: false, schema: HIDDEN_FROM_SWAGGER });
  // Methods Fastify has no route for (e.g. PROPFIND) still get the core's 404/405 answers.
  fastify.setNotFoundHandler(handler);
};

/** A route schema that only hides the route from @fastify/swagger (its `hide` flag); Fastify validates nothing by it. */
const HIDDEN_FROM_SWAGGER = { hide: true } as FastifySchema;

/** Methods whose requests Fastify reads no body of, and so no Content-Type (its default `bodyless` methods). */
const BODYLESS_METHODS = new Set(['GET', 'HEAD', 'TRACE']);

/**
 * Whether Fastify may refuse a request for its Content-Type before the handler runs: a method it reads a body
 * for, with a Content-Type that is not a well-formed media type (`type/subtype` with `;`-separated parameters,
 * RFC 9110 §8.3.1, as the `content-type` package parses it), or a QUERY without one. It errs on the side of
 * yes (a request it calls refused is answered by the same core, only earlier), since Fastify's own rules have
 * grown stricter across 5.x releases.
 */
function fastifyMayRefuseContentType(method: string, contentType: string | undefined): boolean {
  if (BODYLESS_METHODS.has(method)) return false;
  if (contentType === undefined) return method === 'QUERY';
  try {
    parseContentType(contentType); // an RFC 9110 §8.3.1 media type, parameters included
    return false;
  } catch {
    return true;
  }
}

/** The petstore options among the register options, with setup warnings going to Fastify's logger. */
function petstoreOptionsOf(options: PetstoreOptions, fastify: FastifyInstance): PetstoreOptions {
  const own = Object.fromEntries(Object.entries(options).filter(([name]) => !REGISTER_OPTIONS.has(name))) as PetstoreOptions;
  return {
    onWarning: (warning) => fastify.log.warn({ petstore: { warning: warning.code } }, warning.message),
    ...own,
  };
}

const send = (reply: FastifyReply, answer: PetstoreResponse) =>
  reply.code(answer.status).headers(answer.headers).send(answer.body);

const principals = new WeakMap<FastifyRequest, Principal>();

/**
 * An `onRequest` hook that protects a host route with the API's own authentication and rate limits — the
 * same keys, plans, quotas, `X-RateLimit-*` headers and Error bodies (401, 429, 503). Rate limiting runs
 * after authentication; each request is charged `options.cost` units (default: the petstore's
 * `rateLimit.cost.guard`, itself default 1). Admitted requests carry the rate-limit headers on their reply;
 * read the caller with {@link principalOf}. Events are logged through `request.log`.
 *
 * ```ts
 * app.get('/reports', { onRequest: petstoreGuard(petstore, { cost: 5 }) }, async (request) => principalOf(request));
 * ```
 *
 * @throws TypeError when `options.cost` is not a whole number ≥ 1.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#guard
 */
export function petstoreGuard(petstore: Petstore, options?: GuardOptions): onRequestAsyncHookHandler {
  const guardOptions = guardOptionsOf(options, 'petstoreGuard');
  return async (request, reply) => {
    const result = await petstore.guard(
      {
        method: request.method,
        path: request.url,
        headers: nodeRequestHeaders(request.raw, request.headers),
        headersIncomplete: nodeHeadersCutOff(request.raw),
        clientAddress: request.ip,
        logger: request.log,
      },
      guardOptions,
    );
    if (!result.allowed) {
      await send(reply, result.response);
      return;
    }
    reply.headers(result.headers);
    principals.set(request, result.principal);
  };
}

/**
 * Fastify rejects a URL with malformed percent-encoding (`/v1/pets/%ZZ`, `/v1%c0%afcategories`) in its
 * router, before any plugin, hook or handler runs; only the host's `frameworkErrors` option sees it. Pass
 * this to have such requests under the API's prefix (the prefix followed by `/`, `?`, or percent-encoding
 * that does not decode) answered by the API like every other (authenticated, rate limited, 404 with the Error body and the rate-limit headers).
 * Everything else gets Fastify's own answer, unchanged.
 *
 * ```ts
 * const app = Fastify({ frameworkErrors: petstoreFrameworkErrors(petstore, { prefix: '/v1' }) });
 * ```
 *
 * @param options.prefix where the plugin is mounted. Default `/v1`.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#never-seen
 */
export function petstoreFrameworkErrors(
  petstore: Petstore,
  options: { prefix?: string } = {},
): NonNullable<FastifyServerOptions['frameworkErrors']> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const handler = (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    if (pathBelowPrefix(originFormTarget(request.url), prefix) !== undefined) {
      const apiRequest = { prefix, headers: request.headers, clientAddress: request.ip, logger: request.log, response: reply.raw };
      void petstore.handle(nodePetstoreRequest(request.raw, apiRequest)).then((answer) => send(reply, answer));
      return;
    }
    // Fastify's own answer for framework errors outside the API.
    const statusCode = error.statusCode ?? 400;
    void reply.code(statusCode).send({ error: 'Bad Request', code: error.code, message: error.message, statusCode });
  };
  return handler as NonNullable<FastifyServerOptions['frameworkErrors']>;
}

/** The principal {@link petstoreGuard} admitted for this request, or `undefined` when it did not run. */
export function principalOf(request: FastifyRequest): Principal | undefined {
  return principals.get(request);
}

export default petstoreFastify;

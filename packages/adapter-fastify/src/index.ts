/**
 * @petstore/adapter-fastify — mounts the petstore categories API on a Fastify 5 app.
 *
 * ```ts
 * app.register(petstoreFastify, { prefix: '/v1', petstore: createPetstore({ ... }) });
 * ```
 *
 * The plugin is encapsulated (no `fastify-plugin`): its content-type parser, not-found handler and error
 * handler apply to its own routes only, and the host's parsers, hooks, error handler and routes are
 * untouched. It only translates between Fastify and `petstore.handle`; every rule lives in the core.
 *
 * @packageDocumentation
 */
import {
  createPetstore,
  type Petstore,
  type PetstoreOptions,
  type PetstoreResponse,
  type Principal,
} from '@petstore/core';
import {
  nodeHeadersCutOff,
  nodeRequestBody,
  nodeRequestHeaders,
  nodeRequestPath,
  originFormTarget,
  pathBelowPrefix,
} from '@petstore/core/node';
import type {
  FastifyError,
  FastifyPluginAsync,
  FastifyReply,
  FastifyRequest,
  FastifyServerOptions,
  HTTPMethods,
  onRequestAsyncHookHandler,
} from 'fastify';

/**
 * Options of {@link petstoreFastify}: either a ready `petstore` (from `createPetstore`), or the options to
 * create one. `prefix` is Fastify's own register option; when it is not given the API is mounted at `/v1`
 * (SPEC §9).
 */
export type PetstoreFastifyOptions = ({ petstore: Petstore } | PetstoreOptions) & { prefix?: string };

const METHODS: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * The Fastify plugin. Register it with a `prefix`; without one it mounts itself at `/v1` (SPEC §9), in a
 * context of its own so that its not-found handler covers `/v1` only.
 */
export const petstoreFastify: FastifyPluginAsync<PetstoreFastifyOptions> = async (fastify, options) => {
  if (options.prefix === undefined) await fastify.register(mountPetstore, { ...options, prefix: '/v1' });
  else await mountPetstore(fastify, options);
};

const mountPetstore: FastifyPluginAsync<PetstoreFastifyOptions> = async (fastify, options) => {
  const petstore = 'petstore' in options ? options.petstore : createPetstore(options);
  const mountPath = fastify.prefix;

  // The core reads and parses bodies itself, so every adapter answers bad bodies identically.
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

  const toCore = (request: FastifyRequest, body = nodeRequestBody(request.raw, request.body as never)) => ({
    method: request.method,
    path: nodeRequestPath(request.url, mountPath),
    headers: nodeRequestHeaders(request.raw, request.headers),
    headersIncomplete: nodeHeadersCutOff(request.raw),
    body,
    clientAddress: request.ip,
    logger: request.log,
  });

  const handler = async (request: FastifyRequest, reply: FastifyReply) =>
    send(reply, await petstore.handle(toCore(request)));
  for (const url of ['/*', '/']) fastify.route({ method: METHODS, url, handler, exposeHeadRoute: false });
  // Methods Fastify has no route for (e.g. PROPFIND) still get the core's 404/405 answers.
  fastify.setNotFoundHandler(handler);
  // Fastify's own failures before the handler (e.g. its body checks) are answered by the core as well.
  fastify.setErrorHandler(async (error, request, reply) =>
    send(
      reply,
      await petstore.handle(
        toCore(request, {
          kind: 'unreadable',
          reason: (error as { statusCode?: unknown }).statusCode === 413 ? 'too_large' : 'malformed',
        }),
      ),
    ),
  );
};

const send = (reply: FastifyReply, answer: PetstoreResponse) =>
  reply.code(answer.status).headers(answer.headers).send(answer.body);

const principals = new WeakMap<FastifyRequest, Principal>();

/**
 * An `onRequest` hook that protects a host route with the API's own authentication and rate limits — the
 * same keys, plans, quotas, `X-RateLimit-*` headers and Error bodies (401, 429, 503). Rate limiting runs
 * after authentication. Admitted requests carry the rate-limit headers on their reply; read the caller with
 * {@link principalOf}. Events are logged through `request.log`.
 *
 * ```ts
 * app.get('/reports', { onRequest: petstoreGuard(petstore) }, async (request) => principalOf(request));
 * ```
 */
export function petstoreGuard(petstore: Petstore): onRequestAsyncHookHandler {
  return async (request, reply) => {
    const result = await petstore.guard({
      method: request.method,
      path: request.url,
      headers: nodeRequestHeaders(request.raw, request.headers),
      headersIncomplete: nodeHeadersCutOff(request.raw),
      clientAddress: request.ip,
      logger: request.log,
    });
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
 * this to have such requests under the API's prefix (the prefix followed by `/`, `?` or `%`) answered by the
 * API like every other (authenticated, rate limited, 404 with the Error body and the rate-limit headers).
 * Everything else gets Fastify's own answer, unchanged.
 *
 * ```ts
 * const app = Fastify({ frameworkErrors: petstoreFrameworkErrors(petstore, { prefix: '/v1' }) });
 * ```
 *
 * @param options.prefix where the plugin is mounted. Default `/v1`.
 */
export function petstoreFrameworkErrors(
  petstore: Petstore,
  options: { prefix?: string } = {},
): NonNullable<FastifyServerOptions['frameworkErrors']> {
  const prefix = options.prefix ?? '/v1';
  const handler = (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    const path = pathBelowPrefix(originFormTarget(request.url), prefix);
    if (path !== undefined) {
      void petstore
        .handle({
          method: request.method,
          path,
          headers: nodeRequestHeaders(request.raw, request.headers),
          headersIncomplete: nodeHeadersCutOff(request.raw),
          body: nodeRequestBody(request.raw),
          clientAddress: request.ip,
          logger: request.log,
        })
        .then((answer) => send(reply, answer));
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

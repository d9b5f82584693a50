/**
 * The server implementations the contract suite runs against, each listening on a real socket
 * (127.0.0.1, port 0) with a fresh petstore: memory stores, a frozen fake clock, the API keys of
 * {@link API_KEYS}, host handlers for getPetById and listStoreOrders, getPetById deprecated as
 * {@link PET_DEPRECATION}, and listStoreOrders marked beta.
 *
 * Modelled on @whatwg-node/server's `runTestsForEachServerImpl` (test/test-server.ts): one factory per
 * implementation, and capability flags for cases that only some of them can run.
 */
import type { AddressInfo } from 'node:net';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { serve } from '@hono/node-server';
import { petstoreExpress, petstoreGuard as expressGuard, principalOf as expressPrincipalOf } from '@petstore/adapter-express';
import {
  petstoreFastify,
  petstoreFrameworkErrors,
  petstoreGuard as fastifyGuard,
  principalOf,
} from '@petstore/adapter-fastify';
import {
  createPetstore,
  managedApiKeys,
  staticApiKeys,
  type ManagedApiKeys,
  type DeprecationPolicy,
  type HostOperationContext,
  type HostOperationHandler,
  type HostOperationId,
  type Petstore,
  type PetstoreRateLimitOptions,
  type StaticApiKey,
} from '@petstore/core';
import { nodeHeadersCutOff, petstoreCheckExpectation, petstoreNodeHandler, writeNodeResponse } from '@petstore/core/node';
import { fakeClock, type FakeClock } from '@petstore/core/testing';
import {
  memoryApiKeyRecordStore,
  memoryCategoryStore,
  memoryRateLimitStore,
  type MemoryCategoryStore,
  type MemoryRateLimitStore,
} from '@petstore/storage-memory';
import express from 'express';
import express4 from 'express4';
import Fastify from 'fastify';

/**
 * The API keys every server knows. Each case that asserts on quota numbers has its own key, so cases never
 * see each other's requests.
 */
export const API_KEYS = {
  /** Free plan (60/min, 1,000/day): the "remaining decreases by one" case. */
  list: 'contract-list-free-key',
  /** Free plan: the `bearer` lower-case scheme case. */
  auth: 'contract-auth-free-key',
  /** Free plan: the burst of 100 parallel requests. */
  burst: 'contract-burst-free-key',
  /** Enterprise, custom small limits (5/min, 8/day): the rate-limit cases. */
  limits: 'contract-limits-enterprise-key',
  /** Enterprise, big limits: the 250 parallel creates. */
  bulk: 'contract-bulk-enterprise-key',
  /** Enterprise, big limits: every case that does not count quota. */
  general: 'contract-general-enterprise-key',
  /** Enterprise, big limits, another account: the same Idempotency-Key from another caller. */
  other: 'contract-other-enterprise-key',
  /** Enterprise, big limits, account {@link HOST_ACCOUNT_ID}: the host operations (pets, store orders). */
  host: 'contract-host-enterprise-key',
  /** Free plan: `GET /v1/openapi.json` charged to a valid key. */
  openapi: 'contract-openapi-free-key',
  /** Free plan, account {@link REPORTS_ACCOUNT_ID}: the guarded host route sharing the API's quota. */
  reports: 'contract-reports-free-key',
  /** Free plan: the costs of operations and of the guard. */
  costs: 'contract-costs-free-key',
  /** Enterprise, {@link SHARED_LIMITS}, account {@link SHARED_ACCOUNT_ID}: one of two keys sharing one quota. */
  sharedOne: 'contract-shared-one-enterprise-key',
  /** The other key of {@link SHARED_ACCOUNT_ID}. */
  sharedTwo: 'contract-shared-two-enterprise-key',
} as const;

/** The account of {@link API_KEYS.sharedOne} and {@link API_KEYS.sharedTwo}: one quota, a ban per key. */
export const SHARED_ACCOUNT_ID = 'contract-account-shared';
/** The limits of the shared account's keys. */
export const SHARED_LIMITS = { requestsPerMinute: 4, requestsPerDay: 100 } as const;
/** What `GET /reports/expensive` costs: the adapter's guard made with `{ cost }` (`petstore.guard(…, { cost })` on node:http). */
export const EXPENSIVE_REPORT_COST = 4;

/** The account of {@link API_KEYS.host}, which the getPetById handler echoes as `requestedBy`. */
export const HOST_ACCOUNT_ID = 'contract-account-host';
/** The account of {@link API_KEYS.reports}, which the guarded `GET /reports` answers with. */
export const REPORTS_ACCOUNT_ID = 'contract-account-reports';

/** The custom limits of {@link API_KEYS.limits}. */
export const SMALL_LIMITS = { requestsPerMinute: 5, requestsPerDay: 8 } as const;
/** The anonymous limits the core applies per client address by default (docs/http-api.md, "Anonymous callers"). */
export const ANONYMOUS_LIMITS = { requestsPerMinute: 30, requestsPerDay: 500 } as const;

const BIG_LIMITS = { requestsPerMinute: 100_000, requestsPerDay: 1_000_000 };

const STATIC_KEYS: StaticApiKey[] = [
  { key: API_KEYS.list, plan: 'free' },
  { key: API_KEYS.auth, plan: 'free' },
  { key: API_KEYS.burst, plan: 'free' },
  { key: API_KEYS.limits, plan: 'enterprise', limits: SMALL_LIMITS },
  { key: API_KEYS.bulk, plan: 'enterprise', limits: BIG_LIMITS },
  { key: API_KEYS.general, plan: 'enterprise', limits: BIG_LIMITS },
  { key: API_KEYS.other, plan: 'enterprise', limits: BIG_LIMITS },
  { key: API_KEYS.host, plan: 'enterprise', limits: BIG_LIMITS, accountId: HOST_ACCOUNT_ID },
  { key: API_KEYS.openapi, plan: 'free' },
  { key: API_KEYS.reports, plan: 'free', accountId: REPORTS_ACCOUNT_ID },
  { key: API_KEYS.costs, plan: 'free' },
  { key: API_KEYS.sharedOne, plan: 'enterprise', limits: SHARED_LIMITS, accountId: SHARED_ACCOUNT_ID },
  { key: API_KEYS.sharedTwo, plan: 'enterprise', limits: SHARED_LIMITS, accountId: SHARED_ACCOUNT_ID },
];

/**
 * Start of every server's fake clock: mid-day and mid-second (2026-01-01T12:34:56.789Z), so rounding of
 * `X-RateLimit-Reset` and `Retry-After` shows. The clock is frozen: no case crosses a minute by accident.
 */
export const CLOCK_START_MS = Date.UTC(2026, 0, 1, 12, 34, 56, 789);

const DAY_MS = 86_400_000;
const wholeSecondMs = (ms: number) => Math.floor(ms / 1000) * 1000;

/**
 * How every server deprecates `getPetById` (docs/http-api.md, "Deprecation, sunset and stability"): deprecated 30 days before the clock start, sunset 7
 * days after it (both on whole seconds, so `Deprecation: @<seconds>` is exactly `deprecatedAtMs / 1000`),
 * with documentation and sunset links.
 */
export const PET_DEPRECATION = {
  deprecatedAtMs: wholeSecondMs(CLOCK_START_MS - 30 * DAY_MS),
  sunsetAtMs: wholeSecondMs(CLOCK_START_MS + 7 * DAY_MS),
  documentationUrl: 'https://petstore.example/docs/deprecations#get-pet-by-id',
  sunsetUrl: 'https://petstore.example/docs/sunsets#get-pet-by-id',
} as const satisfies DeprecationPolicy;

/** The stability markers every server configures (docs/http-api.md, "Deprecation, sunset and stability"). */
export const STABILITY = { listStoreOrders: 'beta' } as const;

/**
 * A request with this header is refused by the HOST before the API runs: a Fastify `onRequest` hook that
 * throws, an Express middleware that calls `next(error)`, a wrapper around the `node:http` handler or the
 * Fetch entry. The host's own error handler answers 403 `{ hostErrorHandler, statusCode }`.
 */
export const HOST_REFUSAL_HEADER = 'x-host-refuse';
/** What the host's error handler answers a refused request with. */
export const HOST_REFUSAL = { hostErrorHandler: 'refused by the host', statusCode: 403 } as const;

/** The getPetById handler answers this pet with a header value holding a line break: a broken handler. */
export const BROKEN_PET_ID = 13;
/**
 * The getPetById handler waits for this pet until its `signal` aborts (the client went away, or the server
 * closed the connection), then records it in {@link RunningServer.abortions}.
 */
export const SLOW_PET_ID = 21;

/** What the `listStoreOrders` handler answers. */
export const STORE_ORDERS = [{ id: 1 }] as const;

/** One call of a host handler, as the handler saw it. */
export interface HostCall {
  operationId: HostOperationId;
  params: Record<string, string>;
  /** `context.query` as a string (`a=1&b=2`). */
  query: string;
  accountId: string;
  stability: string | null;
}

/** Options of {@link ServerImpl.start}. */
export interface StartOptions {
  /** Supply the host handlers (getPetById, listStoreOrders). Default `true`; `false` → they answer 501. */
  handlers?: boolean;
  /** Fields replacing those of {@link PET_DEPRECATION} (e.g. `afterSunset: 'serve'`). */
  deprecation?: Partial<DeprecationPolicy>;
  /** `maxKeys` of the memory store for callers without a valid key (per client address). Default: the store's. */
  anonymousMaxKeys?: number;
  /**
   * `rateLimit.cost`, `rateLimit.ban` and `rateLimit.algorithm` of the petstore. Default: none (every operation
   * costs 1; the default ban; fixed windows).
   */
  rateLimit?: Pick<PetstoreRateLimitOptions, 'cost' | 'ban' | 'algorithm'>;
  /** The petstore's `docs` option (the reference page at /v1/docs). Default: off. */
  docs?: boolean;
}

/**
 * The memory stores behind a server's petstore, for cases that look inside: how many categories exist, how
 * many keys each rate-limit store tracks.
 */
export interface TestStores {
  categories: MemoryCategoryStore;
  /** Rate-limit records of API keys' accounts (`account:<accountId>`). */
  keys: MemoryRateLimitStore;
  /** Rate-limit counters of callers without a valid key (`anon:<address>`). */
  anonymous: MemoryRateLimitStore;
  /**
   * The managed keys the petstore asks first (over a memory record store, on the server's clock), before the
   * static {@link API_KEYS}: cases issue, rotate and revoke keys through it.
   */
  managedKeys: ManagedApiKeys;
}

/** What a server implementation can do besides the API. */
export interface ServerCapabilities {
  /**
   * The host app has its own routes: `GET /health` → `{ ok: true }`, and `GET /reports` behind the
   * adapter's `petstoreGuard` → `{ accountId }` of the admitted principal (`GET /reports/expensive` the same,
   * behind a guard costing {@link EXPENSIVE_REPORT_COST}).
   */
  hostRoutes: boolean;
  /** The host app parses JSON itself before the API sees the request, and serves `POST /echo` with it. */
  hostJsonParser: 'fastify' | 'express' | undefined;
  /**
   * Who decides which URLs reach the API: `api` — the API's own notion of the prefix (Fastify with
   * `petstoreFrameworkErrors`, `petstoreNodeHandler`); `express` — Express 5's mount matching (`/v1` and `/v1/…`
   * only, case-insensitive); `express4` — Express 4's, which also takes `/v1//categories` as `/v1/categories`; `whatwg-url` — the Fetch server's WHATWG URL, with dot segments resolved.
   */
  prefixRouting: 'api' | 'express' | 'express4' | 'whatwg-url';
}

/** One running server. */
export interface RunningServer {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  readonly origin: string;
  /** The server's clock (frozen until a case moves it). */
  readonly clock: FakeClock;
  /** The petstore the server serves (in this process). */
  readonly petstore: Petstore;
  /** The memory stores of {@link petstore}. */
  readonly stores: TestStores;
  /** Every call of a host handler so far, oldest first. */
  readonly hostCalls: readonly HostCall[];
  /** One entry (`true`) for each request for {@link SLOW_PET_ID} whose handler saw its signal abort. */
  readonly abortions: readonly boolean[];
  /**
   * Every error the petstore reported (its `onInternalError`), oldest first: kept here rather than printed, so a
   * case that provokes one asserts it, and the contract and hostile suites fail on any other.
   */
  readonly internalErrors: readonly unknown[];
  /** Stops listening and drops open connections. */
  close(): Promise<void>;
}

/** A server implementation: its name, capabilities, and how to start a fresh instance. */
export interface ServerImpl {
  readonly name: string;
  readonly capabilities: ServerCapabilities;
  start(options?: StartOptions): Promise<RunningServer>;
}

/** What every implementation's `start` builds before wiring its framework. */
export interface TestPetstore {
  clock: FakeClock;
  petstore: Petstore;
  stores: TestStores;
  hostCalls: HostCall[];
  abortions: boolean[];
  /** What the petstore reported to its `onInternalError` (see {@link RunningServer.internalErrors}). */
  internalErrors: unknown[];
}

/**
 * A fresh petstore with memory stores, a fake clock at {@link CLOCK_START_MS}, managed keys then {@link STATIC_KEYS},
 * {@link PET_DEPRECATION}, {@link STABILITY}, and (unless `handlers: false`) host handlers that record their
 * calls: getPetById echoes `{ id, requestedBy, stability }`, listStoreOrders answers {@link STORE_ORDERS}.
 * Exported for in-process cases (`petstore.handle`) that need no socket.
 */
export function testPetstore(options: StartOptions = {}): TestPetstore {
  const clock = fakeClock(CLOCK_START_MS);
  const hostCalls: HostCall[] = [];
  const abortions: boolean[] = [];
  const internalErrors: unknown[] = [];
  const record = (context: HostOperationContext) =>
    hostCalls.push({
      operationId: context.operationId,
      params: { ...context.params },
      query: context.query.toString(),
      accountId: context.principal.accountId,
      stability: context.stability ?? null,
    });
  const handlers: Partial<Record<HostOperationId, HostOperationHandler>> = {
    getPetById: async (context) => {
      record(context);
      if (context.params['petId'] === String(BROKEN_PET_ID)) return { body: { id: BROKEN_PET_ID }, headers: { 'x-note': 'a\r\nb' } };
      if (context.params['petId'] === String(SLOW_PET_ID)) {
        // Waits for the signal: the client going away, or the server closing the connection when it stops.
        await new Promise<void>((resolve) => {
          if (context.signal.aborted) resolve();
          else context.signal.addEventListener('abort', () => resolve(), { once: true });
        });
        abortions.push(true);
        return { body: { id: SLOW_PET_ID } };
      }
      return {
        body: {
          id: Number(context.params['petId']),
          requestedBy: context.principal.accountId,
          stability: context.stability ?? null,
        },
      };
    },
    listStoreOrders: (context) => {
      record(context);
      return { body: STORE_ORDERS };
    },
  };
  // Bounds far above what a case uses, far below the defaults (100,000 keys and idempotency records): lru-cache sets
  // aside room for its bound when created, and the suite creates hundreds of petstores.
  const stores: TestStores = {
    managedKeys: managedApiKeys({ store: memoryApiKeyRecordStore(), clock, cache: { maxKeys: 1_000, maxUnknownKeys: 1_000 } }),
    categories: memoryCategoryStore({ maxCategories: 1_000, maxIdempotencyKeys: 1_000 }),
    keys: memoryRateLimitStore({ clock, maxKeys: 1_000 }),
    anonymous: memoryRateLimitStore({ clock, maxKeys: options.anonymousMaxKeys ?? 1_000 }),
  };
  const petstore = createPetstore({
    apiKeys: [stores.managedKeys, staticApiKeys(STATIC_KEYS)],
    categories: stores.categories,
    rateLimit: { store: stores.keys, anonymousStore: stores.anonymous, ...options.rateLimit },
    clock,
    ...(options.handlers === false ? {} : { handlers }),
    deprecations: { getPetById: { ...PET_DEPRECATION, ...options.deprecation } },
    stability: STABILITY,
    ...(options.docs === true ? { docs: true } : {}),
    onInternalError: (error) => internalErrors.push(error),
  });
  return { clock, petstore, stores, hostCalls, abortions, internalErrors };
}

function originOf(address: AddressInfo | string | null): string {
  if (address === null || typeof address === 'string') throw new Error(`unexpected server address ${String(address)}`);
  return `http://127.0.0.1:${address.port}`;
}

/** Closes a Node server, dropping idle and active keep-alive connections so it closes promptly. */
function closeNodeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((error) => (error ? reject(error) : resolve()));
    server.closeAllConnections();
  });
}

function listenNode(server: Server): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(originOf(server.address())));
  });
}

/** True when the host should refuse the request itself (see {@link HOST_REFUSAL_HEADER}). */
const refusedByHost = (headers: Record<string, string | string[] | undefined>) => headers[HOST_REFUSAL_HEADER] !== undefined;
const hostRefusal = () => Object.assign(new Error(HOST_REFUSAL.hostErrorHandler), { statusCode: 403, status: 403 });

/**
 * A host Fastify 5 app with its own routes (one guarded), JSON parser, error handler and an `onRequest` hook,
 * and the plugin under `/v1`.
 */
const fastifyImpl: ServerImpl = {
  name: 'fastify',
  capabilities: { hostRoutes: true, hostJsonParser: 'fastify', prefixRouting: 'api' },
  async start(options) {
    const { clock, petstore, stores, hostCalls, abortions, internalErrors } = testPetstore(options);
    // Fastify rejects malformed URLs before any plugin runs; frameworkErrors hands those under /v1 to the API.
    const app = Fastify({ logger: false, frameworkErrors: petstoreFrameworkErrors(petstore, { prefix: '/v1' }) });
    app.setErrorHandler((error: { message: string; statusCode?: number }, _request, reply) =>
      reply.code(error.statusCode ?? 500).send({ hostErrorHandler: error.message, statusCode: error.statusCode ?? 500 }),
    );
    app.addHook('onRequest', async (request) => {
      if (refusedByHost(request.headers)) throw hostRefusal();
    });
    app.get('/health', async () => ({ ok: true }));
    app.post('/echo', async (request) => request.body);
    app.get('/reports', { onRequest: fastifyGuard(petstore) }, async (request) => ({
      accountId: principalOf(request)?.accountId,
    }));
    app.get('/reports/expensive', { onRequest: fastifyGuard(petstore, { cost: EXPENSIVE_REPORT_COST }) }, async (request) => ({
      accountId: principalOf(request)?.accountId,
    }));
    await app.register(petstoreFastify, { prefix: '/v1', petstore });
    // Node answers an Expect other than 100-continue itself unless told otherwise: this hands those under /v1 to the API.
    app.server.on('checkExpectation', petstoreCheckExpectation({ prefix: '/v1' }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const origin = originOf(app.server.address());
    return { origin, clock, petstore, stores, hostCalls, abortions, internalErrors, close: () => app.close() };
  },
};

/**
 * A host Express app (`framework`: Express 5 or 4) with its own routes (one guarded), a middleware before the
 * API that may refuse, a final error handler, optionally `express.json()`, and the API under `/v1`.
 */
function expressImpl(name: string, framework: typeof express, withJsonParser: boolean): ServerImpl {
  return {
    name,
    capabilities: {
      hostRoutes: true,
      hostJsonParser: withJsonParser ? 'express' : undefined,
      prefixRouting: framework === express ? 'express' : 'express4',
    },
    async start(options) {
      const { clock, petstore, stores, hostCalls, abortions, internalErrors } = testPetstore(options);
      const app = framework();
      app.use((request, _response, next) => next(refusedByHost(request.headers) ? hostRefusal() : undefined));
      if (withJsonParser) {
        app.use(framework.json());
        app.post('/echo', (request, response) => {
          response.json(request.body);
        });
      }
      app.get('/health', (_request, response) => {
        response.json({ ok: true });
      });
      app.get('/reports', expressGuard(petstore), (request, response) => {
        response.json({ accountId: expressPrincipalOf(request)?.accountId });
      });
      app.get('/reports/expensive', expressGuard(petstore, { cost: EXPENSIVE_REPORT_COST }), (request, response) => {
        response.json({ accountId: expressPrincipalOf(request)?.accountId });
      });
      app.use('/v1', petstoreExpress({ petstore }));
      app.use(((error, _request, response, _next) => {
        const status = (error as { status?: number }).status ?? 500;
        response.status(status).json({ hostErrorHandler: (error as Error).message, statusCode: status });
      }) as express.ErrorRequestHandler);
      const server = createServer(app);
      server.on('checkExpectation', petstoreCheckExpectation({ prefix: '/v1' }));
      const origin = await listenNode(server);
      return { origin, clock, petstore, stores, hostCalls, abortions, internalErrors, close: () => closeNodeServer(server) };
    },
  };
}

/**
 * `http.createServer` with the core's `petstoreNodeHandler`, no framework: a wrapper that may refuse before the
 * API, and host routes served by the handler's `fallback` (`/reports` behind `petstore.guard`).
 */
const nodeImpl: ServerImpl = {
  name: 'node:http',
  capabilities: { hostRoutes: true, hostJsonParser: undefined, prefixRouting: 'api' },
  async start(options) {
    const { clock, petstore, stores, hostCalls, abortions, internalErrors } = testPetstore(options);
    const json = (response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
      writeNodeResponse(response, { status, headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const api = petstoreNodeHandler(petstore, {
      prefix: '/v1',
      fallback: (request, response) => {
        if (request.url === '/health') return json(response, 200, { ok: true });
        if (request.url !== '/reports' && request.url !== '/reports/expensive') return json(response, 404, { host: 'not found' });
        const guardOptions = request.url === '/reports/expensive' ? { cost: EXPENSIVE_REPORT_COST } : {};
        void petstore
          .guard({ method: request.method ?? 'GET', path: request.url, headers: request.headers, clientAddress: request.socket.remoteAddress }, guardOptions)
          .then((result) =>
            result.allowed
              ? json(response, 200, { accountId: result.principal.accountId }, result.headers)
              : writeNodeResponse(response, result.response),
          );
      },
    });
    const server = createServer((request, response) => {
      if (refusedByHost(request.headers)) json(response, 403, HOST_REFUSAL);
      else api(request, response);
    });
    server.on('checkExpectation', petstoreCheckExpectation({ prefix: '/v1' }));
    const origin = await listenNode(server);
    return { origin, clock, petstore, stores, hostCalls, abortions, internalErrors, close: () => closeNodeServer(server) };
  },
};

/** The Fetch entry served by @hono/node-server, behind a wrapper that may refuse; no host routes. */
const fetchImpl: ServerImpl = {
  name: 'fetch',
  capabilities: { hostRoutes: false, hostJsonParser: undefined, prefixRouting: 'whatwg-url' },
  async start(options) {
    const { clock, petstore, stores, hostCalls, abortions, internalErrors } = testPetstore(options);
    let server: Server | undefined;
    const address = await new Promise<AddressInfo>((resolve) => {
      server = serve(
        {
          fetch: (request, env) =>
            request.headers.has(HOST_REFUSAL_HEADER)
              ? Response.json(HOST_REFUSAL, { status: 403 })
              : petstore.fetch(request, {
                  clientAddress: 'incoming' in env ? env.incoming.socket.remoteAddress : undefined,
                  // Node 20 drops header fields past its limit without a word: tell the API so.
                  headersIncomplete: 'incoming' in env ? nodeHeadersCutOff(env.incoming) : false,
                }),
          port: 0,
          hostname: '127.0.0.1',
        },
        resolve,
      ) as Server;
    });
    const running = server as Server;
    running.on('checkExpectation', petstoreCheckExpectation({ prefix: '/v1' }));
    return { origin: originOf(address), clock, petstore, stores, hostCalls, abortions, internalErrors, close: () => closeNodeServer(running) };
  },
};

/** Every server implementation the contract runs against. */
export const SERVER_IMPLS: readonly ServerImpl[] = [
  fastifyImpl,
  expressImpl('express', express, false),
  expressImpl('express+json', express, true),
  expressImpl('express4', express4, false),
  expressImpl('express4+json', express4, true),
  nodeImpl,
  fetchImpl,
];

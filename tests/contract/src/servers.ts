/**
 * The server implementations the contract suite runs against, each listening on a real socket
 * (127.0.0.1, port 0) with a fresh petstore: memory stores, a frozen fake clock, and the API keys of
 * {@link API_KEYS}.
 *
 * Modelled on @whatwg-node/server's `runTestsForEachServerImpl` (test/test-server.ts): one factory per
 * implementation, and capability flags for cases that only some of them can run.
 */
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { serve } from '@hono/node-server';
import { petstoreExpress } from '@petstore/adapter-express';
import { petstoreFastify } from '@petstore/adapter-fastify';
import { createPetstore, staticApiKeys, type Petstore, type StaticApiKey } from '@petstore/core';
import { fakeClock, type FakeClock } from '@petstore/core/testing';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import express from 'express';
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
} as const;

/** The custom limits of {@link API_KEYS.limits}. */
export const SMALL_LIMITS = { requestsPerMinute: 5, requestsPerDay: 8 } as const;
/** The anonymous limits the core applies per client address by default (SPEC §8 leaves them open). */
export const ANONYMOUS_LIMITS = { requestsPerMinute: 30, requestsPerDay: 500 } as const;

const BIG_LIMITS = { requestsPerMinute: 100_000, requestsPerDay: 1_000_000 };

const STATIC_KEYS: StaticApiKey[] = [
  { key: API_KEYS.list, plan: 'free' },
  { key: API_KEYS.auth, plan: 'free' },
  { key: API_KEYS.burst, plan: 'free' },
  { key: API_KEYS.limits, plan: 'enterprise', limits: SMALL_LIMITS },
  { key: API_KEYS.bulk, plan: 'enterprise', limits: BIG_LIMITS },
  { key: API_KEYS.general, plan: 'enterprise', limits: BIG_LIMITS },
];

/**
 * Start of every server's fake clock: mid-day and mid-second (2026-01-01T12:34:56.789Z), so rounding of
 * `X-RateLimit-Reset` and `Retry-After` shows. The clock is frozen: no case crosses a minute by accident.
 */
export const CLOCK_START_MS = Date.UTC(2026, 0, 1, 12, 34, 56, 789);

/** What a server implementation can do besides the API. */
export interface ServerCapabilities {
  /** The host app has its own routes: `GET /health` → `{ ok: true }`. */
  hostRoutes: boolean;
  /** The host app parses JSON itself before the API sees the request, and serves `POST /echo` with it. */
  hostJsonParser: 'fastify' | 'express' | undefined;
}

/** One running server. */
export interface RunningServer {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  readonly origin: string;
  /** The server's clock (frozen until a case moves it). */
  readonly clock: FakeClock;
  /** Stops listening and drops open connections. */
  close(): Promise<void>;
}

/** A server implementation: its name, capabilities, and how to start a fresh instance. */
export interface ServerImpl {
  readonly name: string;
  readonly capabilities: ServerCapabilities;
  start(): Promise<RunningServer>;
}

/** A fresh petstore with memory stores, the fake clock and {@link STATIC_KEYS}. */
function testPetstore(clock: FakeClock): Petstore {
  return createPetstore({
    apiKeys: staticApiKeys(STATIC_KEYS),
    categories: memoryCategoryStore(),
    rateLimit: {
      store: memoryRateLimitStore({ clock }),
      anonymousStore: memoryRateLimitStore({ clock }),
    },
    clock,
  });
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

/** A host Fastify 5 app with its own routes and JSON parser, and the plugin under `/v1`. */
const fastifyImpl: ServerImpl = {
  name: 'fastify',
  capabilities: { hostRoutes: true, hostJsonParser: 'fastify' },
  async start() {
    const clock = fakeClock(CLOCK_START_MS);
    const app = Fastify({ logger: false });
    app.get('/health', async () => ({ ok: true }));
    app.post('/echo', async (request) => request.body);
    await app.register(petstoreFastify, { prefix: '/v1', petstore: testPetstore(clock) });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const origin = originOf(app.server.address());
    return { origin, clock, close: () => app.close() };
  },
};

function expressImpl(name: string, withJsonParser: boolean): ServerImpl {
  return {
    name,
    capabilities: { hostRoutes: true, hostJsonParser: withJsonParser ? 'express' : undefined },
    async start() {
      const clock = fakeClock(CLOCK_START_MS);
      const app = express();
      if (withJsonParser) {
        app.use(express.json());
        app.post('/echo', (request, response) => {
          response.json(request.body);
        });
      }
      app.get('/health', (_request, response) => {
        response.json({ ok: true });
      });
      app.use('/v1', petstoreExpress({ petstore: testPetstore(clock) }));
      const server = createServer(app);
      const origin = await listenNode(server);
      return { origin, clock, close: () => closeNodeServer(server) };
    },
  };
}

/** The Fetch entry served by @hono/node-server; no host routes. */
const fetchImpl: ServerImpl = {
  name: 'fetch',
  capabilities: { hostRoutes: false, hostJsonParser: undefined },
  async start() {
    const clock = fakeClock(CLOCK_START_MS);
    const petstore = testPetstore(clock);
    let server: Server | undefined;
    const address = await new Promise<AddressInfo>((resolve) => {
      server = serve(
        {
          fetch: (request, env) =>
            petstore.fetch(request, {
              clientAddress: 'incoming' in env ? env.incoming.socket.remoteAddress : undefined,
            }),
          port: 0,
          hostname: '127.0.0.1',
        },
        resolve,
      ) as Server;
    });
    const running = server as Server;
    return { origin: originOf(address), clock, close: () => closeNodeServer(running) };
  },
};

/** Every server implementation the contract runs against. */
export const SERVER_IMPLS: readonly ServerImpl[] = [
  fastifyImpl,
  expressImpl('express', false),
  expressImpl('express+json', true),
  fetchImpl,
];

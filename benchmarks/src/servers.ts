/**
 * The servers the HTTP benchmark compares. Each answers GET /v1/categories with the same three categories,
 * authenticated with one API key whose quota is large enough never to reject.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import bearerAuth from '@fastify/bearer-auth';
import rateLimit from '@fastify/rate-limit';
import { petstoreExpress } from '@petstore/adapter-express';
import { petstoreFastify } from '@petstore/adapter-fastify';
import { createPetstore, staticApiKeys, type Petstore, type RateLimitStore } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { redisRateLimitStore } from '@petstore/storage-redis';
import express from 'express';
import { rateLimit as expressRateLimit } from 'express-rate-limit';
import Fastify from 'fastify';
import { Redis } from 'ioredis';

/** The API key every server accepts. */
export const BENCH_KEY = 'bench-key-4f9a1c2e7b';

/**
 * The API keys a server accepts when started with `BENCH_KEYS=<count>` (default 1): `BENCH_KEY` first, then
 * `bench-key-<i>`. The scale-out benchmark sends requests spread over them, so they are counted apart.
 */
export function benchKeys(count: number): string[] {
  return [BENCH_KEY, ...Array.from({ length: count - 1 }, (_, i) => `bench-key-${i + 1}`)];
}
/** A quota no run can use up. */
const HUGE = 1_000_000_000;

export const CATEGORIES = [
  { id: 1, name: 'Dogs', description: 'Canine breeds' },
  { id: 2, name: 'Cats', description: 'Feline breeds' },
  { id: 3, name: 'Birds' },
];

/** The servers, in the order of the report. */
export const SERVER_NAMES = [
  'fastify-bare',
  'fastify-petstore',
  'fastify-peer',
  'express-bare',
  'express-petstore',
  'express-peer',
  'fastify-petstore-redis',
  'express-petstore-redis',
  'fastify-peer-redis',
  'fastify-peer-redis-pipelined',
] as const;
export type ServerName = (typeof SERVER_NAMES)[number];

async function ourPetstore(store: RateLimitStore, keys: string[]): Promise<Petstore> {
  const categories = memoryCategoryStore();
  for (const { name, description } of CATEGORIES) {
    await categories.create(description === undefined ? { name } : { name, description });
  }
  return createPetstore({
    apiKeys: staticApiKeys(keys.map((key) => ({ key, plan: 'enterprise', limits: { requestsPerMinute: HUGE, requestsPerDay: HUGE } }))),
    categories,
    rateLimit: { store, anonymousStore: memoryRateLimitStore() },
  });
}

/** The peer's bearer check for Express: SHA-256 digests compared in constant time. */
function expressBearer(): express.RequestHandler {
  const expected = createHash('sha256').update(BENCH_KEY).digest();
  return (request, response, next) => {
    const header = request.headers.authorization ?? '';
    const token = header.startsWith('Bearer ') ? header.slice(7) : '';
    if (!timingSafeEqual(createHash('sha256').update(token).digest(), expected)) {
      response.status(401).json({ code: 'unauthorized', message: 'invalid key', status: 401 });
      return;
    }
    next();
  };
}

/** A running benchmark server. `redisCommands()` counts the commands its Redis client sent (round trips). */
export interface BenchServer {
  port: number;
  redisCommands(): number;
  close(): Promise<void>;
}

/**
 * Starts one server on 127.0.0.1, port 0, accepting `keys`. `fastify-peer-redis-pipelined` is
 * `fastify-peer-redis` with ioredis's `enableAutoPipelining`, an option its users can set on their client.
 */
export async function startServer(name: ServerName, redisUrl: string | undefined, keys: string[] = [BENCH_KEY]): Promise<BenchServer> {
  const redis = name.includes('-redis')
    ? new Redis(redisUrl as string, { enableOfflineQueue: true, enableAutoPipelining: name.endsWith('-pipelined') })
    : undefined;
  // Every request to Redis, whatever the library, goes through sendCommand: count them at the client.
  let commands = 0;
  if (redis) {
    const sendCommand = redis.sendCommand.bind(redis);
    redis.sendCommand = ((...args: Parameters<typeof sendCommand>) => {
      commands += 1;
      return sendCommand(...args);
    }) as typeof redis.sendCommand;
  }
  const redisCommands = () => commands;
  const closeRedis = async () => {
    if (redis) await redis.quit();
  };
  if (name.startsWith('fastify')) {
    const app = Fastify({ logger: false });
    if (name === 'fastify-bare') {
      app.get('/v1/categories', async () => CATEGORIES);
    } else if (name.startsWith('fastify-peer')) {
      // With many keys, @fastify/bearer-auth's own check compares the token with every key in turn (constant
      // time, O(keys)); give it what ours does instead, a lookup by SHA-256 digest, so the benchmark compares
      // rate limiting, not key lookup.
      const digests = new Set(keys.map((key) => createHash('sha256').update(key).digest('hex')));
      await app.register(
        bearerAuth,
        keys.length === 1 ? { keys: new Set(keys) } : { keys: new Set<string>(), auth: (token: string) => digests.has(createHash('sha256').update(token).digest('hex')) },
      );
      await app.register(rateLimit, {
        max: HUGE,
        timeWindow: 60_000,
        hook: 'preHandler', // after authentication, as ours
        keyGenerator: (request) => request.headers.authorization ?? request.ip,
        ...(redis ? { redis } : {}),
      });
      app.get('/v1/categories', async () => CATEGORIES);
    } else {
      const store = redis ? redisRateLimitStore({ client: redis }) : memoryRateLimitStore();
      await app.register(petstoreFastify, { prefix: '/v1', petstore: await ourPetstore(store, keys) });
    }
    await app.listen({ port: 0, host: '127.0.0.1' });
    return {
      port: (app.server.address() as AddressInfo).port,
      redisCommands,
      close: async () => {
        await app.close();
        await closeRedis();
      },
    };
  }
  const app = express();
  if (name === 'express-bare') {
    app.get('/v1/categories', (_request, response) => {
      response.json(CATEGORIES);
    });
  } else if (name === 'express-peer') {
    app.use(
      '/v1',
      expressBearer(),
      expressRateLimit({
        windowMs: 60_000,
        limit: HUGE,
        standardHeaders: 'draft-6',
        legacyHeaders: true,
        keyGenerator: (request) => request.headers.authorization ?? 'anonymous',
        validate: false,
      }),
    );
    app.get('/v1/categories', (_request, response) => {
      response.json(CATEGORIES);
    });
  } else {
    const store = redis ? redisRateLimitStore({ client: redis }) : memoryRateLimitStore();
    app.use('/v1', petstoreExpress({ petstore: await ourPetstore(store, keys) }));
  }
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    redisCommands,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await closeRedis();
    },
  };
}

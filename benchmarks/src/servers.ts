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

/** The one API key every server accepts. */
export const BENCH_KEY = 'bench-key-4f9a1c2e7b';
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
] as const;
export type ServerName = (typeof SERVER_NAMES)[number];

async function ourPetstore(store: RateLimitStore): Promise<Petstore> {
  const categories = memoryCategoryStore();
  for (const { name, description } of CATEGORIES) {
    await categories.create(description === undefined ? { name } : { name, description });
  }
  return createPetstore({
    apiKeys: staticApiKeys([
      { key: BENCH_KEY, plan: 'enterprise', limits: { requestsPerMinute: HUGE, requestsPerDay: HUGE } },
    ]),
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

/** Starts one server on 127.0.0.1, port 0. */
export async function startServer(name: ServerName, redisUrl: string | undefined): Promise<BenchServer> {
  const redis = name.endsWith('-redis') ? new Redis(redisUrl as string, { enableOfflineQueue: true }) : undefined;
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
    } else if (name === 'fastify-peer' || name === 'fastify-peer-redis') {
      await app.register(bearerAuth, { keys: new Set([BENCH_KEY]) });
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
      await app.register(petstoreFastify, { prefix: '/v1', petstore: await ourPetstore(store) });
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
    app.use('/v1', petstoreExpress({ petstore: await ourPetstore(store) }));
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

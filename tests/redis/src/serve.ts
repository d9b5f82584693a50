/**
 * One app instance on a real socket: a petstore mounted under /v1 on its own Fastify or Express server. Shared by
 * the Redis and PostgreSQL suites (tests/postgres imports it), which differ only in the stores they give it.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { petstoreExpress } from '@petstore/adapter-express';
import { petstoreFastify } from '@petstore/adapter-fastify';
import type { Petstore } from '@petstore/core';
import express from 'express';
import Fastify from 'fastify';
import { httpRequest } from '../../contract/src/http-request.js';

/** One running app instance. */
export interface Instance {
  name: string;
  origin: string;
  close(): Promise<void>;
}

/** Serves `petstore` on 127.0.0.1 (a free port); `close()` stops the server, then runs `closeStorage`. */
export async function servePetstore(framework: 'fastify' | 'express', petstore: Petstore, closeStorage: () => Promise<void>): Promise<Instance> {
  if (framework === 'fastify') {
    const app = Fastify();
    await app.register(petstoreFastify, { prefix: '/v1', petstore });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    return {
      name: `fastify:${port}`,
      origin: `http://127.0.0.1:${port}`,
      close: async () => {
        await app.close();
        await closeStorage();
      },
    };
  }
  const app = express();
  app.use('/v1', petstoreExpress({ petstore }));
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    name: `express:${port}`,
    origin: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await closeStorage();
    },
  };
}

/** A request's outcome: status, lowercase headers, and the parsed body. */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** Sends one request to an instance. */
export async function call(
  instance: Instance,
  path: string,
  init: { method?: string; apiKey?: string; json?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.apiKey) headers['authorization'] = `Bearer ${init.apiKey}`;
  if (init.json !== undefined) headers['content-type'] = 'application/json';
  const response = await httpRequest(`${instance.origin}${path}`, {
    method: init.method ?? (init.json === undefined ? 'GET' : 'POST'),
    headers,
    ...(init.json === undefined ? {} : { body: JSON.stringify(init.json) }),
  });
  const text = response.text;
  const answerHeaders: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    answerHeaders[name] = value;
  });
  return { status: response.status, headers: answerHeaders, body: text === '' ? undefined : JSON.parse(text) };
}

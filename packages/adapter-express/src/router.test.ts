import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { createPetstore, staticApiKeys, type Petstore } from '@petstore/core';
import { fakeClock } from '@petstore/core/testing';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import express, { type Express } from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { petstoreExpress, petstoreGuard, principalOf } from './index.js';

const auth = { authorization: 'Bearer test-key' };
const closers: Array<() => void> = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

async function serve(app: Express): Promise<string> {
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => server.close());
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const handlers = () =>
  petstoreExpress({
    apiKeys: staticApiKeys([{ key: 'test-key', plan: 'free' }]),
    categories: memoryCategoryStore(),
    rateLimit: { store: memoryRateLimitStore() },
    clock: fakeClock(),
  });

describe('petstoreExpress', () => {
  it('serves the API at whatever path it is mounted on', async () => {
    const app = express();
    app.use('/api/v1', handlers());
    const base = await serve(app);
    const answer = await fetch(`${base}/api/v1/categories`, { headers: auth });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('x-ratelimit-limit')).toBe('60');
  });

  it("passes the host's own errors on to the host's error handler", async () => {
    const app = express();
    app.use('/v1', (_request, _response, next) => next(new Error('host middleware failed')));
    app.use('/v1', handlers());
    app.use(((error, _request, response, _next) => {
      response.status(503).json({ host: (error as Error).message });
    }) as express.ErrorRequestHandler);
    const base = await serve(app);
    const answer = await fetch(`${base}/v1/categories`, { headers: auth });
    expect(answer.status).toBe(503);
    expect(await answer.json()).toEqual({ host: 'host middleware failed' });
  });

  it("passes a host error that merely looks like a body-parser error (status 4xx, its own type) on to the host", async () => {
    const app = express();
    app.use('/v1', (_request, _response, next) => next(Object.assign(new Error('no entry'), { status: 403, type: 'auth.denied' })));
    app.use('/v1', petstoreExpress({ petstore: createPetstore({ apiKeys: staticApiKeys([]), categories: memoryCategoryStore(), rateLimit: { store: memoryRateLimitStore() } }) }));
    app.use(((error, _request, response, _next) => {
      response.status((error as { status: number }).status).json({ host: (error as Error).message });
    }) as express.ErrorRequestHandler);
    const base = await serve(app);
    const answer = await fetch(`${base}/v1/categories`, { headers: auth });
    expect(answer.status).toBe(403);
    expect(await answer.json()).toEqual({ host: 'no entry' });
    expect(answer.headers.get('x-ratelimit-limit')).toBeNull();
  });

  it("answers with the Error body when the host's express.json() rejects a body, never Express's HTML page", async () => {
    const app = express();
    app.use(express.json({ limit: '1kb' }));
    app.use('/v1', handlers());
    const base = await serve(app);
    const post = (body: string) =>
      fetch(`${base}/v1/categories`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body,
      });
    const broken = await post('{bad');
    expect(broken.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await broken.json()).toEqual({ code: 'invalid_json', message: expect.any(String), status: 400 });
    const tooLarge = await post(JSON.stringify({ name: 'x', description: 'y'.repeat(5000) }));
    expect(tooLarge.status).toBe(413);
    expect(await tooLarge.json()).toMatchObject({ code: 'payload_too_large', status: 413 });
    expect(tooLarge.headers.get('x-ratelimit-remaining')).toBe('58');
  });

  it("takes a body the host's express.json() inflated, and answers a coding it could not decode with 415", async () => {
    const app = express();
    app.use(express.json());
    app.use('/v1', handlers());
    const base = await serve(app);
    const post = (body: Uint8Array<ArrayBuffer> | string, contentEncoding: string) =>
      fetch(`${base}/v1/categories`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', 'content-encoding': contentEncoding },
        body,
      });
    const gzipped = await post(new Uint8Array(gzipSync(JSON.stringify({ name: 'Dogs' }))), 'gzip');
    expect(gzipped.status).toBe(201);
    expect(await gzipped.json()).toMatchObject({ name: 'Dogs' });
    const unknown = await post(JSON.stringify({ name: 'Cats' }), 'x-unknown');
    expect(unknown.status).toBe(415);
    expect(await unknown.json()).toMatchObject({ code: 'unsupported_encoding', status: 415 });
    expect(unknown.headers.get('x-ratelimit-remaining')).toBe('58');
    const listed = await fetch(`${base}/v1/categories`, { headers: auth });
    expect(await listed.json()).toEqual([{ id: 1, name: 'Dogs' }]);
  });

  it("uses req.ip, so the host's trust proxy setting decides the anonymous client address", async () => {
    const app = express();
    app.set('trust proxy', true);
    app.use('/v1', handlers());
    const base = await serve(app);
    const from = async (address: string) =>
      (await fetch(`${base}/v1/categories`, { headers: { 'x-forwarded-for': address } })).headers.get(
        'x-ratelimit-remaining',
      );
    expect(await from('198.51.100.1')).toBe('29');
    expect(await from('198.51.100.1')).toBe('28');
    expect(await from('198.51.100.2')).toBe('29');
  });

  it('guards host routes with the same keys, limits, headers and errors', async () => {
    const petstore: Petstore = createPetstore({
      apiKeys: staticApiKeys([{ key: 'test-key', plan: 'free', accountId: 'acme' }]),
      categories: memoryCategoryStore(),
      rateLimit: { store: memoryRateLimitStore() },
      clock: fakeClock(),
    });
    const app = express();
    app.get('/reports', petstoreGuard(petstore), (request, response) => {
      response.json({ principal: principalOf(request), locals: response.locals.petstorePrincipal });
    });
    app.get('/open', (request, response) => {
      response.json({ principal: principalOf(request) ?? null });
    });
    app.use('/v1', petstoreExpress({ petstore }));
    const base = await serve(app);
    const admitted = await fetch(`${base}/reports`, { headers: auth });
    expect(admitted.status).toBe(200);
    const principal = { keyId: expect.any(String), accountId: 'acme', plan: 'free' };
    expect(await admitted.json()).toEqual({ principal, locals: principal });
    // A route without the guard has no principal, whatever the request carries.
    expect(await (await fetch(`${base}/open`, { headers: auth })).json()).toEqual({ principal: null });
    expect(admitted.headers.get('x-ratelimit-remaining')).toBe('59');
    const api = await fetch(`${base}/v1/categories`, { headers: auth });
    expect(api.headers.get('x-ratelimit-remaining')).toBe('58');
    const refused = await fetch(`${base}/reports`, { headers: { authorization: 'Bearer nope' } });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({ code: 'unauthorized', message: 'The API key is invalid.', status: 401 });
    expect(refused.headers.get('www-authenticate')).toContain('error="invalid_token"');
  });

  it('charges a guard made with { cost } that many units, and refuses a wrong cost when the guard is made', async () => {
    const petstore: Petstore = createPetstore({
      apiKeys: staticApiKeys([{ key: 'test-key', plan: 'free', accountId: 'acme' }]),
      categories: memoryCategoryStore(),
      rateLimit: { store: memoryRateLimitStore() },
      clock: fakeClock(),
    });
    const app = express();
    app.get('/reports', petstoreGuard(petstore, { cost: 7 }), (_request, response) => {
      response.json({ ok: true });
    });
    const base = await serve(app);
    const admitted = await fetch(`${base}/reports`, { headers: auth });
    expect(admitted.status).toBe(200);
    expect(admitted.headers.get('x-ratelimit-remaining')).toBe('53');
    expect(() => petstoreGuard(petstore, { cost: 2.5 })).toThrow(/^petstoreGuard: cost must be a whole number >= 1, got 2.5$/);
  });
});

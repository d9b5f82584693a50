import { createPetstore, staticApiKeys, type Petstore } from '@petstore/core';
import { fakeClock } from '@petstore/core/testing';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { petstoreFastify, petstoreFrameworkErrors, petstoreGuard, principalOf } from './index.js';

const auth = { authorization: 'Bearer test-key' };
const newPetstore = (): Petstore =>
  createPetstore({
    apiKeys: staticApiKeys([{ key: 'test-key', plan: 'pro' }]),
    categories: memoryCategoryStore(),
    rateLimit: { store: memoryRateLimitStore() },
    clock: fakeClock(),
  });

describe('petstoreFastify', () => {
  it('mounts at /v1 when registered without a prefix', async () => {
    const app = Fastify();
    await app.register(petstoreFastify, { petstore: newPetstore() });
    expect((await app.inject({ url: '/v1/categories', headers: auth })).statusCode).toBe(200);
    // Outside /v1 the host's own not-found answer stands, not the API's Error body.
    const outside = await app.inject({ url: '/categories', headers: auth });
    expect(outside.statusCode).toBe(404);
    expect(outside.json()).toMatchObject({ error: 'Not Found', statusCode: 404 });
  });

  it('mounts at the register prefix, also inside a prefixed parent', async () => {
    const app = Fastify();
    await app.register(
      async (api) => {
        await api.register(petstoreFastify, { prefix: '/v1', petstore: newPetstore() });
      },
      { prefix: '/pets-api' },
    );
    const answer = await app.inject({ url: '/pets-api/v1/categories', headers: auth });
    expect(answer.statusCode).toBe(200);
    expect(answer.headers['x-ratelimit-limit']).toBe('300');
    expect((await app.inject({ url: '/pets-api/v1/nope', headers: auth })).json()).toMatchObject({ code: 'not_found' });
  });

  it("leaves the host's parsers, error handler, not-found handler and hooks untouched", async () => {
    const app = Fastify();
    app.setErrorHandler((_error, _request, reply) => reply.code(418).send({ host: 'error handler' }));
    app.setNotFoundHandler((_request, reply) => reply.code(404).send({ host: 'not found' }));
    let hostHookRuns = 0;
    app.addHook('onRequest', async () => {
      hostHookRuns += 1;
    });
    app.post('/echo', async (request) => request.body);
    await app.register(petstoreFastify, { prefix: '/v1', petstore: newPetstore() });

    const echoed = await app.inject({ method: 'POST', url: '/echo', payload: { a: 1 } });
    expect(echoed.json()).toEqual({ a: 1 });
    const broken = await app.inject({
      method: 'POST',
      url: '/echo',
      headers: { 'content-type': 'application/json' },
      payload: '{bad',
    });
    expect(broken.statusCode).toBe(418);
    expect((await app.inject({ url: '/elsewhere' })).json()).toEqual({ host: 'not found' });

    const ours = await app.inject({
      method: 'POST',
      url: '/v1/categories',
      headers: { ...auth, 'content-type': 'application/json' },
      payload: '{bad',
    });
    expect(ours.statusCode).toBe(400);
    expect(ours.json()).toEqual({ code: 'invalid_json', message: expect.any(String), status: 400 });
    expect(hostHookRuns).toBe(4);
  });

  it('passes the client address from request.ip (trustProxy honoured) to the anonymous limit', async () => {
    const app = Fastify({ trustProxy: true });
    await app.register(petstoreFastify, { prefix: '/v1', petstore: newPetstore() });
    const from = (address: string) => app.inject({ url: '/v1/categories', headers: { 'x-forwarded-for': address } });
    expect((await from('198.51.100.1')).headers['x-ratelimit-remaining']).toBe('29');
    expect((await from('198.51.100.1')).headers['x-ratelimit-remaining']).toBe('28');
    expect((await from('198.51.100.2')).headers['x-ratelimit-remaining']).toBe('29');
  });

  it('creates the petstore from options when no instance is given', async () => {
    const app = Fastify();
    await app.register(petstoreFastify, {
      prefix: '/v1',
      apiKeys: staticApiKeys([{ key: 'test-key', plan: 'free' }]),
      categories: memoryCategoryStore(),
      rateLimit: { store: memoryRateLimitStore() },
    });
    const created = await app.inject({ method: 'POST', url: '/v1/categories', headers: auth, payload: { name: 'Dogs' } });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toEqual({ id: 1, name: 'Dogs' });
  });

  it('guards host routes with the same keys, limits, headers and errors', async () => {
    const petstore = newPetstore();
    const app = Fastify();
    app.get('/reports', { onRequest: petstoreGuard(petstore) }, async (request) => ({ principal: principalOf(request) }));
    app.get('/open', async (request) => ({ principal: principalOf(request) ?? null }));
    await app.register(petstoreFastify, { prefix: '/v1', petstore });
    const admitted = await app.inject({ url: '/reports', headers: auth });
    expect(admitted.statusCode).toBe(200);
    expect(admitted.json()).toEqual({ principal: { keyId: expect.any(String), accountId: expect.any(String), plan: 'pro' } });
    // A route without the guard has no principal, whatever the request carries.
    expect((await app.inject({ url: '/open', headers: auth })).json()).toEqual({ principal: null });
    expect(admitted.headers['x-ratelimit-limit']).toBe('300');
    expect(admitted.headers['x-ratelimit-remaining']).toBe('299');
    // One quota for the API and the guarded host route.
    const api = await app.inject({ url: '/v1/categories', headers: auth });
    expect(api.headers['x-ratelimit-remaining']).toBe('298');
    const refused = await app.inject({ url: '/reports' });
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toEqual({ code: 'unauthorized', message: expect.any(String), status: 401 });
    expect(refused.headers['www-authenticate']).toBe('Bearer realm="petstore"');
    expect(refused.headers['x-ratelimit-limit']).toBe('30');
  });

  it('charges a guard made with { cost } that many units, and refuses a wrong cost when the guard is made', async () => {
    const petstore = newPetstore();
    const app = Fastify();
    app.get('/reports', { onRequest: petstoreGuard(petstore, { cost: 7 }) }, async () => ({ ok: true }));
    const admitted = await app.inject({ url: '/reports', headers: auth });
    expect(admitted.statusCode).toBe(200);
    expect(admitted.headers['x-ratelimit-remaining']).toBe('293');
    expect(() => petstoreGuard(petstore, { cost: 0 })).toThrow(/^petstoreGuard: cost must be a whole number >= 1, got 0$/);
    expect(() => petstoreGuard(petstore, { price: 2 } as never)).toThrow(/petstoreGuard: price is not an option \(options: cost\)/);
  });

  it('logs events through request.log', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const app = Fastify({
      logger: { level: 'info', stream: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) } },
    });
    await app.register(petstoreFastify, { prefix: '/v1', petstore: newPetstore() });
    await app.inject({ url: '/v1/categories', headers: { authorization: 'Bearer wrong-key' } });
    const event = lines.find((line) => line['msg'] === 'petstore: request without a valid API key');
    expect(event).toMatchObject({ level: 30, reqId: expect.any(String), petstore: { type: 'unauthorized', presentedKey: true } });
    expect(JSON.stringify(lines)).not.toContain('wrong-key');
  });

  it("sends a created petstore's setup warnings to Fastify's logger, and takes Fastify's register options", async () => {
    const lines: Array<Record<string, unknown>> = [];
    const app = Fastify({
      logger: { level: 'warn', stream: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) } },
    });
    await app.register(petstoreFastify, {
      prefix: '/v1',
      logLevel: 'warn',
      apiKeys: staticApiKeys([{ key: 'test-key', plan: 'pro' }]),
      categories: memoryCategoryStore(),
      rateLimit: { store: memoryRateLimitStore() },
      handlers: { getPetById: () => ({ body: {} }) },
    } as Parameters<typeof petstoreFastify>[1]);
    await app.ready();
    expect(lines).toContainEqual(expect.objectContaining({ level: 40, petstore: { warning: 'PETSTORE_DEPRECATED_WITHOUT_SUNSET' } }));
    expect((await app.inject({ url: '/v1/categories', headers: auth })).statusCode).toBe(200);
  });

  it('refuses wrong options when registered, naming them', async () => {
    const app = Fastify();
    await expect(
      app.register(petstoreFastify, { prefix: '/v1', apiKeys: staticApiKeys([]), categories: memoryCategoryStore() } as never).ready(),
    ).rejects.toThrow(/createPetstore: rateLimit is required/);
  });

  it('answers requests Fastify refuses for their Content-Type through the API under the prefix, charged once, and leaves others to Fastify', async () => {
    const app = Fastify(); // Fastify's own error handler: its bare 415/400 would have no Error body and no rate-limit headers
    let hostPreParsing = 0;
    app.addHook('preParsing', async () => {
      hostPreParsing += 1;
    });
    app.post('/echo', async (request) => request.body);
    await app.register(petstoreFastify, { prefix: '/v1', petstore: newPetstore() });
    const remaining = async () => Number((await app.inject({ url: '/v1/categories', headers: auth })).headers['x-ratelimit-remaining']);
    const cases = [
      { method: 'POST', contentType: 'application/json, application/json', status: 400, code: 'invalid_content_type' },
      { method: 'POST', contentType: '', status: 400, code: 'invalid_content_type' },
      { method: 'DELETE', contentType: '', status: 405, code: 'method_not_allowed' },
      { method: 'QUERY', contentType: undefined, status: 405, code: 'method_not_allowed' },
    ] as const; // QUERY (RFC 10008) is missing from the method type of app.inject (light-my-request), not from Fastify
    for (const { method, contentType, status, code } of cases) {
      const before = await remaining();
      const headers = contentType === undefined ? auth : { ...auth, 'content-type': contentType };
      const answer = await app.inject({ method: method as 'POST', url: '/v1/categories', headers, payload: method === 'POST' ? '{"name":"Dogs"}' : undefined });
      expect({ method, contentType, status: answer.statusCode, body: answer.json() }).toEqual({
        method,
        contentType,
        status,
        body: { code, message: expect.any(String), status },
      });
      expect(Number(answer.headers['x-ratelimit-remaining']), 'charged exactly once').toBe(before - 1);
    }
    const missing = await app.inject({ method: 'QUERY' as 'POST', url: '/v1/nope', headers: auth });
    expect(missing.json()).toEqual({ code: 'not_found', message: expect.any(String), status: 404 });
    expect(hostPreParsing).toBeGreaterThanOrEqual(cases.length);
    // Outside the prefix, Fastify's own answers stand.
    const host415 = await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json, application/json' }, payload: '{}' });
    expect(host415.statusCode).toBe(415);
    expect(host415.json()).toMatchObject({ code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE', statusCode: 415 });
    expect(host415.headers['x-ratelimit-limit']).toBeUndefined();
    const host400 = await app.inject({ method: 'QUERY' as 'POST', url: '/echo' });
    expect(host400.statusCode).toBe(400);
    expect(host400.json()).toMatchObject({ code: 'FST_ERR_ROUTE_MISSING_CONTENT_TYPE', statusCode: 400 });
  });

  it('still runs host preValidation and preHandler hooks for well-formed requests under the prefix', async () => {
    const app = Fastify();
    const seen: string[] = [];
    app.addHook('preValidation', async (request) => {
      seen.push(`preValidation ${request.method}`);
    });
    app.addHook('preHandler', async (request) => {
      seen.push(`preHandler ${request.method}`);
    });
    await app.register(petstoreFastify, { prefix: '/v1', petstore: newPetstore() });
    const created = await app.inject({
      method: 'POST',
      url: '/v1/categories',
      headers: { ...auth, 'content-type': 'application/json; charset=utf-8' },
      payload: '{"name":"Dogs"}',
    });
    expect(created.statusCode).toBe(201);
    expect(seen).toEqual(['preValidation POST', 'preHandler POST']);
  });

  it('answers malformed URLs under the prefix through the API when frameworkErrors is wired, and leaves others to Fastify', async () => {
    const petstore = newPetstore();
    const app = Fastify({ frameworkErrors: petstoreFrameworkErrors(petstore, { prefix: '/v1' }) });
    app.get('/files/:name', async () => ({ ok: true }));
    await app.register(petstoreFastify, { prefix: '/v1', petstore });
    const ours = await app.inject({ url: '/v1/pets/%ZZ', headers: auth });
    expect(ours.statusCode).toBe(404);
    expect(ours.json()).toEqual({ code: 'not_found', message: expect.any(String), status: 404 });
    expect(ours.headers['x-ratelimit-remaining']).toBe('299');
    const anonymous = await app.inject({ url: '/v1/pets/%ZZ' });
    expect(anonymous.statusCode).toBe(401);
    const host = await app.inject({ url: '/files/%ZZ' });
    expect(host.statusCode).toBe(400);
    expect(host.json()).toMatchObject({ code: 'FST_ERR_BAD_URL', statusCode: 400 });
    // An overlong encoding of "/" right after the prefix is the API's too, not Fastify's bare 400.
    const overlong = await app.inject({ url: '/v1%c0%afcategories', headers: auth });
    expect(overlong.statusCode).toBe(404);
    expect(overlong.json()).toMatchObject({ code: 'not_found', status: 404 });
    expect(overlong.headers['x-ratelimit-remaining']).toBe('298');
    const elsewhere = await app.inject({ url: '/v1x%c0%af' });
    expect(elsewhere.json()).toMatchObject({ code: 'FST_ERR_BAD_URL' });
  });
});

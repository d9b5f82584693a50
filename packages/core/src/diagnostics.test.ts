import { tracingChannel } from 'node:diagnostics_channel';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { testApiKeyRecordStore } from '../test-support/api-key-record-store.js';
import { testCategoryStore } from '../test-support/category-store.js';
import { FREE_AUTH, FREE_KEY, ONE_PER_MINUTE_KEY, keyIdOf, request, testPetstore } from '../test-support/petstore.js';
import { testRateLimitStore } from '../test-support/rate-limit-store.js';
import { staticApiKeys, type ApiKeyStore } from './auth/api-key.js';
import { managedApiKeys } from './auth/managed-api-keys.js';
import { PETSTORE_REQUEST_CHANNEL, PETSTORE_STORE_CHANNEL, type PetstoreRequestContext, type PetstoreStoreContext } from './diagnostics.js';
import { fakeClock } from './testing/fake-clock.js';

type Phase = 'start' | 'end' | 'asyncStart' | 'asyncEnd' | 'error';
const PHASES: readonly Phase[] = ['start', 'end', 'asyncStart', 'asyncEnd', 'error'];

const unsubscribes: Array<() => void> = [];
afterEach(() => {
  for (const unsubscribe of unsubscribes.splice(0)) unsubscribe();
});

/** Subscribes to every event of a tracing channel; answers the events in order and the contexts at `asyncEnd` (copies). */
function listen<Context extends object>(name: string): { phases: Array<[Phase, Context]>; finished: Context[] } {
  const channel = tracingChannel<unknown, Context>(name);
  const phases: Array<[Phase, Context]> = [];
  const finished: Context[] = [];
  const handlers = Object.fromEntries(
    PHASES.map((phase) => [
      phase,
      (context: Context) => {
        phases.push([phase, context]);
        if (phase === 'asyncEnd') finished.push({ ...context, result: undefined });
      },
    ]),
  ) as unknown as Parameters<typeof channel.subscribe>[0];
  channel.subscribe(handlers);
  unsubscribes.push(() => channel.unsubscribe(handlers));
  return { phases, finished };
}

describe('the petstore:request channel', () => {
  it('publishes start, end, asyncStart and asyncEnd with one context: route template, caller, plan, outcome, cost, status', async () => {
    const { petstore } = testPetstore();
    const { phases, finished } = listen<PetstoreRequestContext>(PETSTORE_REQUEST_CHANNEL);
    const response = await petstore.handle(request('/categories?limit=1'));
    expect(response.status).toBe(200);
    expect(phases.map(([phase]) => phase)).toEqual(['start', 'end', 'asyncStart', 'asyncEnd']);
    expect(new Set(phases.map(([, context]) => context)).size).toBe(1);
    expect(phases[2]?.[1].result).toBe(response);
    expect(finished).toEqual([
      {
        method: 'GET',
        operationId: 'listCategories',
        route: '/v1/categories',
        status: 200,
        keyId: keyIdOf(FREE_KEY),
        accountId: keyIdOf(FREE_KEY),
        plan: 'free',
        rateLimitOutcome: 'admitted',
        cost: 1,
        result: undefined,
      },
    ]);
    expect(JSON.stringify(finished)).not.toContain(FREE_KEY);
  });

  it('knows the route before the pipeline runs, and reports path templates, not URLs', async () => {
    const { petstore } = testPetstore();
    const routesAtStart: unknown[] = [];
    const channel = tracingChannel<unknown, PetstoreRequestContext>(PETSTORE_REQUEST_CHANNEL);
    const onStart = (context: PetstoreRequestContext) => routesAtStart.push([context.operationId, context.route]);
    channel.start.subscribe(onStart as (message: unknown) => void);
    unsubscribes.push(() => channel.start.unsubscribe(onStart as (message: unknown) => void));
    await petstore.handle(request('/pets/12345'));
    await petstore.handle(request('/nowhere'));
    expect(routesAtStart).toEqual([
      ['getPetById', '/v1/pets/{petId}'],
      [undefined, undefined],
    ]);
  });

  it('tells limited from banned, with the cost charged', async () => {
    const { petstore } = testPetstore({
      rateLimit: { store: testRateLimitStore(), ban: { rejectedThreshold: 2, intervalMs: 60_000, durationMs: 60_000 } },
    });
    const { finished } = listen<PetstoreRequestContext>(PETSTORE_REQUEST_CHANNEL);
    const auth = { authorization: `Bearer ${ONE_PER_MINUTE_KEY}` };
    for (let index = 0; index < 4; index++) await petstore.handle(request('/categories', auth));
    expect(finished.map(({ status, rateLimitOutcome, cost, plan }) => [status, rateLimitOutcome, cost, plan])).toEqual([
      [200, 'admitted', 1, 'enterprise'],
      [429, 'limited', 1, 'enterprise'],
      [429, 'banned', 1, 'enterprise'],
      [429, 'banned', 1, 'enterprise'],
    ]);
  });

  it('gives the reason of each 401: missing, malformed, unknown, revoked, expired', async () => {
    const clock = fakeClock();
    const keys = managedApiKeys({ store: testApiKeyRecordStore(), clock });
    const revoked = await keys.issue({ accountId: 'acct-r', plan: 'free' });
    await keys.revoke(revoked.keyId);
    const expiring = await keys.issue({ accountId: 'acct-e', plan: 'free', expiresInMs: 1000 });
    clock.advance(1000);
    const { petstore } = testPetstore({ apiKeys: [keys, staticApiKeys([{ key: FREE_KEY, plan: 'free' }])], clock });
    const { finished } = listen<PetstoreRequestContext>(PETSTORE_REQUEST_CHANNEL);
    const authorizations = [undefined, 'Bearer two tokens', `Bearer ${FREE_KEY}x`, `Bearer ${revoked.key}`, `Bearer ${expiring.key}`];
    for (const authorization of authorizations) {
      await petstore.handle(request('/categories', authorization === undefined ? {} : { authorization }));
    }
    expect(finished.map(({ status, authFailure, keyId }) => [status, authFailure, keyId])).toEqual([
      [401, 'missing', undefined],
      [401, 'malformed', undefined],
      [401, 'unknown', undefined],
      [401, 'revoked', undefined],
      [401, 'expired', undefined],
    ]);
  });

  it('asks a key store why it refused a key only while someone listens', async () => {
    const refusalReason = vi.fn(() => 'revoked' as const);
    const store: ApiKeyStore = { findPrincipal: async () => undefined, refusalReason };
    const { petstore } = testPetstore({ apiKeys: store });
    await petstore.handle(request('/categories', { authorization: 'Bearer some-key-3b1f' }));
    expect(refusalReason).not.toHaveBeenCalled();
    const { finished } = listen<PetstoreRequestContext>(PETSTORE_REQUEST_CHANNEL);
    await petstore.handle(request('/categories', { authorization: 'Bearer some-key-3b1f' }));
    expect(refusalReason).toHaveBeenCalledTimes(1);
    expect(finished[0]?.authFailure).toBe('revoked');
  });

  it('holds the error behind a 5xx answer; the error event stays silent', async () => {
    const failure = new Error('disk on fire');
    const categories = { ...testCategoryStore(), list: () => Promise.reject(failure) };
    const { petstore } = testPetstore({ categories });
    const { phases, finished } = listen<PetstoreRequestContext>(PETSTORE_REQUEST_CHANNEL);
    await petstore.handle(request('/categories'));
    expect(finished.map(({ status, error }) => [status, error])).toEqual([[500, failure]]);
    expect(phases.map(([phase]) => phase)).not.toContain('error');
  });

  it('is not published by petstore.guard', async () => {
    const { petstore } = testPetstore();
    const { phases } = listen<PetstoreRequestContext>(PETSTORE_REQUEST_CHANNEL);
    expect((await petstore.guard({ method: 'GET', path: '/host/route', headers: FREE_AUTH })).allowed).toBe(true);
    expect(phases).toEqual([]);
  });
});

describe('the petstore:store channel', () => {
  it('traces each store call of a request: backend, operation, outcome', async () => {
    const { petstore } = testPetstore();
    const { phases, finished } = listen<PetstoreStoreContext>(PETSTORE_STORE_CHANNEL);
    await petstore.handle(request('/categories'));
    await petstore.handle({ ...request('/categories', FREE_AUTH, 'POST'), headers: { ...FREE_AUTH, 'content-type': 'application/json' }, body: { kind: 'bytes', bytes: '{"name":"Dogs"}' } });
    await petstore.handle({
      ...request('/categories', FREE_AUTH, 'POST'),
      headers: { ...FREE_AUTH, 'content-type': 'application/json', 'idempotency-key': '"k-1"' },
      body: { kind: 'bytes', bytes: '{"name":"Cats"}' },
    });
    expect(finished.map(({ backend, operation, outcome }) => [backend, operation, outcome])).toEqual([
      // A list's version read starts once the key is valid, beside the rate-limit charge.
      ['memory', 'find_key', 'ok'],
      ['custom', 'list_version', 'ok'],
      ['custom', 'consume', 'ok'],
      ['custom', 'list', 'ok'],
      ['memory', 'find_key', 'ok'],
      ['custom', 'consume', 'ok'],
      ['custom', 'create', 'ok'],
      ['memory', 'find_key', 'ok'],
      ['custom', 'consume', 'ok'],
      ['custom', 'create_idempotent', 'ok'],
    ]);
    // Each call: start, end, asyncStart, asyncEnd.
    expect(phases.filter(([phase]) => phase === 'start')).toHaveLength(10);
  });

  it('reports a failing call as outcome error, with the error event', async () => {
    const failure = new Error('connection reset');
    const store = { ...testRateLimitStore(), backend: 'redis', consume: () => Promise.reject(failure) };
    const { petstore } = testPetstore({ rateLimit: { store } });
    const { phases, finished } = listen<PetstoreStoreContext>(PETSTORE_STORE_CHANNEL);
    expect((await petstore.handle(request('/categories'))).status).toBe(503);
    expect(finished.map(({ backend, operation, outcome, error }) => [backend, operation, outcome, error])).toEqual([
      ['memory', 'find_key', 'ok', undefined],
      // Started beside the charge, before the store failed: read, not used.
      ['custom', 'list_version', 'ok', undefined],
      ['redis', 'consume', 'error', failure],
    ]);
    expect(phases.filter(([phase]) => phase === 'error').map(([, context]) => context.operation)).toEqual(['consume']);
  });

  it('traces the operator calls: find_key_by_id, peek, reset', async () => {
    const { petstore } = testPetstore();
    const { finished } = listen<PetstoreStoreContext>(PETSTORE_STORE_CHANNEL);
    await petstore.rateLimits.peek({ keyId: keyIdOf(FREE_KEY) });
    await petstore.rateLimits.reset({ accountId: 'acct-1' });
    expect(finished.map(({ operation }) => operation)).toEqual(['find_key_by_id', 'peek', 'reset']);
  });
});

import { describe, expect, it } from 'vitest';
import { staticApiKeys } from '../auth/api-key.js';
import { NO_PEEK_RESET, testRateLimitStore } from '../../test-support/rate-limit-store.js';
import type { PetstoreEvent, PetstoreLogger } from './events.js';
import { CLIENT_ADDRESS, expectError, keyIdOf, request, testPetstore, type TestPetstore } from '../../test-support/petstore.js';
import type { PetstoreOptions } from './petstore-options.js';

const KEY = 'events-key-5b2d9e71c4';
const TIGHT_KEY = 'events-tight-key-0c8a3f';
const AUTH = { authorization: `Bearer ${KEY}` };
const TIGHT_AUTH = { authorization: `Bearer ${TIGHT_KEY}` };

/** A petstore whose keys belong to named accounts, recording every event. */
function eventPetstore(overrides: Partial<PetstoreOptions> = {}): TestPetstore & { events: PetstoreEvent[] } {
  const events: PetstoreEvent[] = [];
  const test = testPetstore({
    apiKeys: staticApiKeys([
      { key: KEY, plan: 'free', accountId: 'acct-1' },
      { key: TIGHT_KEY, plan: 'enterprise', accountId: 'acct-2', limits: { requestsPerMinute: 1, requestsPerDay: 100 } },
    ]),
    onEvent: (event) => events.push(event),
    ...overrides,
  });
  return { ...test, events };
}

/** A pino-like logger that records its calls; its methods need `this`, as pino's do. */
class RecordingLogger implements PetstoreLogger {
  readonly calls: Array<{ level: 'info' | 'warn' | 'error'; object: object; message: string | undefined }> = [];
  info(object: object, message?: string): void {
    this.calls.push({ level: 'info', object, message });
  }
  warn(object: object, message?: string): void {
    this.calls.push({ level: 'warn', object, message });
  }
  error(object: object, message?: string): void {
    this.calls.push({ level: 'error', object, message });
  }
}

/** Asserts that no event mentions any of the API keys, however deep. */
function expectNoKeys(events: readonly unknown[]): void {
  const text = JSON.stringify(events, (_name, value: unknown) => (value instanceof Error ? { message: value.message, stack: value.stack } : value));
  for (const key of [KEY, TIGHT_KEY, 'guess-7f3a1b']) expect(text).not.toContain(key);
}

describe('onEvent', () => {
  it('receives unauthorized with presentedKey false when no key is sent', async () => {
    const { petstore, events } = eventPetstore();
    await petstore.handle(request('/categories?x=1', {}));
    expect(events).toEqual([{ type: 'unauthorized', method: 'GET', path: '/categories?x=1', clientAddress: CLIENT_ADDRESS, presentedKey: false }]);
  });

  it.each([
    ['an unknown key', 'Bearer guess-7f3a1b'],
    ['a malformed key', 'Bearer guess-7f3a1b extra'],
  ])('receives unauthorized with presentedKey true for %s, without the key', async (_label, authorization) => {
    const { petstore, events } = eventPetstore();
    await petstore.handle(request('/pets/1', { authorization }));
    expect(events).toEqual([{ type: 'unauthorized', method: 'GET', path: '/pets/1', clientAddress: CLIENT_ADDRESS, presentedKey: true }]);
    expectNoKeys(events);
  });

  it('receives rate_limited with keyId, accountId and retryAfterSeconds', async () => {
    const { petstore, events, clock } = eventPetstore();
    clock.advance(15_000);
    await petstore.handle(request('/categories', TIGHT_AUTH));
    expect(events).toEqual([]);
    expectError(await petstore.handle(request('/categories', TIGHT_AUTH)), 429, 'rate_limited');
    expect(events).toEqual([
      {
        type: 'rate_limited',
        method: 'GET',
        path: '/categories',
        clientAddress: CLIENT_ADDRESS,
        keyId: keyIdOf(TIGHT_KEY),
        accountId: 'acct-2',
        retryAfterSeconds: 45,
      },
    ]);
    expectNoKeys(events);
  });

  it('receives rate_limited for an anonymous caller by client address, without keyId', async () => {
    const { petstore, events } = eventPetstore({
      rateLimit: { store: testRateLimitStore(), anonymous: { requestsPerMinute: 1, requestsPerDay: 10 } },
    });
    await petstore.handle(request('/openapi.json', {}));
    await petstore.handle(request('/openapi.json', {}));
    expect(events).toEqual([
      { type: 'rate_limited', method: 'GET', path: '/openapi.json', clientAddress: CLIENT_ADDRESS, retryAfterSeconds: 60 },
    ]);
  });

  it('receives banned with keyId, accountId and the ban as retryAfterSeconds', async () => {
    const { petstore, events } = eventPetstore({
      rateLimit: { store: testRateLimitStore(), ban: { rejectedThreshold: 2, intervalMs: 60_000, durationMs: 600_000 } },
    });
    await petstore.handle(request('/categories', TIGHT_AUTH));
    await petstore.handle(request('/categories', TIGHT_AUTH));
    expectError(await petstore.handle(request('/categories', TIGHT_AUTH)), 429, 'temporarily_banned');
    expect(events.map((event) => event.type)).toEqual(['rate_limited', 'banned']);
    expect(events[1]).toEqual({
      type: 'banned',
      method: 'GET',
      path: '/categories',
      clientAddress: CLIENT_ADDRESS,
      keyId: keyIdOf(TIGHT_KEY),
      accountId: 'acct-2',
      retryAfterSeconds: 600,
    });
    expectNoKeys(events);
  });

  it('receives internal_error with the error behind a 500', async () => {
    const error = new Error('orders database down');
    const { petstore, events } = eventPetstore({
      handlers: {
        listStoreOrders: () => {
          throw error;
        },
      },
    });
    expectError(await petstore.handle(request('/store/orders', AUTH)), 500, 'internal_error');
    expect(events).toEqual([{ type: 'internal_error', method: 'GET', path: '/store/orders', clientAddress: CLIENT_ADDRESS, error }]);
    expect(events[0]?.error).toBe(error);
  });

  it('receives internal_error when the API-key store fails, without the key', async () => {
    const error = new Error('key database down');
    const { petstore, events } = eventPetstore({ apiKeys: { findPrincipal: () => Promise.reject(error) } });
    expectError(await petstore.handle(request('/categories', AUTH)), 500, 'internal_error');
    expect(events).toEqual([{ type: 'internal_error', method: 'GET', path: '/categories', clientAddress: CLIENT_ADDRESS, error }]);
    expectNoKeys(events);
  });

  it('receives nothing for answers that are not failures of the caller or the server', async () => {
    const { petstore, events } = eventPetstore({ handlers: { getPetById: () => ({ body: {} }) } });
    for (const path of ['/categories', '/pets/1', '/pets/abc', '/store/orders', '/nowhere', '/openapi.json']) {
      await petstore.handle(request(path, AUTH));
    }
    await petstore.handle(request('/openapi.json', {}));
    expect(events).toEqual([]);
  });

  it('never carries an API key, whatever happens', async () => {
    const { petstore, events } = eventPetstore({
      rateLimit: { store: testRateLimitStore(), ban: { rejectedThreshold: 2, intervalMs: 60_000, durationMs: 600_000 } },
      handlers: {
        getPetById: () => {
          throw new Error('boom');
        },
      },
    });
    await petstore.handle(request('/pets/1', AUTH));
    for (let i = 0; i < 3; i++) await petstore.handle(request('/categories', TIGHT_AUTH));
    await petstore.handle(request('/categories', { authorization: 'Bearer guess-7f3a1b' }));
    await petstore.guard(request('/host/route', TIGHT_AUTH));
    expect(new Set(events.map((event) => event.type))).toEqual(new Set(['internal_error', 'rate_limited', 'banned', 'unauthorized']));
    expectNoKeys(events);
  });

  it('does not break the answer when onEvent throws', async () => {
    const { petstore } = testPetstore({
      onEvent: () => {
        throw new Error('metrics down');
      },
      handlers: {
        getPetById: () => {
          throw new Error('boom');
        },
      },
    });
    expectError(await petstore.handle(request('/categories', {})), 401, 'unauthorized');
    expectError(await petstore.handle(request('/pets/1')), 500, 'internal_error');
    const guarded = await petstore.guard(request('/host/route', {}));
    expect(guarded.allowed).toBe(false);
  });
});

describe('request logger', () => {
  it('logs unauthorized at info with (object, message)', async () => {
    const { petstore } = eventPetstore();
    const logger = new RecordingLogger();
    await petstore.handle({ ...request('/categories', {}), logger });
    expect(logger.calls).toEqual([
      {
        level: 'info',
        object: { petstore: { type: 'unauthorized', method: 'GET', path: '/categories', clientAddress: CLIENT_ADDRESS, presentedKey: false } },
        message: expect.stringMatching(/^petstore: /),
      },
    ]);
  });

  it('logs rate_limited at info and banned at warn', async () => {
    const { petstore } = eventPetstore({
      rateLimit: { store: testRateLimitStore(), ban: { rejectedThreshold: 2, intervalMs: 60_000, durationMs: 600_000 } },
    });
    const logger = new RecordingLogger();
    for (let i = 0; i < 3; i++) await petstore.handle({ ...request('/categories', TIGHT_AUTH), logger });
    expect(logger.calls.map((call) => call.level)).toEqual(['info', 'warn']);
    expect(logger.calls[0]?.object).toEqual({
      petstore: expect.objectContaining({ type: 'rate_limited', keyId: keyIdOf(TIGHT_KEY), accountId: 'acct-2', retryAfterSeconds: 60 }),
    });
    expect(logger.calls[1]?.object).toEqual({
      petstore: expect.objectContaining({ type: 'banned', keyId: keyIdOf(TIGHT_KEY), retryAfterSeconds: 600 }),
    });
    for (const call of logger.calls) expect(call.message).toEqual(expect.stringMatching(/^petstore: /));
    expectNoKeys(logger.calls);
  });

  it('logs internal_error at error with the cause as err, outside the petstore fields', async () => {
    const error = new Error('boom');
    const { petstore } = eventPetstore({
      handlers: {
        getPetById: () => {
          throw error;
        },
      },
    });
    const logger = new RecordingLogger();
    await petstore.handle({ ...request('/pets/1', AUTH), logger });
    expect(logger.calls).toEqual([
      {
        level: 'error',
        object: { petstore: { type: 'internal_error', method: 'GET', path: '/pets/1', clientAddress: CLIENT_ADDRESS }, err: error },
        message: expect.stringMatching(/^petstore: /),
      },
    ]);
  });

  it('logs through the guard too, and sends the same event to onEvent', async () => {
    const { petstore, events } = eventPetstore();
    const logger = new RecordingLogger();
    await petstore.guard({ ...request('/host/route', { authorization: 'Bearer guess-7f3a1b' }), logger });
    expect(events).toEqual([{ type: 'unauthorized', method: 'GET', path: '/host/route', clientAddress: CLIENT_ADDRESS, presentedKey: true }]);
    expect(logger.calls).toEqual([{ level: 'info', object: { petstore: events[0] }, message: expect.any(String) }]);
  });

  it('does not break the answer when the logger throws, and still calls onEvent', async () => {
    const { petstore, events } = eventPetstore();
    const throwing: PetstoreLogger = {
      info: () => {
        throw new Error('log down');
      },
      warn: () => undefined,
      error: () => undefined,
    };
    expectError(await petstore.handle({ ...request('/categories', {}), logger: throwing }), 401, 'unauthorized');
    expect(events).toHaveLength(1);
  });
});

describe('events: store failures', () => {
  it('reports a fail-closed 503 caused by a failing rate-limit store as internal_error, with the cause', async () => {
    const cause = new Error('redis down');
    const events: PetstoreEvent[] = [];
    const { petstore } = testPetstore({
      rateLimit: { store: { ...NO_PEEK_RESET, consume: () => Promise.reject(cause) } },
      onEvent: (event) => events.push(event),
    });
    const response = await petstore.handle({ method: 'GET', path: '/categories', headers: {} });
    expect(response.status).toBe(503);
    expect(events).toEqual([expect.objectContaining({ type: 'internal_error', path: '/categories', error: cause })]);
  });
});

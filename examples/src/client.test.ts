/**
 * @petstore/client against the real example server (the built `src/fastify-server.ts`, memory storage, real
 * sockets): the same cases once with the global fetch and once with node-fetch v3.
 *
 * The cases that depend on where a minute window stands (retrying into the next minute, giving up before
 * it) run against the same API mounted in this process on a fake clock, which the client's `sleep` moves
 * forward instead of waiting: no case waits for real time to pass.
 */
import type { AddressInfo } from 'node:net';
import nodeFetch from 'node-fetch';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { petstoreFastify } from '@petstore/adapter-fastify';
import {
  createPetstoreClient,
  isPetstoreClientError,
  type PetstoreClientError,
  type PetstoreFetch,
} from '@petstore/client';
import { createPetstore, staticApiKeys, type StaticApiKey } from '@petstore/core';
import { fakeClock, type FakeClock } from '@petstore/core/testing';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { startExample, stopExamples } from './spawn-example.js';

// Passed as they are: no casts, no wrappers.
const variants: Array<{ name: string; fetch: PetstoreFetch }> = [
  { name: 'global fetch', fetch: globalThis.fetch },
  { name: 'node-fetch', fetch: nodeFetch },
];

const apiKeys = 'client-big:enterprise:1000:100000,client-units-1:enterprise:1000:100000,client-units-2:enterprise:1000:100000';

let baseUrl = '';

beforeAll(async () => {
  const { url } = await startExample('fastify-server.ts', { PETSTORE_API_KEYS: apiKeys, PETSTORE_OPERATION_COSTS: 'createCategory=5' });
  baseUrl = `${url}/v1`;
}, 30_000);

afterAll(stopExamples);

/** Wraps a fetch to count the requests sent and record each answer's status and Retry-After. */
function recording(fetch: PetstoreFetch) {
  const answers: Array<{ status: number; retryAfter: string | null }> = [];
  let sent = 0;
  const wrapped: PetstoreFetch = async (url, init) => {
    sent++;
    const response = await fetch(url, init);
    answers.push({ status: response.status, retryAfter: response.headers.get('retry-after') });
    return response;
  };
  return {
    fetch: wrapped,
    answers,
    get sent() {
      return sent;
    },
  };
}

async function rejection(promise: Promise<unknown>): Promise<PetstoreClientError> {
  const error: unknown = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!isPetstoreClientError(error)) throw new Error(`expected a PetstoreClientError, got ${String(error)}`);
  return error;
}

describe('@petstore/client against the example server', () => {
  it.for(variants)('lists and creates categories ($name)', async ({ name, fetch }) => {
    const client = createPetstoreClient({ baseUrl, apiKey: 'client-big', fetch });
    expect(client.lastRateLimit).toBeUndefined();
    const sentAfterMs = Date.now();
    const created = await client.createCategory({ name: `Dogs via ${name}`, description: 'Canine breeds' });
    expect(created).toEqual({ id: expect.any(Number), name: `Dogs via ${name}`, description: 'Canine breeds' });
    const listed = await client.listCategories();
    expect(listed).toContainEqual(created);
    expect(client.lastRateLimit).toMatchObject({ limit: 1000, remaining: expect.any(Number) });
    // The end of the minute the requests were counted in: after they were sent (the server's clock is this one).
    expect((client.lastRateLimit?.resetAtSeconds ?? 0) * 1000).toBeGreaterThan(sentAfterMs);
  });

  it.for(variants)('pages through every category, following Link rel="next", and revalidates a page with 304 ($name)', async ({ name, fetch }) => {
    const recorder = recording(fetch);
    const client = createPetstoreClient({ baseUrl, apiKey: 'client-big', fetch: recorder.fetch });
    for (let i = 0; i < 3; i++) await client.createCategory({ name: `Paged ${i} via ${name}` });
    const all = await client.listCategories();
    const paged = [];
    for await (const page of client.listCategoryPages({ limit: 2 })) {
      expect(page.length).toBeLessThanOrEqual(2);
      paged.push(...page);
    }
    expect(paged).toEqual(all);
    const sentBefore = recorder.sent;
    expect(await client.listCategories({ limit: 2 })).toEqual(all.slice(0, 2));
    expect(recorder.sent).toBe(sentBefore + 1);
    expect(recorder.answers.at(-1)?.status).toBe(304);
  });

  it.for(variants.map((variant, index) => ({ ...variant, key: `client-units-${index + 1}` })))(
    'counts units in lastRateLimit: a create costing 5 (PETSTORE_OPERATION_COSTS) leaves 995 of 1000 ($name)',
    async ({ fetch, key }) => {
      // A key of its own, so its first answer is deterministic whichever minute it falls in.
      const client = createPetstoreClient({ baseUrl, apiKey: key, fetch });
      await client.createCategory({ name: `Units via ${key}` });
      expect(client.lastRateLimit).toMatchObject({ limit: 1000, remaining: 995 });
    },
  );

  it.for(variants)('errors carry code and status; a wrong key is not retried ($name)', async ({ fetch }) => {
    const wrongKey = recording(fetch);
    const stranger = createPetstoreClient({ baseUrl, apiKey: 'no-such-key', fetch: wrongKey.fetch });
    const unauthorized = await rejection(stranger.listCategories());
    expect(unauthorized).toMatchObject({ name: 'PetstoreClientError', code: 'unauthorized', status: 401, attempts: 1 });
    expect(unauthorized.message).not.toContain('no-such-key');
    expect(wrongKey.sent).toBe(1);
    expect(stranger.lastRateLimit).toMatchObject({ limit: 30 }); // the anonymous per-address limit

    const client = createPetstoreClient({ baseUrl, apiKey: 'client-big', fetch });
    const invalid = await rejection(client.createCategory({ name: '   ' }));
    expect(invalid).toMatchObject({ code: 'validation_failed', status: 400, attempts: 1 });
    expect(invalid.message).toContain('name');
  });
});

/**
 * The API on memory stores and a fake clock, mounted with the Fastify adapter and listening on a free port of
 * 127.0.0.1 in this process.
 */
async function fakeClockServer(apiKeys: StaticApiKey[], startMs: number) {
  const clock = fakeClock(startMs);
  const petstore = createPetstore({
    apiKeys: staticApiKeys(apiKeys),
    categories: memoryCategoryStore(),
    rateLimit: { store: memoryRateLimitStore({ clock }), anonymousStore: memoryRateLimitStore({ clock }) },
    clock,
  });
  const app = Fastify();
  await app.register(petstoreFastify, { prefix: '/v1', petstore });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { clock, baseUrl: `http://127.0.0.1:${port}/v1`, close: () => app.close() };
}

/** A client `sleep` that moves `clock` forward instead of waiting, and records every call. */
function clockSleep(clock: FakeClock) {
  const calls: number[] = [];
  const sleep = (ms: number): Promise<void> => {
    calls.push(ms);
    clock.advance(ms);
    return Promise.resolve();
  };
  return { sleep, calls };
}

describe('@petstore/client against the API on a fake clock', () => {
  /** 12:34:58.250 UTC: 1.75 s before a minute boundary. */
  const START_MS = Date.UTC(2026, 0, 1, 12, 34, 58, 250);

  /** An enterprise key of 2 requests per minute. */
  const SMALL_KEY: StaticApiKey = {
    key: 'client-small',
    plan: 'enterprise',
    limits: { requestsPerMinute: 2, requestsPerDay: 1000 },
  };

  it.for(variants)('retries through a 429 into success, honouring Retry-After ($name)', async ({ fetch }, { onTestFinished }) => {
    const server = await fakeClockServer([SMALL_KEY], START_MS);
    onTestFinished(() => server.close());
    const { clock } = server;
    const recorder = recording(fetch);
    const slept = clockSleep(clock);
    const client = createPetstoreClient({
      baseUrl: server.baseUrl,
      apiKey: SMALL_KEY.key,
      fetch: recorder.fetch,
      sleep: slept.sleep,
      now: () => clock.now(),
    });
    await client.listCategories();
    await client.listCategories(); // the minute's 2 requests are used up
    expect(client.lastRateLimit?.remaining).toBe(0);
    const secondsToNextMinute = Math.ceil((60_000 - (clock.now() % 60_000)) / 1000);

    await expect(client.listCategories()).resolves.toEqual([]);

    // The list is unchanged: every call after the first revalidates with If-None-Match and gets 304 (charged alike).
    expect(recorder.answers.map((answer) => answer.status)).toEqual([200, 304, 429, 304]);
    const [limited, retried] = recorder.answers.slice(2);
    const retryAfterSeconds = Number(limited?.retryAfter);
    expect(retryAfterSeconds).toBe(secondsToNextMinute);
    expect(retryAfterSeconds).toBe(2);
    expect(retried?.retryAfter).toBeNull();
    // The client slept once, exactly Retry-After × 1000 ms, and no real time was needed for it.
    expect(slept.calls).toEqual([retryAfterSeconds * 1000]);
    expect(clock.now()).toBe(START_MS + retryAfterSeconds * 1000);
    expect(client.lastRateLimit?.remaining).toBe(1); // the first request of the new minute
  });

  it.for(variants)('gives up at once when Retry-After exceeds its budget ($name)', async ({ fetch }, { onTestFinished }) => {
    const tiny: StaticApiKey = { key: 'client-tiny', plan: 'enterprise', limits: { requestsPerMinute: 1, requestsPerDay: 1000 } };
    const startMs = Date.UTC(2026, 0, 1, 12, 34, 20); // 40 s before the next minute
    const server = await fakeClockServer([tiny], startMs);
    onTestFinished(() => server.close());
    const recorder = recording(fetch);
    const slept = clockSleep(server.clock);
    const client = createPetstoreClient({
      baseUrl: server.baseUrl,
      apiKey: tiny.key,
      fetch: recorder.fetch,
      sleep: slept.sleep,
      now: () => server.clock.now(),
      retry: { maxElapsedMs: 1_000 },
    });
    await client.listCategories(); // the minute's only request

    const error = await rejection(client.listCategories());

    expect(error).toMatchObject({ code: 'rate_limited', status: 429, attempts: 1, retryAfterSeconds: 40 });
    expect(recorder.answers.map((answer) => answer.status)).toEqual([200, 429]);
    expect(slept.calls).toEqual([]); // a 40 s wait cannot fit a 1 s budget: no sleep at all
    expect(server.clock.now()).toBe(startMs);
    expect(client.lastRateLimit).toMatchObject({ limit: 1, remaining: 0 });
  });
});

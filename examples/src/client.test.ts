/**
 * @petstore/client against the real example server (`tsx src/fastify-server.ts`, memory storage, real
 * sockets): the same cases once with the global fetch and once with node-fetch v3.
 *
 * The example's rate-limit windows are fixed minutes aligned to the clock, so the Retry-After cases place
 * themselves relative to the next minute boundary.
 */
import { setTimeout as delay } from 'node:timers/promises';
import nodeFetch from 'node-fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createPetstoreClient,
  isPetstoreClientError,
  type PetstoreClientError,
  type PetstoreFetch,
} from '@petstore/client';
import { startExample, stopExamples } from './spawn-example.js';

// Passed as they are: no casts, no wrappers.
const variants: Array<{ name: string; index: number; fetch: PetstoreFetch }> = [
  { name: 'global fetch', index: 0, fetch: globalThis.fetch },
  { name: 'node-fetch', index: 1, fetch: nodeFetch },
];

// Per variant: a 2-per-minute key for the retry-into-success case and a 1-per-minute key for the give-up case.
const apiKeys = [
  'client-big:enterprise:1000:100000',
  ...variants.flatMap(({ index }) => [`client-small-${index}:enterprise:2:1000`, `client-tiny-${index}:enterprise:1:1000`]),
].join(',');

let baseUrl = '';

beforeAll(async () => {
  const { url } = await startExample('fastify-server.ts', { PETSTORE_API_KEYS: apiKeys });
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

/** Milliseconds until the next minute boundary of the wall clock (where the example's minute windows reset). */
function msToMinuteBoundary(): number {
  return 60_000 - (Date.now() % 60_000);
}

describe('@petstore/client against the example server', () => {
  it.for(variants)('lists and creates categories ($name)', async ({ name, fetch }) => {
    const client = createPetstoreClient({ baseUrl, apiKey: 'client-big', fetch });
    expect(client.lastRateLimit).toBeUndefined();
    const created = await client.createCategory({ name: `Dogs via ${name}`, description: 'Canine breeds' });
    expect(created).toEqual({ id: expect.any(Number), name: `Dogs via ${name}`, description: 'Canine breeds' });
    const listed = await client.listCategories();
    expect(listed).toContainEqual(created);
    expect(client.lastRateLimit).toMatchObject({ limit: 1000, remaining: expect.any(Number) });
    expect(client.lastRateLimit?.resetAtSeconds).toBeGreaterThan(Date.now() / 1000);
  });

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

  // Both variants share one minute boundary, so they run side by side (each on its own key).
  it.concurrent.for(variants)(
    'retries through a 429 into success, honouring Retry-After ($name)',
    { timeout: 90_000 },
    async ({ index, fetch }, { expect }) => {
      const untilStart = msToMinuteBoundary() - 1_500;
      await delay(untilStart >= 0 ? untilStart : untilStart + 60_000);
      const recorder = recording(fetch);
      const client = createPetstoreClient({ baseUrl, apiKey: `client-small-${index}`, fetch: recorder.fetch });
      await client.listCategories();
      await client.listCategories(); // the minute's 2 requests are used up
      expect(client.lastRateLimit?.remaining).toBe(0);

      const startedAt = performance.now();
      await expect(client.listCategories()).resolves.toEqual(expect.any(Array));
      const elapsedMs = performance.now() - startedAt;

      const [limited, retried] = recorder.answers.slice(2);
      expect(recorder.answers.map((answer) => answer.status)).toEqual([200, 200, 429, 200]);
      const retryAfterSeconds = Number(limited?.retryAfter);
      expect(retryAfterSeconds).toBeGreaterThanOrEqual(1);
      expect(retryAfterSeconds).toBeLessThanOrEqual(2);
      expect(retried?.retryAfter).toBeNull();
      // The client sleeps exactly Retry-After × 1000 ms after the 429 arrived (a few ms of timer slack).
      expect(elapsedMs).toBeGreaterThanOrEqual(retryAfterSeconds * 1000 - 10);
      expect(client.lastRateLimit?.remaining).toBe(1); // the first request of the new minute
    },
  );

  it.for(variants)('gives up at once when Retry-After exceeds its budget ($name)', { timeout: 30_000 }, async ({ index, fetch }) => {
    if (msToMinuteBoundary() < 5_000) await delay(msToMinuteBoundary() + 100); // stay far from the boundary
    const recorder = recording(fetch);
    const client = createPetstoreClient({
      baseUrl,
      apiKey: `client-tiny-${index}`,
      fetch: recorder.fetch,
      retry: { maxElapsedMs: 1_000 },
    });
    await client.listCategories(); // the minute's only request
    const sentBefore = recorder.sent;

    const startedAt = performance.now();
    const error = await rejection(client.listCategories());
    const elapsedMs = performance.now() - startedAt;

    expect(error).toMatchObject({ code: 'rate_limited', status: 429, attempts: 1 });
    expect(error.retryAfterSeconds).toBeGreaterThanOrEqual(3);
    expect(recorder.sent - sentBefore).toBe(1);
    expect(elapsedMs).toBeLessThan(500);
    expect(client.lastRateLimit).toMatchObject({ limit: 1, remaining: 0 });
  });
});

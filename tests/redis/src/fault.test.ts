/**
 * Redis stopped mid-run and restarted: the fail-closed and fail-open policies answer as documented, no answer
 * is a 500, and no category is lost or duplicated.
 */
import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { startRedisServer } from '@petstore/storage-redis/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { call, startInstance, type Answer, type Instance } from './instances.js';

const KEY = 'fault-test-enterprise-key';
const apiKeys = [{ key: KEY, plan: 'enterprise' as const, limits: { requestsPerMinute: 100_000, requestsPerDay: 1_000_000 } }];

function expectErrorBody(answer: Answer, status: number, code: string): void {
  expect(answer.status).toBe(status);
  expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(answer.body).toEqual({ code, message: expect.any(String), status });
}

async function until(condition: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.skipIf(inject('redisSkipReason') !== null)('Redis stopped and restarted mid-run', () => {
  let redis: Awaited<ReturnType<typeof startRedisServer>>;
  let failClosed: Instance; // Fastify, everything on Redis, fail-closed (the default)
  let failOpen: Instance; // Express, everything on Redis, fail-open
  let failOpenMemoryCategories: Instance; // Fastify, rate limits on Redis fail-open, categories in memory
  const answers: Answer[] = [];
  const record = async (pending: Promise<Answer>) => {
    const answer = await pending;
    answers.push(answer);
    return answer;
  };
  const createdNames: string[] = [];
  const refusedNames: string[] = [];
  async function create(instance: Instance, name: string): Promise<Answer> {
    const answer = await record(call(instance, '/v1/categories', { apiKey: KEY, json: { name } }));
    (answer.status === 201 ? createdNames : refusedNames).push(name);
    return answer;
  }

  beforeAll(async () => {
    // Its own server, with an fsynced append-only file, so a restart keeps what was written.
    redis = await startRedisServer({ appendOnly: true });
    const keyPrefix = `petstore-fault:${randomUUID()}:`;
    failClosed = await startInstance({ framework: 'fastify', redisUrl: redis.url, keyPrefix, apiKeys });
    failOpen = await startInstance({
      framework: 'express',
      redisUrl: redis.url,
      keyPrefix,
      apiKeys,
      onStoreFailure: { mode: 'fail-open', insuranceStore: memoryRateLimitStore() },
    });
    failOpenMemoryCategories = await startInstance({
      framework: 'fastify',
      redisUrl: redis.url,
      keyPrefix,
      apiKeys,
      onStoreFailure: { mode: 'fail-open', insuranceStore: memoryRateLimitStore() },
      categories: memoryCategoryStore(),
    });
  });
  afterAll(async () => {
    await Promise.all([failClosed, failOpen, failOpenMemoryCategories].map((instance) => instance?.close()));
    await redis?.stop();
    // The append-only data survives stop() for restart(); remove it once the suite is done.
    if (redis) await rm(redis.dir, { recursive: true, force: true });
  });

  it('serves, fails as documented while Redis is down, and recovers with nothing lost or duplicated', async () => {
    for (let i = 0; i < 10; i++) {
      expect((await create(i % 2 === 0 ? failClosed : failOpen, `before ${i}`)).status).toBe(201);
    }

    await redis.stop();

    // Fail-closed: 503 service_unavailable with Retry-After, nothing executed.
    const closedList = await record(call(failClosed, '/v1/categories', { apiKey: KEY }));
    expectErrorBody(closedList, 503, 'service_unavailable');
    expect(Number(closedList.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expectErrorBody(await create(failClosed, 'during closed 1'), 503, 'service_unavailable');

    // Fail-open: the rate limit falls back to the per-process insurance store, so the answer still carries the
    // rate-limit headers; the category store itself is on Redis, so the operation is refused with 503.
    const openCreate = await create(failOpen, 'during open 1');
    expectErrorBody(openCreate, 503, 'service_unavailable');
    expect(openCreate.headers['x-ratelimit-limit']).toBe('100000');
    expect(Number(openCreate.headers['retry-after'])).toBeGreaterThanOrEqual(1);

    // Fail-open with categories elsewhere: the request proceeds, limited per process, headers present.
    const proceeded = await record(call(failOpenMemoryCategories, '/v1/categories', { apiKey: KEY }));
    expect(proceeded.status).toBe(200);
    expect(proceeded.headers['x-ratelimit-remaining']).toBe('99999');

    await redis.restart();
    await until(async () => (await call(failClosed, '/v1/categories', { apiKey: KEY })).status === 200, 20_000);
    await until(async () => (await call(failOpen, '/v1/categories', { apiKey: KEY })).status === 200, 20_000);

    for (let i = 0; i < 10; i++) {
      expect((await create(i % 2 === 0 ? failOpen : failClosed, `after ${i}`)).status).toBe(201);
    }

    const listed = (await record(call(failClosed, '/v1/categories', { apiKey: KEY }))).body as Array<{ id: number; name: string }>;
    expect(listed.map((category) => category.name).sort()).toEqual([...createdNames].sort());
    expect(new Set(listed.map((category) => category.id)).size).toBe(listed.length);
    expect(listed).toHaveLength(20);
    for (const name of refusedNames) expect(listed.some((category) => category.name === name)).toBe(false);
    expect(answers.filter((answer) => answer.status >= 500 && answer.status !== 503)).toEqual([]);
  });
});

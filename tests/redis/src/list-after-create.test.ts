/**
 * A list read right after a create on another instance: the list version reads of one turn share one `MGET`, and
 * no read that started before a request may answer it, so each list on instance A holds the category just created
 * on instance B (a full list, one answered from the JSON kept per version, and a conditional one alike). In process
 * (`petstore.handle`), each instance with its own Redis client.
 */
import { randomUUID } from 'node:crypto';
import { createPetstore, staticApiKeys, type Petstore, type PetstoreResponse } from '@petstore/core';
import { memoryRateLimitStore } from '@petstore/storage-memory';
import { redisCategoryStore } from '@petstore/storage-redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { GUARD_CALL_TIMEOUT_MS } from './instances.js';

const redisUrl = inject('redisUrl');
const WRITER = 'list-after-create-key';
const ITERATIONS = 200;

/** `GET /categories`, or with `name` a create of that category, as WRITER. */
function send(petstore: Petstore, { name, ifNoneMatch }: { name?: string; ifNoneMatch?: string } = {}): Promise<PetstoreResponse> {
  const headers: Record<string, string> = { authorization: `Bearer ${WRITER}` };
  if (ifNoneMatch !== undefined) headers['if-none-match'] = ifNoneMatch;
  if (name === undefined) return petstore.handle({ method: 'GET', path: '/categories', headers, clientAddress: '127.0.0.1' });
  headers['content-type'] = 'application/json';
  return petstore.handle({ method: 'POST', path: '/categories', headers, body: { kind: 'bytes', bytes: JSON.stringify({ name }) }, clientAddress: '127.0.0.1' });
}

describe.skipIf(redisUrl === null)('a list on one instance right after a create on another (one Redis)', () => {
  const clients: Redis[] = [];
  const petstores: Petstore[] = [];
  beforeAll(() => {
    const keyPrefix = `petstore-test:${randomUUID()}:`;
    for (let n = 0; n < 2; n++) {
      const client = new Redis(redisUrl as string, { maxRetriesPerRequest: 1 });
      client.on('error', () => undefined);
      clients.push(client);
      // callTimeoutMs: a guard against a hang on a busy machine, not a measurement.
      petstores.push(
        createPetstore({
          apiKeys: staticApiKeys([{ key: WRITER, plan: 'enterprise', limits: { requestsPerMinute: 1_000_000, requestsPerDay: 10_000_000 } }]),
          categories: redisCategoryStore({ client, keyPrefix, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }),
          // The rate limits in memory: what is under test is the category store.
          rateLimit: { store: memoryRateLimitStore() },
        }),
      );
    }
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.quit()));
  });

  it(`lists on A every category created on B just before, ${ITERATIONS} times in a row`, async () => {
    const [a, b] = petstores as [Petstore, Petstore];
    let etag = (await send(a)).headers['etag'] as string;
    for (let i = 0; i < ITERATIONS; i++) {
      // A list on A in flight while B creates: a later list must not take its answer.
      const inFlight = send(a);
      const created = await send(b, { name: `created on B ${i}` });
      expect(created.status).toBe(201);
      const { id } = JSON.parse(created.body as string) as { id: number };
      // Sent together, so that their version reads share one turn.
      const [full, conditional] = await Promise.all([send(a), send(a, { ifNoneMatch: etag })]);
      await inFlight;
      for (const answer of [full, conditional]) {
        expect(answer.status, `iteration ${i}`).toBe(200);
        expect((JSON.parse(answer.body as string) as Array<{ id: number }>).at(-1)?.id, `iteration ${i}`).toBe(id);
      }
      expect(full.headers['etag']).not.toBe(etag);
      etag = full.headers['etag'] as string;
    }
  });
});

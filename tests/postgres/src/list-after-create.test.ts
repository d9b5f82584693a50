/**
 * A list read right after a create on another instance: the list version reads of one turn share one `SELECT`, and
 * no read that started before a request may answer it, so each list on instance A holds the category just created
 * on instance B (a full list, one answered from the JSON kept per version, and a conditional one alike). The list's
 * version read starts beside the request's rate-limit charge: with the rate limits in PostgreSQL too, both go out in
 * the same turn. In process (`petstore.handle`), each instance with its own pool, on the run's PostgreSQL in a
 * schema of its own.
 */
import { randomBytes } from 'node:crypto';
import { createPetstore, staticApiKeys, type Petstore, type PetstoreResponse } from '@petstore/core';
import { memoryRateLimitStore } from '@petstore/storage-memory';
import { migratePostgres, postgresCategoryStore, postgresRateLimitStore } from '@petstore/storage-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { GUARD_CALL_TIMEOUT_MS } from '../../../packages/core/test-support/call-timeout.js';

const postgresUrl = inject('postgresUrl');
const WRITER = 'list-after-create-key';
/** Iterations with the rate limits in memory; in PostgreSQL each request waits for its charge too, so fewer. */
const ITERATIONS = { memory: 200, postgres: 50 } as const;

/** `GET /categories`, or with `name` a create of that category, as WRITER. */
function send(petstore: Petstore, { name, ifNoneMatch }: { name?: string; ifNoneMatch?: string } = {}): Promise<PetstoreResponse> {
  const headers: Record<string, string> = { authorization: `Bearer ${WRITER}` };
  if (ifNoneMatch !== undefined) headers['if-none-match'] = ifNoneMatch;
  if (name === undefined) return petstore.handle({ method: 'GET', path: '/categories', headers, clientAddress: '127.0.0.1' });
  headers['content-type'] = 'application/json';
  return petstore.handle({ method: 'POST', path: '/categories', headers, body: { kind: 'bytes', bytes: JSON.stringify({ name }) }, clientAddress: '127.0.0.1' });
}

describe.skipIf(postgresUrl === null).each(['memory', 'postgres'] as const)('a list on one instance right after a create on another (one PostgreSQL; rate limits in %s)', (rateLimits) => {
  const schema = `postgres_tests_${randomBytes(6).toString('hex')}`;
  const pools: pg.Pool[] = [];
  const petstores: Petstore[] = [];
  beforeAll(async () => {
    const setup = new pg.Pool({ connectionString: postgresUrl as string, max: 1 });
    try {
      await migratePostgres({ pool: setup, schema });
    } finally {
      await setup.end();
    }
    for (let n = 0; n < 2; n++) {
      const pool = new pg.Pool({ connectionString: postgresUrl as string, max: 5 });
      pool.on('error', () => undefined);
      pools.push(pool);
      // callTimeoutMs: a guard against a hang on a busy machine, not a measurement.
      petstores.push(
        createPetstore({
          apiKeys: staticApiKeys([{ key: WRITER, plan: 'enterprise', limits: { requestsPerMinute: 1_000_000, requestsPerDay: 10_000_000 } }]),
          categories: postgresCategoryStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }),
          rateLimit: { store: rateLimits === 'memory' ? memoryRateLimitStore() : postgresRateLimitStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }) },
        }),
      );
    }
  });
  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.end()));
    const pool = new pg.Pool({ connectionString: postgresUrl as string, max: 1 });
    try {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    } finally {
      await pool.end();
    }
  });

  it(`lists on A every category created on B just before, ${ITERATIONS[rateLimits]} times in a row`, async () => {
    const [a, b] = petstores as [Petstore, Petstore];
    let etag = (await send(a)).headers['etag'] as string;
    for (let i = 0; i < ITERATIONS[rateLimits]; i++) {
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
